// npu storages, CPU aliases over them, zero-copy re-wrapping, low-precision rounding and the
// float-status check.
#include "aten/npu_tensor.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Half.h>
#include <c10/util/BFloat16.h>

#include <cmath>
#include <limits>
#include <optional>

#include "aten/low_precision.h"
#include "npuscope/device/npu.h"

namespace npuscope::npu::aten {
namespace {

void releaseBlock(void* ctx) { npu::release(ctx); }

at::DataPtr allocateOn(int device, size_t nbytes, c10::Device dp_device) {
  auto block = npu::allocate(device, nbytes);
  TORCH_CHECK(block.isOk(), block.status().message());
  return {*block, *block, &releaseBlock, dp_device};
}

// Storages of npu tensors.
class NpuAllocator final : public c10::Allocator {
 public:
  at::DataPtr allocate(size_t nbytes) const override {
    const int dev = npu::current_device();
    return allocateOn(dev, nbytes, c10::Device(kDeviceType, dev));
  }
  at::DeleterFnPtr raw_deleter() const override { return &releaseBlock; }
};

thread_local DeviceThread t_device_thread;

// Replaces the CPU allocator: inside a DeviceAllocationScope, CPU memory comes from the device's
// pool; otherwise it is plain host memory. Both carry the runtime's block header, so one raw
// deleter serves both (libtorch kernels use raw_allocate for scratch buffers).
class DeviceAwareCpuAllocator final : public c10::Allocator {
 public:
  at::DataPtr allocate(size_t nbytes) const override {
    const int device = t_device_thread.alloc_device;
    if (device >= 0) return allocateOn(device, nbytes, c10::Device(c10::kCPU));
    void* p = npu::allocate_host(nbytes);
    if (!p) throw std::bad_alloc();
    return {p, p, &releaseBlock, c10::Device(c10::kCPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &releaseBlock; }
};

NpuAllocator g_npu_allocator;
DeviceAwareCpuAllocator g_cpu_allocator;

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

// Internal work of the device (dtype round trips, status checks): invisible to the recorder and
// the dumpers, drawn from the device pool. The recorder skips it as it skips an npu op's CPU
// kernel (EmulatorWork): disabling RecordFunction instead rebuilds the thread's callback lists
// twice, about 0.35 us per use with no profiler at all, three uses in a typical fp16 op.
struct InternalWork {
  explicit InternalWork(int device) : emulator(t_device_thread), alloc(t_device_thread, device) {}
  npu::InternalScope internal;
  EmulatorWork emulator;
  DeviceAllocationScope alloc;
};

}  // namespace

c10::Allocator* npuAllocator() { return &g_npu_allocator; }

DeviceThread& deviceThread() { return t_device_thread; }

}  // namespace npuscope::npu::aten

namespace npuscope::npu {
const int* emulator_work_counter() { return &aten::deviceThread().emulator_work; }
}  // namespace npuscope::npu

namespace npuscope::npu::aten {

void checkDtypeSupported(c10::ScalarType s, const char* op) {
  TORCH_CHECK(s != c10::kDouble && s != c10::kComplexDouble, op,
              ": the npu device does not support ", c10::toString(s),
              " (Ascend NPUs have no fp64); use float32 or keep this tensor on the CPU");
}

namespace {
// Alias tensors are re-pointed rather than rebuilt: a fresh one costs a StorageImpl and a
// TensorImpl (two allocations and a constructor), a recycled one a few stores.
constexpr size_t kAliasPoolSize = 16;

at::Tensor freshAlias(const at::Tensor& npu) {
  const c10::Storage& st = npu.unsafeGetTensorImpl()->storage();
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), st.nbytes(),
      at::DataPtr(const_cast<void*>(st.data()), c10::Device(c10::kCPU)), c10::GetCPUAllocator(),
      /*resizable=*/true);
  return at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                  c10::DispatchKeySet(c10::DispatchKey::CPU), npu.dtype());
}

at::Tensor recycledAlias(DeviceThread& thread, const at::Tensor& npu) {
  auto& pool = thread.alias_pool;
  for (size_t i = pool.size(); i-- > 0;) {
    at::Tensor& a = pool[i];
    // Reusable only when nothing else holds it or its storage (a kernel may have kept a view).
    if (a.dtype() != npu.dtype() || a.use_count() != 1 || a.storage().use_count() != 1) continue;
    at::Tensor out = std::move(a);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    const c10::Storage& st = npu.unsafeGetTensorImpl()->storage();
    c10::StorageImpl* ast = out.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
    ast->set_data_ptr_noswap(at::DataPtr(const_cast<void*>(st.data()), c10::Device(c10::kCPU)));
    ast->set_nbytes(st.nbytes());
    return out;
  }
  return freshAlias(npu);
}

// The same sizes, strides and storage offset; compared in place (IntArrayRef's operator== is a
// memcmp call per array, and a small op compares four of them).
C10_ALWAYS_INLINE bool sameLayout(const c10::TensorImpl& a, const c10::TensorImpl& b) {
  const size_t dims = a.dim();
  if (dims != static_cast<size_t>(b.dim()) || a.storage_offset() != b.storage_offset()) return false;
  const int64_t* as = a.sizes().data();
  const int64_t* bs = b.sizes().data();
  const int64_t* at = a.strides().data();
  const int64_t* bt = b.strides().data();
  for (size_t i = 0; i < dims; ++i) {
    if (as[i] != bs[i] || at[i] != bt[i]) return false;
  }
  return true;
}
}  // namespace

