// npu storages, CPU aliases over them, zero-copy re-wrapping, low-precision rounding and the
// float-status check.
#include "aten/npu_tensor.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Half.h>
#include <c10/util/BFloat16.h>

#include <cmath>
#include <limits>

#include "npuscope/device/npu.h"

namespace npuscope::npu::aten {
namespace {

void releaseBlock(void* ctx) { npu::release(ctx); }

at::DataPtr allocateOn(int device, size_t nbytes, c10::Device dp_device) {
  auto block = npu::allocate(device, nbytes);
  TORCH_CHECK(block.isOk(), block.status().message());
  return {block->data, block->context, &releaseBlock, dp_device};
}

// Storages of npu tensors.
class NpuAllocator final : public c10::Allocator {
 public:
  at::DataPtr allocate(size_t nbytes) const override {
    const int dev = npu::current_device();
    if (nbytes == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, c10::Device(kDeviceType, dev)};
    return allocateOn(dev, nbytes, c10::Device(kDeviceType, dev));
  }
  at::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

thread_local int t_alloc_device = -1;

// Replaces the CPU allocator: inside a DeviceAllocationScope, CPU memory comes from the device's
// pool; otherwise the default CPU allocator serves, unchanged.
class DeviceAwareCpuAllocator final : public c10::Allocator {
 public:
  explicit DeviceAwareCpuAllocator(c10::Allocator* base) : base_(base) {}
  at::DataPtr allocate(size_t nbytes) const override {
    if (t_alloc_device < 0 || nbytes == 0) return base_->allocate(nbytes);
    return allocateOn(t_alloc_device, nbytes, c10::Device(c10::kCPU));
  }
  at::DeleterFnPtr raw_deleter() const override { return nullptr; }

 private:
  c10::Allocator* base_;
};

NpuAllocator g_npu_allocator;
DeviceAwareCpuAllocator g_cpu_allocator(c10::GetDefaultCPUAllocator());

struct InstallCpuAllocator {
  InstallCpuAllocator() { c10::SetCPUAllocator(&g_cpu_allocator, /*priority=*/10); }
} g_install_cpu_allocator;

// Keeps a CPU storage alive behind an npu DataPtr that does not own the memory.
void releaseStorageRef(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }

template <typename T>
bool anyNonFinite(const T* p, int64_t n) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(static_cast<float>(p[i]));
  return bad;
}

bool halfBitsNonFinite(const uint16_t* p, int64_t n, uint16_t exp_mask) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= (p[i] & exp_mask) == exp_mask;
  return bad;
}

bool hasNonFinite(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0 || !at::isFloatingType(t.scalar_type())) return false;
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  const int64_t n = c.numel();
  switch (c.scalar_type()) {
    case c10::kFloat: return anyNonFinite(c.data_ptr<float>(), n);
    case c10::kHalf: return halfBitsNonFinite(static_cast<const uint16_t*>(c.data_ptr()), n, 0x7C00);
    case c10::kBFloat16: return halfBitsNonFinite(static_cast<const uint16_t*>(c.data_ptr()), n, 0x7F80);
    case c10::kDouble: {
      const double* p = c.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(p[i])) return true;
      return false;
    }
    default: return false;
  }
}

// Internal work of the device: invisible to profilers and dumpers, drawn from the device pool.
struct InternalWork {
  explicit InternalWork(int device) : alloc(device) {}
  npu::InternalScope internal;
  at::DisableRecordFunctionGuard no_record;
  DeviceAllocationScope alloc;
};

}  // namespace

c10::Allocator* npuAllocator() { return &g_npu_allocator; }

DeviceAllocationScope::DeviceAllocationScope(int device) : prev_(t_alloc_device) { t_alloc_device = device; }
DeviceAllocationScope::~DeviceAllocationScope() { t_alloc_device = prev_; }

int deviceIndex(const at::Tensor& t) { return t.device().index() < 0 ? 0 : t.device().index(); }
bool isNpu(const at::Tensor& t) { return t.defined() && t.device().type() == kDeviceType; }

void checkDtypeSupported(c10::ScalarType s, const char* op) {
  TORCH_CHECK(s != c10::kDouble && s != c10::kComplexDouble, op,
              ": the npu device does not support ", c10::toString(s),
              " (Ascend NPUs have no fp64); use float32 or keep this tensor on the CPU");
}

at::Tensor aliasAsCpu(const at::Tensor& npu) {
  c10::TensorImpl* impl = npu.unsafeGetTensorImpl();
  const c10::Storage& st = impl->storage();
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), st.nbytes(),
      at::DataPtr(const_cast<void*>(st.data()), c10::Device(c10::kCPU)), c10::GetCPUAllocator(),
      /*resizable=*/true);
  auto alias = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                        c10::DispatchKeySet(c10::DispatchKey::CPU), npu.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(npu.sizes(), npu.strides(), npu.storage_offset());
  return alias;
}

