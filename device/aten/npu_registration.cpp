// Registration table of the npu device (PrivateUse1): explicit kernels, the boxed fallback, and
// the shallow-copy check at the autograd key. Kernels live in npu_kernels.cpp / npu_fallback.cpp.
#include <torch/library.h>

#include "aten/npu_fallback.h"
#include "aten/npu_fast_ops.h"
#include "aten/npu_kernels.h"

namespace npuscope::npu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("_to_copy", TORCH_FN(to_copy));
  // Fast paths (npu_fast_ops.h): same results as the fallback, less overhead per call.
  m.impl("add_.Tensor", TORCH_FN(add_inplace));
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("sub_.Tensor", TORCH_FN(sub_inplace));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("mul_.Tensor", TORCH_FN(mul_inplace));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("div_.Tensor", TORCH_FN(div_inplace));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("bmm.out", torch::CppFunction::makeFromBoxedFunction<&npuBmmOut>());
  // Ops that also have a CompositeImplicitAutograd kernel: the dispatcher would prefer that
  // decomposition to the backend fallback, so the npu would not compute what the CPU computes
  // (a few ulps apart). Routing them explicitly to the fallback runs the CPU kernel itself.
  // mse_loss likewise: its CompositeExplicitAutograd kernel calls mse_loss.out with a 0-dim
  // result, which the CPU out= kernel resizes with a deprecation warning at every first call.
  for (const char* name : {"native_layer_norm", "native_group_norm", "silu_backward", "mish_backward", "mse_loss"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
  }
  // Comparisons: torch's structured wrapper would allocate the result with the inputs' strides
  // (a transposed input gives a transposed bool tensor); torch_npu's kernels write it contiguous,
  // and scripts rely on it (the ImageNet examples' accuracy(): `correct[:k].view(-1)` after
  // `pred.t().eq(...)`). The fallback runs the CPU kernel and returns the result contiguous.
  // (Other ops keep the CPU kernel's strides, as the op-parity tests require.)
  for (const char* name : {"eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "lt.Tensor", "lt.Scalar", "le.Tensor",
                           "le.Scalar", "gt.Tensor", "gt.Scalar", "ge.Tensor", "ge.Scalar"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&npuFallbackContiguous>());
  }
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npuFallback>());
}

}  // namespace npuscope::npu::aten