at::Tensor aliasAsCpu(DeviceThread& thread, const at::Tensor& npu) {
  at::Tensor alias = recycledAlias(thread, npu);
  c10::TensorImpl* impl = alias.unsafeGetTensorImpl();
  // A recycled alias often had this layout already (the same op again): setting it anyway
  // recomputes numel and every contiguity flag, a good part of a small op's cost on the npu.
  if (!sameLayout(*impl, *npu.unsafeGetTensorImpl())) {
    impl->set_sizes_and_strides(npu.sizes(), npu.strides(), npu.storage_offset());
  }
  impl->_set_conj(npu.is_conj());
  impl->_set_neg(npu.is_neg());
  return alias;
}

at::Tensor owningAliasAsCpu(const at::Tensor& npu) {
  c10::StorageImpl* owner = npu.storage().unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(owner);  // released with the alias's DataPtr
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), owner->nbytes(),
      at::DataPtr(owner->data(), owner, releaseStorageRef, c10::Device(c10::kCPU)), nullptr, /*resizable=*/false);
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                              c10::DispatchKeySet(c10::DispatchKey::CPU), npu.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(npu.sizes(), npu.strides(), npu.storage_offset());
  return alias;
}

void recycleAlias(DeviceThread& thread, at::Tensor&& alias) {
  if (alias.defined() && thread.alias_pool.size() < kAliasPoolSize) thread.alias_pool.push_back(std::move(alias));
}

