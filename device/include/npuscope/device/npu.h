// The npu device as libtorch sees it: npu tensors are PrivateUse1 tensors, which npuscope names
// "npu:N" wherever a person reads a device. Include this to use the device from C++.
//
//   at::Tensor x = at::randn({2, 3}).to(npuscope::npu::device(0));
//   npuscope::npu::set_device(1);
//   auto stats = npuscope::npu::memory_stats(1);
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <atomic>
#include <string>

#include "npuscope/device/cost_model.h"
#include "npuscope/device/device_log.h"
#include "npuscope/device/runtime.h"

namespace at {
class Tensor;
}
namespace c10 {
struct FunctionSchema;
}

namespace npuscope::npu {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

// c10::Device of npu:index (index -1: the current device). Checks the index.
c10::Device device(int index = -1);
// Parses "npu:N" (or "cpu") into a c10::Device; throws c10::Error naming the text.
c10::Device parse_torch_device(const std::string& text);
// "npu:0" for PrivateUse1 devices, c10's own name ("cpu") otherwise.
std::string format_device(const c10::Device& d);
bool is_npu(const at::Tensor& t);
// A CPU tensor over `t`'s memory (no copy) that keeps t's storage alive, for libraries that
// only take CPU tensors (c10d's Gloo under the hccl process group): what it writes, `t` holds.
// A CPU tensor is returned as it is.
at::Tensor cpu_alias(const at::Tensor& t);

// Tags the device block holding `t`'s storage (tag_memory in runtime.h); host tensors and
// undefined ones are left alone. An empty owner keeps the block's current one.
void tag_tensor_memory(const at::Tensor& t, MemoryCategory category, const std::string& owner = {});

// Operations on a device run synchronously on the host; synchronize() exists so code ported from
// torch_npu keeps its calls, and it is the point where a real device would be waited for.
void synchronize(int device = -1);

// Intra-op threads used by the device's kernels. At load the device sets them to the cores
// available (NPUSCOPE_NUM_THREADS overrides) because Debian's libtorch starts with 1.
void set_num_threads(int n);
int num_threads();

// The modeled cost of one op of the device, from its name and tensors (see cost_model.h).
OpWork estimate_op_work(const std::string& op_name, const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs);
// The same from an op's boxed inputs alone (what a RecordFunction callback sees): output sizes
// of matmuls and convolutions are derived from the input shapes and arguments.
OpWork estimate_op_work(const std::string& op_name, c10::ArrayRef<const c10::IValue> inputs);

// ---- op observer: the op dumper's hook --------------------------------------------------
// Called for every op the device computes (the boxed fallback, convolutions, copies into npu
// memory; the add/sub/mul/div fast paths step aside while an observer is set), on the op's
// thread, never for the device's internal work (InternalScope). kBefore sees the op's
// arguments before the kernel runs (in-place arguments still hold their old values), kAfter
// its results as npu tensors; for `aten::_copy_from` the values are {source} and {destination}.
// The values are only valid during the call. An observer must not throw, and work it runs on
// npu tensors is observed again unless it guards itself. Off: one relaxed atomic load per op.
enum class OpPhase { kBefore, kAfter };
using OpObserver = void (*)(OpPhase phase, const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> values);
void set_op_observer(OpObserver fn);  // nullptr: none
namespace detail {
extern std::atomic<OpObserver> g_op_observer;
}
inline OpObserver op_observer() { return detail::g_op_observer.load(std::memory_order_relaxed); }

// ---- the emulator's own work -------------------------------------------------------------
// While an npu op's CPU kernel runs (the boxed fallback, the convolutions, copies, the fused
// ops, the device's internal work), what that kernel dispatches in turn (mkldnn_convolution,
// select, resolve_conj, empty, ...) is the emulator's work, not an op a card runs: the calling
// thread's counter is non-zero then. The
// recorder skips ops that start while it is, so a trace shows the npu op alone, as torch_npu's
// does. (Turning RecordFunction off around the kernel instead costs libtorch 1.13 ~350 ns per op:
// it rebuilds the thread's callback lists twice.) The pointer is this thread's counter, valid
// for the thread's life, so a per-op check is one load.
const int* emulator_work_counter();

}  // namespace npuscope::npu
