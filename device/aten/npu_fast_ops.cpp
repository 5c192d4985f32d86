#include "aten/npu_fast_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <ATen/ops/sub_ops.h>

#include "aten/npu_fallback.h"
#include "aten/npu_tensor.h"
#include "npuscope/device/npu.h"
#include "npuscope/device/runtime.h"

namespace npuscope::npu::aten {
namespace {

// The fast path handles full-precision npu `self` with an npu `other` on the same device or a
// CPU scalar tensor, while float-status tracking is off and no op observer is set.
bool fastEligible(const at::Tensor& self, const at::Tensor& other) {
  if (npu::float_status_tracking() || npu::op_observer() || !isNpu(self) || isLowPrecision(self.scalar_type())) return false;
  if (isNpu(other)) return other.device() == self.device() && !isLowPrecision(other.scalar_type());
  return other.dim() == 0 && other.device().is_cpu() && !isLowPrecision(other.scalar_type());
}

template <class Op, class... Args>
void boxed(Args&&... args) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
  torch::jit::Stack stack;
  torch::jit::push(stack, std::forward<Args>(args)...);
  npuFallback(op, &stack);
}

// `cpu` is the op's CPU kernel called directly (at::cpu::add and the like, what a redispatch to
// the CPU key would reach through one more dispatcher pass).
template <class Op, class Cpu, class... Extra>
at::Tensor fastFunctional(Cpu cpu, const at::Tensor& self, const at::Tensor& other, const Extra&... extra) {
  if (!fastEligible(self, other)) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    torch::jit::Stack stack;
    torch::jit::push(stack, self, other, extra...);
    npuFallback(op, &stack);
    return stack.back().toTensor();
  }
  const int device = deviceIndex(self);
  DeviceThread& thread = deviceThread();
  DeviceAllocationScope scope(thread, device);
  at::Tensor a = aliasAsCpu(thread, self);
  at::Tensor b = isNpu(other) ? aliasAsCpu(thread, other) : other;
  at::Tensor r = cpu(a, b, extra...);
  at::Tensor out = wrapAsNpu(r, device);
  recycleAlias(thread, std::move(a));
  if (isNpu(other)) recycleAlias(thread, std::move(b));
  return out;
}

template <class Op, class Cpu, class... Extra>
at::Tensor& fastInplace(Cpu cpu, at::Tensor& self, const at::Tensor& other, const Extra&... extra) {
  if (!fastEligible(self, other)) {
    boxed<Op>(self, other, extra...);
    return self;
  }
  DeviceThread& thread = deviceThread();
  DeviceAllocationScope scope(thread, deviceIndex(self));
  at::Tensor a = aliasAsCpu(thread, self);
  const void* data = a.unsafeGetTensorImpl()->storage().data();
  at::Tensor b = isNpu(other) ? aliasAsCpu(thread, other) : other;
  cpu(a, b, extra...);
  // An in-place structured kernel checks that its output keeps its sizes and never resizes it:
  // only a re-pointed storage (which it does not do either) would need carrying back.
  if (a.unsafeGetTensorImpl()->storage().data() != data) syncMutatedAlias(self, a, data);
  recycleAlias(thread, std::move(a));
  if (isNpu(other)) recycleAlias(thread, std::move(b));
  return self;
}

}  // namespace

at::Tensor& add_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return fastInplace<at::_ops::add__Tensor>(
      [](at::Tensor& a, const at::Tensor& b, const at::Scalar& s) -> at::Tensor& { return at::cpu::add_(a, b, s); },
      self, other, alpha);
}
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return fastFunctional<at::_ops::add_Tensor>(
      [](const at::Tensor& a, const at::Tensor& b, const at::Scalar& s) { return at::cpu::add(a, b, s); },
      self, other, alpha);
}
at::Tensor& sub_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return fastInplace<at::_ops::sub__Tensor>(
      [](at::Tensor& a, const at::Tensor& b, const at::Scalar& s) -> at::Tensor& { return at::cpu::sub_(a, b, s); },
      self, other, alpha);
}
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return fastFunctional<at::_ops::sub_Tensor>(
      [](const at::Tensor& a, const at::Tensor& b, const at::Scalar& s) { return at::cpu::sub(a, b, s); },
      self, other, alpha);
}
at::Tensor& mul_inplace(at::Tensor& self, const at::Tensor& other) {
  return fastInplace<at::_ops::mul__Tensor>(
      [](at::Tensor& a, const at::Tensor& b) -> at::Tensor& { return at::cpu::mul_(a, b); }, self, other);
}
at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return fastFunctional<at::_ops::mul_Tensor>(
      [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::mul(a, b); }, self, other);
}
at::Tensor& div_inplace(at::Tensor& self, const at::Tensor& other) {
  return fastInplace<at::_ops::div__Tensor>(
      [](at::Tensor& a, const at::Tensor& b) -> at::Tensor& { return at::cpu::div_(a, b); }, self, other);
}
at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return fastFunctional<at::_ops::div_Tensor>(
      [](const at::Tensor& a, const at::Tensor& b) { return at::cpu::div(a, b); }, self, other);
}

}  // namespace npuscope::npu::aten
