// npuscope_optim: combined (flattened) tensors, multi-tensor ops, the eight fused optimizers and
// fp32 master weights. Include this for everything, or the narrower headers it lists.
#pragma once

#include "npuscope/optim/combined_tensor.h"
#include "npuscope/optim/fused_optimizer.h"
#include "npuscope/optim/fused_optimizers.h"
#include "npuscope/optim/multi_tensor.h"

namespace npuscope::optim {
const char* componentName();
}
