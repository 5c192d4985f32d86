// Glue between an optimizer's bank and its kernel (library internal).
#pragma once

#include <initializer_list>

#include "kernels/kernels.h"
#include "npuscope/optim/fused_optimizer.h"

namespace npuscope::optim::detail {

// The raw view of `bank` a step kernel needs; `slots` fill StepBuffers::state in order (null for
// a slot no group uses).
inline StepBuffers stepBuffers(const ParamBank& bank, std::initializer_list<const CombinedTensor*> slots) {
  StepBuffers b;
  const CombinedTensor& stepped = bank.stepped();
  b.plan = &stepped.layout().tensorPlan();
  b.type = stepped.dtype();
  b.param = stepped.flat().data_ptr();
  b.grad = bank.steppedGrads().flat().data_ptr();
  if (bank.hasMasters()) {
    b.modelType = bank.params.dtype();
    b.model = bank.params.flat().data_ptr();
  }
  size_t k = 0;
  for (const CombinedTensor* slot : slots) {
    TORCH_INTERNAL_ASSERT(k < b.state.size());
    b.state[k++] = slot != nullptr ? slot->flat().data_ptr() : nullptr;
  }
  b.tensorGroup = bank.tensorGroup.data();
  return b;
}

// A host-side scalar as the float kernels use it: computed in double, rounded once (what torch
// does with a Scalar argument of a float32 op).
inline float f32(double v) { return static_cast<float>(v); }

}  // namespace npuscope::optim::detail
