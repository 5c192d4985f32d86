#include "aten/npu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

#include "aten/npu_fallback.h"
#include "aten/npu_tensor.h"
#include "npuscope/device/npu.h"

namespace npuscope::npu::aten {
namespace {

int indexOf(c10::optional<at::Device> device) {
  return device && device->has_index() ? device->index() : npu::current_device();
}

void checkDevice(int index) {
  const Status s = npu::check_device(index);
  TORCH_CHECK(s.isOk(), s.message());
}

}  // namespace

at::Tensor empty_memory_format(c10::SymIntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                               c10::optional<bool> pin_memory, c10::optional<at::MemoryFormat> memory_format) {
  const auto st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  checkDtypeSupported(st, "aten::empty");
  const int index = indexOf(device);
  checkDevice(index);
  c10::DeviceGuard guard(c10::Device(kDeviceType, index));
  return at::detail::empty_generic(c10::asIntArrayRefSlow(size), npuAllocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st, memory_format);
}

at::Tensor empty_strided(c10::SymIntArrayRef size, c10::SymIntArrayRef stride, c10::optional<at::ScalarType> dtype,
                         c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                         c10::optional<bool> pin_memory) {
  const auto st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  checkDtypeSupported(st, "aten::empty_strided");
  const int index = indexOf(device);
  checkDevice(index);
  c10::DeviceGuard guard(c10::Device(kDeviceType, index));
  return at::detail::empty_strided_generic(c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride),
                                           npuAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      c10::optional<c10::SymInt> storage_offset) {
  c10::optional<int64_t> offset;
  if (storage_offset) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride),
                                           offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, c10::asIntArrayRefSlow(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          c10::optional<at::MemoryFormat> memory_format) {
  // Storage growth goes through the storage's allocator (the npu one) on the tensor's device.
  c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, c10::asIntArrayRefSlow(size), memory_format);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // self: source, dst: destination; either or both are npu tensors (all npu memory is host memory).
  const int device = isNpu(dst) ? deviceIndex(dst) : deviceIndex(self);
  DeviceAllocationScope alloc(device);
  const OpObserver observer = isNpu(dst) && !npu::InternalScope::active() ? npu::op_observer() : nullptr;
  static const c10::FunctionSchema& schema =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::_copy_from", "").schema();
  if (observer) observer(OpPhase::kBefore, schema, c10::ArrayRef<c10::IValue>(c10::IValue(self)));
  const at::Tensor src_cpu = isNpu(self) ? aliasAsCpu(self) : self;
  const at::Tensor dst_cpu = isNpu(dst) ? aliasAsCpu(dst) : dst;
  {
    EmulatorWork inside(deviceThread());  // the CPU copy it dispatches is not recorded
    if (isNpu(dst)) {
      checkDtypeSupported(dst.scalar_type(), "aten::copy_");
      copyWithStatus(dst_cpu, src_cpu, device);
    } else {
      npu::InternalScope internal;
      dst_cpu.copy_(src_cpu);
    }
  }
  if (observer) observer(OpPhase::kAfter, schema, c10::ArrayRef<c10::IValue>(c10::IValue(dst)));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups) {
  // aten::convolution has the same arguments; its CPU path picks mkldnn/slow kernels.
  static const auto conv = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  torch::jit::Stack stack;
  torch::jit::push(stack, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  runOnCpu(conv, conv.schema(), &stack);
  return stack.back().toTensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  static const auto bwd = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  std::vector<int64_t> bias_sizes;
  if (output_mask[2]) bias_sizes = {transposed ? weight.size(1) * groups : weight.size(0)};
  torch::jit::Stack stack;
  c10::optional<at::IntArrayRef> bias_opt;
  if (output_mask[2]) bias_opt = at::IntArrayRef(bias_sizes);
  torch::jit::push(stack, grad_output, input, weight, bias_opt, stride, padding, dilation, transposed,
                   output_padding, groups, output_mask);
  runOnCpu(bwd, bwd.schema(), &stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  // torch's rule for dense tensors (CPU <-> CUDA): both strided and dense. Module::to(npu) swaps
  // a CPU parameter's data for an npu tensor through this check.
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.device().is_cpu() || t.device().type() == kDeviceType);
  };
  return dense(self) && dense(from);
}

at::Tensor to_copy(const at::Tensor& self, c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                   c10::optional<at::Device> device, c10::optional<bool> pin_memory, bool non_blocking,
                   c10::optional<at::MemoryFormat> memory_format) {
  const bool to_npu = device ? device->type() == kDeviceType : isNpu(self);
  if (to_npu) checkDtypeSupported(dtype.value_or(self.scalar_type()), "aten::_to_copy");
  // The composite implementation (empty + copy_) does the rest.
  return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
}

}  // namespace npuscope::npu::aten
