// Internal to the device's ATen layer: how npu tensors are made, aliased as CPU tensors over the
// same memory, re-wrapped as npu tensors without copying, and how low-precision results and the
// float-status register are handled. Not installed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include <vector>

namespace npuscope::npu::aten {

// The allocator of npu storages; DataPtrs carry Device(PrivateUse1, index).
c10::Allocator* npuAllocator();

// The device layer's state of one thread: the device CPU allocations are drawn from (see
// DeviceAllocationScope) and the pool of CPU aliases. A per-op path looks it up once and passes
// it on: each thread-local lookup is a call into ld.so here (the library is loaded with dlopen),
// and a small op on the npu made seven of them.
struct DeviceThread {
  int alloc_device = -1;
  int emulator_work = 0;  // see npu::emulator_work_counter()
  std::vector<at::Tensor> alias_pool;
};
DeviceThread& deviceThread();

// While alive, the CPU work on this thread is done for an npu op (npu::emulator_work_counter).
class EmulatorWork {
 public:
  explicit EmulatorWork(DeviceThread& thread) : thread_(thread) { ++thread.emulator_work; }
  ~EmulatorWork() { --thread_.emulator_work; }
  EmulatorWork(const EmulatorWork&) = delete;
  EmulatorWork& operator=(const EmulatorWork&) = delete;

 private:
  DeviceThread& thread_;
};

// While alive, CPU allocations on this thread come from the pool of `device` (so tensors made
// by CPU kernels on behalf of an npu op are accounted to the device and can become npu tensors
// without a copy). Nested scopes restore the previous device.
class DeviceAllocationScope {
 public:
  explicit DeviceAllocationScope(int device) : DeviceAllocationScope(deviceThread(), device) {}
  DeviceAllocationScope(DeviceThread& thread, int device) : thread_(thread), prev_(thread.alloc_device) {
    thread.alloc_device = device;
  }
  ~DeviceAllocationScope() { thread_.alloc_device = prev_; }
  DeviceAllocationScope(const DeviceAllocationScope&) = delete;
  DeviceAllocationScope& operator=(const DeviceAllocationScope&) = delete;

 private:
  DeviceThread& thread_;
  int prev_;
};

// Per-op helpers of every npu kernel, inline: out-of-line calls were a visible part of a small
// op's cost.
inline int deviceIndex(const at::Tensor& t) { return t.device().index() < 0 ? 0 : t.device().index(); }
inline bool isNpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }
inline bool isLowPrecision(c10::ScalarType s) { return s == c10::kHalf || s == c10::kBFloat16; }

// Refuses float64 (and complex128) on the device with an error naming `op`.
void checkDtypeSupported(c10::ScalarType s, const char* op);

// A CPU tensor over the npu tensor's memory: same sizes, strides, offset, dtype. Its storage is
// its own (a CPU one) whose allocator draws from the device pool, so a CPU kernel can resize it;
// syncMutatedAlias() carries such changes back.
at::Tensor aliasAsCpu(DeviceThread& thread, const at::Tensor& npu);
inline at::Tensor aliasAsCpu(const at::Tensor& npu) { return aliasAsCpu(deviceThread(), npu); }
// The same as a tensor that keeps the npu storage alive (for work that outlives the call, such
// as c10d's asynchronous collectives); never recycled, not resizable.
at::Tensor owningAliasAsCpu(const at::Tensor& npu);
// Hands an alias back for reuse by later aliasAsCpu() calls on this thread. Safe to call while
// results still view it: reuse waits until nothing else holds it.
void recycleAlias(DeviceThread& thread, at::Tensor&& alias);
inline void recycleAlias(at::Tensor&& alias) { recycleAlias(deviceThread(), std::move(alias)); }
// After a CPU kernel wrote into `alias` (made by aliasAsCpu(npu)): if it resized or re-pointed
// the alias, make `npu` see the new memory and geometry. `original_data` is the alias's data
// pointer before the kernel ran.
void syncMutatedAlias(const at::Tensor& npu, const at::Tensor& alias, const void* original_data);

// An npu tensor over the memory of CPU tensor `cpu` (no copy). The CPU storage is adopted
// when nothing else holds it, else kept alive by the npu storage.
at::Tensor wrapAsNpu(const at::Tensor& cpu, int device);
// An npu storage that shares the memory of `cpu`: adopts it when `may_adopt` and the storage has
// no other user, else keeps the CPU storage alive.
c10::Storage npuStorageFor(const c10::Storage& cpu, int device, bool may_adopt);
// An npu tensor viewing `npu_base`'s storage with `view`'s geometry and dtype.
at::Tensor npuViewLike(const at::Tensor& npu_base, const at::Tensor& view);

// fp32 copy of a low-precision CPU tensor, made as device-internal work.
at::Tensor upcast(const at::Tensor& cpu);
// `fp32` rounded to `target` (fp16/bf16) as the device does: IEEE in inf_nan mode, clamped to
// the format's max (NaN -> 0) in saturation mode, where an overflow raises the device's float
// status when tracking is on.
at::Tensor downcast(const at::Tensor& fp32, c10::ScalarType target, int device);
// Copies `src` into `dst` (CPU tensors; dst may be low precision) with the same rules.
void copyWithStatus(const at::Tensor& dst, const at::Tensor& src, int device);

// When float-status tracking is on: raises the register of `device` if `cpu` (a result) holds
// inf or NaN. One relaxed atomic load when tracking is off.
void checkFloatStatus(const at::Tensor& cpu, int device);

// Overflow attribution (npu::OverflowSite). An op running through the CPU fallback opens a scope;
// an overflow among its results is then held until the op adds its inputs' magnitudes
// (reportPendingOverflow); outside a scope (or if the op never gets there) it is reported as is.
class OverflowOpScope {
 public:
  OverflowOpScope();
  ~OverflowOpScope();
  OverflowOpScope(const OverflowOpScope&) = delete;
  OverflowOpScope& operator=(const OverflowOpScope&) = delete;
};
// Whether this thread holds an overflow awaiting its op's inputs.
bool overflowPending();
// Reports the overflow this op's results raised, if any, with `inputs` (CPU stand-ins) measured.
void reportPendingOverflow(c10::ArrayRef<at::Tensor> inputs);

}  // namespace npuscope::npu::aten
