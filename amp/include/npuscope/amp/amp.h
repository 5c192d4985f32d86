// npuscope_amp: apex-style Amp (O0-O3, loss scaling, combine_grad) on the npu device.
// Filled by the AMP issue; this header names the component.
#pragma once
namespace npuscope::amp {
const char* componentName();
}