void syncMutatedAlias(const at::Tensor& npu, const at::Tensor& alias, const void* original_data) {
  c10::TensorImpl* nimpl = npu.unsafeGetTensorImpl();
  c10::TensorImpl* aimpl = alias.unsafeGetTensorImpl();
  c10::StorageImpl* ast = aimpl->storage().unsafeGetStorageImpl();
  c10::StorageImpl* nst = nimpl->storage().unsafeGetStorageImpl();
  if (ast->data() != original_data || ast->nbytes() != nst->nbytes()) {
    if (ast->data() != original_data && aimpl->storage().use_count() == 1 && ast->data_ptr().get_context() != nullptr &&
        ast->data_ptr().get_deleter() == &releaseBlock) {
      // The kernel reallocated the alias from the device pool: move that memory to the npu storage.
      at::DataPtr dp = ast->set_data_ptr(at::DataPtr(nullptr, c10::Device(c10::kCPU)));
      dp.unsafe_set_device(c10::Device(kDeviceType, deviceIndex(npu)));
      const size_t nbytes = ast->nbytes();
      nst->set_data_ptr_noswap(std::move(dp));
      nst->set_nbytes(nbytes);
      ast->set_data_ptr_noswap(at::DataPtr(nst->data(), c10::Device(c10::kCPU)));
    } else if (ast->data() != original_data) {
      nimpl->set_storage_keep_dtype(npuStorageFor(aimpl->storage(), deviceIndex(npu), /*may_adopt=*/false));
    } else {
      nst->set_nbytes(ast->nbytes());
    }
  }
  if (npu.sizes() != alias.sizes() || npu.strides() != alias.strides() ||
      npu.storage_offset() != alias.storage_offset()) {
    nimpl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
  }
}

c10::Storage npuStorageFor(const c10::Storage& cpu, int device, bool may_adopt) {
  c10::StorageImpl* st = cpu.unsafeGetStorageImpl();
  const c10::Device dev(kDeviceType, device);
  at::DataPtr dp;
  if (may_adopt && cpu.use_count() == 1) {
    // Nothing else holds the CPU storage: adopt its memory.
    dp = st->set_data_ptr(at::DataPtr(nullptr, c10::Device(c10::kCPU)));
    dp.unsafe_set_device(dev);
  } else {
    c10::raw::intrusive_ptr::incref(st);
    dp = at::DataPtr(const_cast<void*>(st->data()), st, &releaseStorageRef, dev);
  }
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), st->nbytes(),
                                                            std::move(dp), npuAllocator(), /*resizable=*/true));
}

at::Tensor wrapAsNpu(const at::Tensor& cpu, int device) {
  // Adopt the memory only when this tensor is the storage's sole user and nobody else holds it.
  const bool sole = cpu.use_count() == 1;
  auto t = at::detail::make_tensor<c10::TensorImpl>(npuStorageFor(cpu.storage(), device, sole),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), cpu.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  return t;
}

at::Tensor npuViewLike(const at::Tensor& npu_base, const at::Tensor& view) {
  // The VIEW constructor takes the key set as given: pass the base's (with its autograd keys).
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(npu_base.storage()),
                                                    npu_base.key_set(), view.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(view.sizes(), view.strides(), view.storage_offset());
  return t;
}

at::Tensor upcast(const at::Tensor& cpu) {
  InternalWork work(t_alloc_device);
  return cpu.to(c10::kFloat);
}

namespace {
float formatMax(c10::ScalarType s) {
  return s == c10::kHalf ? 65504.0f : std::numeric_limits<float>::max();
}
}  // namespace

at::Tensor downcast(const at::Tensor& fp32, c10::ScalarType target, int device) {
  InternalWork work(device);
  if (npu::overflow_mode() == OverflowMode::kSaturation) {
    const float m = formatMax(target);
    if (npu::float_status_tracking()) {
      if (fp32.isnan().any().item<bool>() || fp32.abs().gt(m).any().item<bool>()) npu::raise_float_status(device);
    }
    return fp32.nan_to_num(0.0, m, -m).clamp(-m, m).to(target);
  }
  at::Tensor r = fp32.to(target);
  if (npu::float_status_tracking() && hasNonFinite(r)) npu::raise_float_status(device);
  return r;
}

void copyWithStatus(const at::Tensor& dst, const at::Tensor& src, int device) {
  InternalWork work(device);
  if (isLowPrecision(dst.scalar_type()) && at::isFloatingType(src.scalar_type()) &&
      npu::overflow_mode() == OverflowMode::kSaturation) {
    dst.copy_(downcast(src.to(c10::kFloat), dst.scalar_type(), device));
    return;
  }
  dst.copy_(src);
  if (npu::float_status_tracking() && hasNonFinite(dst)) npu::raise_float_status(device);
}

void checkFloatStatus(const at::Tensor& cpu, int device) {
  if (!npu::float_status_tracking()) return;
  InternalWork work(device);
  if (hasNonFinite(cpu)) npu::raise_float_status(device);
}

}  // namespace npuscope::npu::aten