void syncMutatedAlias(const at::Tensor& npu, const at::Tensor& alias, const void* original_data) {
  c10::TensorImpl* nimpl = npu.unsafeGetTensorImpl();
  c10::TensorImpl* aimpl = alias.unsafeGetTensorImpl();
  c10::StorageImpl* ast = aimpl->storage().unsafeGetStorageImpl();
  c10::StorageImpl* nst = nimpl->storage().unsafeGetStorageImpl();
  if (ast->data() != original_data || ast->nbytes() != nst->nbytes()) {
    if (ast->data() != original_data && aimpl->storage().use_count() == 1 &&
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
  if (!sameLayout(*nimpl, *aimpl)) {
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

namespace {
// Largest finite |x| of a floating tensor, how many elements are NaN, and how many are infinite
// or at least `limit` in magnitude (what rounds past a narrower format's largest value).
struct Magnitude {
  double max_abs = 0;
  int64_t over = 0, nan = 0;
};
Magnitude magnitudeOf(const at::Tensor& t, double limit) {
  Magnitude m;
  if (!t.defined() || t.numel() == 0 || !at::isFloatingType(t.scalar_type())) return m;
  const at::Tensor c = t.to(c10::kDouble).contiguous();
  const double* p = c.data_ptr<double>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i) {
    const double v = p[i];
    if (std::isnan(v)) {
      ++m.nan;
    } else if (std::isinf(v) || std::fabs(v) >= limit) {
      ++m.over;
      if (!std::isinf(v)) m.max_abs = std::max(m.max_abs, std::fabs(v));
    } else {
      m.max_abs = std::max(m.max_abs, std::fabs(v));
    }
  }
  return m;
}

const char* dtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    default: return c10::toString(t);
  }
}

thread_local int t_overflow_scopes = 0;  // OverflowOpScope frames on this thread
thread_local std::optional<npu::OverflowSite> t_pending_overflow;  // awaiting its op's inputs
thread_local bool t_has_pending = false;  // t_pending_overflow is set (a plain flag: read per op)

// A result overflowed: raise the register, and describe the first one of the window. `values`:
// the result as computed (fp32 before rounding when `rounding`), `stored`: as kept.
void noteOverflow(const at::Tensor& values, const at::Tensor& stored, int device, bool rounding) {
  npu::raise_float_status(device);
  if (npu::overflow_site_observer() == nullptr || !npu::take_overflow_window()) return;
  InternalWork work(device);
  npu::OverflowSite site;
  site.device = device;
  site.dtype = dtypeName(stored.scalar_type());
  site.rounding = rounding;
  site.numel = values.numel();
  // The smallest magnitude that rounds past the format's largest value (its max plus half an
  // ulp: 65504 + 16 for fp16, 2^128 - 2^119 for bf16).
  const double limit = !rounding                              ? std::numeric_limits<double>::infinity()
                       : stored.scalar_type() == c10::kHalf ? 65520.0
                                                            : 3.3961775292304e38;
  const Magnitude m = magnitudeOf(values, limit);
  site.out_max_abs = m.max_abs;
  site.out_inf = m.over;
  site.out_nan = m.nan;
  if (t_overflow_scopes > 0) {
    t_pending_overflow = site;
    t_has_pending = true;
  } else if (auto observer = npu::overflow_site_observer()) {
    observer(site);
  }
}
}  // namespace

at::Tensor upcast(const at::Tensor& cpu) {
  InternalWork work(t_device_thread.alloc_device);
  if (!cpu.is_contiguous() || cpu.is_conj() || cpu.is_neg()) return cpu.to(c10::kFloat);
  at::Tensor out = at::empty(cpu.sizes(), cpu.options().dtype(c10::kFloat));
  const auto* src = static_cast<const uint16_t*>(cpu.data_ptr());
  if (cpu.scalar_type() == c10::kHalf) {
    halfToFloat(src, out.data_ptr<float>(), cpu.numel());
  } else {
    bfloat16ToFloat(src, out.data_ptr<float>(), cpu.numel());
  }
  return out;
}

namespace {
// Rounds contiguous fp32 `src` into contiguous low-precision `dst` of the same size.
void roundInto(const at::Tensor& dst, const at::Tensor& src, int device) {
  const bool saturate = npu::overflow_mode() == OverflowMode::kSaturation;
  auto* d = static_cast<uint16_t*>(dst.data_ptr());
  const float* s = src.data_ptr<float>();
  const bool overflow = dst.scalar_type() == c10::kHalf ? floatToHalf(s, d, src.numel(), saturate)
                                                        : floatToBfloat16(s, d, src.numel(), saturate);
  if (overflow && npu::float_status_tracking()) noteOverflow(src, dst, device, true);
}

bool contiguousFloat(const at::Tensor& t) {
  return t.scalar_type() == c10::kFloat && t.is_contiguous() && !t.is_conj() && !t.is_neg();
}
}  // namespace

at::Tensor downcast(const at::Tensor& fp32, c10::ScalarType target, int device) {
  InternalWork work(device);
  at::Tensor src = contiguousFloat(fp32) ? fp32 : fp32.to(c10::kFloat).contiguous();
  at::Tensor out = at::empty(src.sizes(), src.options().dtype(target));
  roundInto(out, src, device);
  return out;
}

void copyWithStatus(const at::Tensor& dst, const at::Tensor& src, int device) {
  InternalWork work(device);
  if (isLowPrecision(dst.scalar_type()) && at::isFloatingType(src.scalar_type()) && !isLowPrecision(src.scalar_type())) {
    if (dst.is_contiguous() && contiguousFloat(src) && dst.sizes() == src.sizes()) {
      roundInto(dst, src, device);
    } else {
      dst.copy_(downcast(src, dst.scalar_type(), device));
    }
    return;
  }
  dst.copy_(src);
  if (npu::float_status_tracking() && hasNonFinite(dst)) noteOverflow(dst, dst, device, false);
}

void checkFloatStatus(const at::Tensor& cpu, int device) {
  if (!npu::float_status_tracking()) return;
  InternalWork work(device);
  if (hasNonFinite(cpu)) noteOverflow(cpu, cpu, device, false);
}

OverflowOpScope::OverflowOpScope() { ++t_overflow_scopes; }
OverflowOpScope::~OverflowOpScope() {
  if (--t_overflow_scopes == 0 && t_has_pending) {
    const npu::OverflowSite site = *t_pending_overflow;
    t_pending_overflow.reset();
    t_has_pending = false;
    if (auto observer = npu::overflow_site_observer()) observer(site);
  }
}

bool overflowPending() { return t_has_pending; }

void reportPendingOverflow(c10::ArrayRef<at::Tensor> inputs) {
  if (!t_has_pending) return;
  npu::OverflowSite site = *t_pending_overflow;
  t_pending_overflow.reset();
  t_has_pending = false;
  InternalWork work(site.device);
  site.in_max_abs = 0;
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type())) continue;
    const Magnitude m = magnitudeOf(t, std::numeric_limits<double>::infinity());
    site.in_max_abs = std::max(site.in_max_abs, m.max_abs);
    site.in_inf += m.over;
    site.in_nan += m.nan;
  }
  if (auto observer = npu::overflow_site_observer()) observer(site);
}

}  // namespace npuscope::npu::aten
