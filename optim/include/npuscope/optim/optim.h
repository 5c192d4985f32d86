// npuscope_optim: combined (flattened) tensors, multi-tensor ops and the eight fused optimizers.
// Filled by the optimizers issue; this header names the component.
#pragma once
namespace npuscope::optim {
const char* componentName();
}
