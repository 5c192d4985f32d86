#include "autocast_kernels.h"

#include <c10/core/ScalarType.h>
#include <ATen/core/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace npuscope::amp {
namespace {

constexpr c10::DispatchKey kAutocastKey = c10::DispatchKey::AutocastXPU;

thread_local c10::ScalarType t_dtype = c10::kHalf;

// A tensor O1 may cast: floating, not fp64, on the npu.
bool eligible(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && at::isFloatingType(t.scalar_type()) &&
         t.scalar_type() != at::kDouble;
}

// Calls f(tensor) for every tensor in `v` (a tensor, a tensor list or a list of optional
// tensors) and replaces it with f's result. Lists are rebuilt, never mutated: a boxed caller
// may still hold the original.
template <class F>
void mapTensors(c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    v = c10::IValue(f(v.toTensor()));
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> in = v.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) out.push_back(f(in.get(i)));
    v = c10::IValue(std::move(out));
  } else if (v.isList()) {
    c10::impl::GenericList in = v.toList();
    c10::impl::GenericList out(in.elementType());
    out.reserve(in.size());
    bool any = false;
    for (size_t i = 0; i < in.size(); ++i) {
      c10::IValue e = in.get(i);
      if (e.isTensor()) {
        e = c10::IValue(f(e.toTensor()));
        any = true;
      }
      out.push_back(std::move(e));
    }
    if (any) v = c10::IValue(std::move(out));
  }
}

template <class F>
void visitTensors(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) f(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) f(e.toTensor());
    }
  }
}

}  // namespace

const char* castPolicyName(CastPolicy policy) {
  switch (policy) {
    case CastPolicy::kLowPrecision: return "low_precision";
    case CastPolicy::kFp32: return "fp32";
    case CastPolicy::kPromote: return "promote";
    case CastPolicy::kRefuse: return "refuse";
  }
  return "?";
}

AutocastGuard::AutocastGuard(bool enabled, c10::ScalarType dtype)
    : prevIncluded_(c10::impl::tls_is_dispatch_key_included(kAutocastKey)),
      prevExcluded_(c10::impl::tls_is_dispatch_key_excluded(kAutocastKey)),
      prevDtype_(t_dtype) {
  TORCH_CHECK(dtype == c10::kHalf || dtype == c10::kBFloat16, "AutocastGuard: dtype ", dtype,
              ": expected Half (fp16) or BFloat16 (bf16)");
  if (enabled) detail::ensureAutocastRegistered();
  c10::impl::tls_set_dispatch_key_included(kAutocastKey, enabled);
  c10::impl::tls_set_dispatch_key_excluded(kAutocastKey, !enabled);
  t_dtype = dtype;
}

AutocastGuard::~AutocastGuard() {
  c10::impl::tls_set_dispatch_key_included(kAutocastKey, prevIncluded_);
  c10::impl::tls_set_dispatch_key_excluded(kAutocastKey, prevExcluded_);
  t_dtype = prevDtype_;
}

bool autocastEnabled() {
  return c10::impl::tls_is_dispatch_key_included(kAutocastKey) && !c10::impl::tls_is_dispatch_key_excluded(kAutocastKey);
}

c10::ScalarType autocastDtype() { return t_dtype; }

namespace detail {

template <CastPolicy P>
void autocastKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  // Everything below, the casts included, runs as if autocast were off; the casts still pass
  // through Autograd, so backward sees them.
  c10::impl::ExcludeDispatchKeyGuard noAutocast(kAutocastKey);
  const size_t nargs = op.schema().arguments().size();
  const auto first = stack->end() - static_cast<std::ptrdiff_t>(nargs);

  if constexpr (P == CastPolicy::kRefuse) {
    TORCH_CHECK(false, op.schema().name(),
                " is refused under O1 autocast: it is unsafe to run in float16 (sigmoid outputs near 0 or 1 "
                "lose their precision); use binary_cross_entropy_with_logits (BCEWithLogitsLoss), which is "
                "cast to fp32");
  } else {
    at::ScalarType target = at::ScalarType::Undefined;
    if constexpr (P == CastPolicy::kLowPrecision) {
      target = t_dtype;
    } else if constexpr (P == CastPolicy::kFp32) {
      target = at::kFloat;
    } else {
      for (auto it = first; it != stack->end(); ++it) {
        visitTensors(*it, [&](const at::Tensor& t) {
          if (!eligible(t)) return;
          target = target == at::ScalarType::Undefined ? t.scalar_type() : c10::promoteTypes(target, t.scalar_type());
        });
      }
    }
    if (target != at::ScalarType::Undefined) {
      for (auto it = first; it != stack->end(); ++it) {
        mapTensors(*it, [&](const at::Tensor& t) -> at::Tensor {
          if (!eligible(t) || t.scalar_type() == target) return t;
          return t.to(target);
        });
      }
    }
  }
  op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kAutocastKey), stack);
}

template void autocastKernel<CastPolicy::kLowPrecision>(const c10::OperatorHandle&, c10::DispatchKeySet,
                                                        torch::jit::Stack*);
template void autocastKernel<CastPolicy::kFp32>(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*);
template void autocastKernel<CastPolicy::kPromote>(const c10::OperatorHandle&, c10::DispatchKeySet,
                                                   torch::jit::Stack*);
template void autocastKernel<CastPolicy::kRefuse>(const c10::OperatorHandle&, c10::DispatchKeySet,
                                                  torch::jit::Stack*);

}  // namespace detail
}  // namespace npuscope::amp
