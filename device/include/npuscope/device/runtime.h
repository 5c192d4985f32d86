// The emulated NPU's runtime: devices, the current device, memory pools with a capacity,
// the sticky float-status register and the device log. Torch-free; the ATen layer
// (npuscope/device/npu.h) builds on it.
//
// Environment, read once at first use:
//   NPUSCOPE_NPU_COUNT        physical devices in the machine (default 8, 1..64)
//   ASCEND_RT_VISIBLE_DEVICES comma list of physical ids the process may see, renumbered from 0
//   ASCEND_DEVICE_ID          logical device used when none was set (default 0)
//   NPUSCOPE_NPU_MEMORY       capacity of each device, e.g. "32G", "512M", "4096" (bytes);
//                             default 32G like an Ascend 910
//   NPUSCOPE_NPU_CACHE_LIMIT  bytes a pool keeps cached for reuse (default 1G)
//   NPUSCOPE_OVERFLOW_MODE    inf_nan (default, 910B-like) or saturation (910A-like)
//   NPUSCOPE_FLOAT_STATUS     1 to track the float-status register from the start
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "npuscope/store/memory_category.h"
#include "npuscope/store/status.h"

namespace npuscope::npu {

constexpr int kMaxDevices = 64;

// ---- devices ----------------------------------------------------------------------------
// Problems in the environment (a malformed ASCEND_RT_VISIBLE_DEVICES, say). When not OK,
// device_count() is 0 and every device call fails with this message.
const Status& environment_status();
int device_count();
// The physical id behind logical device `device` (ASCEND_RT_VISIBLE_DEVICES renumbering).
int physical_id(int device);
// The calling thread's current device (initially ASCEND_DEVICE_ID).
int current_device();
Status set_device(int device);
// Throws nothing; returns an error naming the device and the valid range.
Status check_device(int device);
// "npu:3"
std::string device_name(int device);
// Parses "npu", "npu:N" or "N"; refuses anything else with a message naming the text.
StatusOr<int> parse_device(const std::string& text);

// ---- memory -----------------------------------------------------------------------------
struct MemoryStats {
  uint64_t allocated = 0;       // bytes in live blocks (rounded block sizes)
  uint64_t reserved = 0;        // allocated + cached blocks held by the pool
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  uint64_t capacity = 0;
  uint64_t num_allocs = 0;
  uint64_t num_ooms = 0;
};

// Allocates `bytes` on `device`; the result is 64-byte aligned and carries a header in front of
// it, so release() needs only the pointer (and libtorch's raw_allocate, which requires the
// DataPtr context to equal the data, works). Over capacity -> kOutOfMemory naming device,
// request, in use and capacity, the two categories holding most and the largest live block
// with its owner; the pool is unchanged and the caller can free and retry.
StatusOr<void*> allocate(int device, size_t bytes);
// Plain host memory with the same header and no device accounting (nullptr on failure).
void* allocate_host(size_t bytes);
// Gives back memory from allocate() or allocate_host().
void release(void* data);
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
void set_memory_capacity(int device, uint64_t bytes);
// Frees every cached (unused) block of the device back to the host.
void empty_cache(int device);

// Observer told of every change of a device's allocated/reserved bytes (the profiler's memory
// track). Called on the allocating thread; must be cheap and must not allocate on the device.
using MemoryObserver = void (*)(int device, uint64_t allocated, uint64_t reserved);
void set_memory_observer(MemoryObserver observer);

// ---- memory ownership -------------------------------------------------------------------
// What a device block holds (npuscope/store/memory_category.h). Libraries that own memory tag
// it (amp: parameters, gradients, master weights and the fused optimizers' buffers it manages);
// blocks nobody tagged stay kUntagged and the profiler infers theirs from the allocating op and
// the block's lifetime (docs/memory.md has the rule).
using MemoryCategory = npuscope::MemoryCategory;

// Tags the device block whose data starts at `data` (a storage's data pointer, as allocate()
// returned it) with `category` and, unless nullptr, an owner ("fc.weight", "NpuFusedAdam
// exp_avg"; copied once into a table that lives as long as the process). No effect on host
// memory or nullptr. A block keeps its tag until freed; the cache does not carry it to the next.
void tag_memory(const void* data, MemoryCategory category, const char* owner = nullptr);
// The tag of the block at `data` (kUntagged for host memory and nullptr).
MemoryCategory memory_tag(const void* data);

// A device block as observers see it.
struct BlockInfo {
  int device = 0;
  uint64_t id = 0;          // the pool's event number at its allocation (unique per device)
  uint64_t address = 0;
  uint64_t size = 0;        // rounded block size (what `allocated` counts)
  uint64_t requested = 0;   // bytes asked for
  MemoryCategory category = MemoryCategory::kUntagged;
  const char* owner = nullptr;  // nullptr: none given
  // Four words an observer keeps with the block: zero at allocation, writable by the
  // allocation event's observer; at a free, a copy of what was written.
  int64_t* words = nullptr;
};
enum class BlockEvent : uint8_t { kAlloc, kFree };
// Told of every block allocation and free, with the pool's event number of the change (one
// counter per device, ordering all of its allocations and frees) and the pool's allocated and
// reserved bytes after it. Called on the allocating/freeing thread, outside the pool's lock;
// must be cheap and must not allocate on the device.
using BlockObserver = void (*)(BlockEvent event, const BlockInfo& block, uint64_t seq, uint64_t allocated,
                               uint64_t reserved);
void set_block_observer(BlockObserver observer);
// The number of the device's last allocation or free event.
uint64_t memory_event_seq(int device);
// Calls `fn` for each live block of `device`, in allocation order, with the pool locked: `fn`
// must not allocate or free on the device.
void for_each_live_block(int device, void (*fn)(const BlockInfo& block, void* arg), void* arg);
// The largest block the pool holds cached (free) for reuse, 0 when none.
uint64_t largest_cached_block(int device);
// Names the category of an untagged live block for out-of-memory messages (the profiler's
// inference); nullptr: untagged blocks are reported as "untagged".
using BlockClassifier = MemoryCategory (*)(const BlockInfo& block);
void set_block_classifier(BlockClassifier classifier);
// Told of a refused allocation: the request, the event number it happened after and the
// one-line message allocate() returns.
using OomObserver = void (*)(int device, uint64_t requested, uint64_t seq, const std::string& message);
void set_oom_observer(OomObserver observer);

// ---- float status -----------------------------------------------------------------------
// inf_nan: overflowing ops produce inf/nan as IEEE says (Ascend 910B).
// saturation: low-precision results clamp to the format's max (fp16: +-65504), NaN becomes 0,
// and only the float-status register reveals the overflow (Ascend 910A).
enum class OverflowMode { kInfNan, kSaturation };

OverflowMode overflow_mode();
void set_overflow_mode(OverflowMode mode);
StatusOr<OverflowMode> parse_overflow_mode(const std::string& text);
const char* overflow_mode_name(OverflowMode mode);

namespace detail {
extern std::atomic<bool> g_float_status_tracking;
}
// Whether ops check their outputs and set the register. Off: one relaxed atomic load per op.
inline bool float_status_tracking() {
  return detail::g_float_status_tracking.load(std::memory_order_relaxed);
}
void set_float_status_tracking(bool on);
// npu_get_float_status: true when an op on `device` overflowed since the last clear.
bool get_float_status(int device);
// npu_clear_float_status: clears the sticky flag of `device`.
void clear_float_status(int device);
// Sets the sticky flag of `device` (what an overflowing op does).
void raise_float_status(int device);

// ---- overflow attribution ---------------------------------------------------------------
// With tracking on, every op's result is checked; the first result that overflows after
// open_overflow_window() (a profiler opens one per step) is described to the observer, once:
// how large it was and what went in. Costs nothing until a result overflows.
struct OverflowSite {
  int device = -1;
  std::string dtype;          // the result's stored dtype (float16, bfloat16, float32)
  bool rounding = false;      // the fp32 result overflowed when rounded to fp16/bf16
  int64_t numel = 0;
  double out_max_abs = 0;     // max |x| over the result's finite elements, before rounding
  int64_t out_inf = 0, out_nan = 0;  // after rounding (in saturation mode: values that saturated)
  double in_max_abs = -1;     // max |x| over the op's npu inputs' finite elements, -1: not known
  int64_t in_inf = 0, in_nan = 0;
};
using OverflowSiteObserver = void (*)(const OverflowSite& site);
void set_overflow_site_observer(OverflowSiteObserver observer);  // nullptr: none
OverflowSiteObserver overflow_site_observer();
void open_overflow_window();
// Closes the window if it is open: true for the one caller that may report.
bool take_overflow_window();

// ---- internal work ----------------------------------------------------------------------
// Set while the device does work of its own on behalf of an op (dtype round trips, status
// checks). Dumpers skip ops run inside it, and the device also counts it as emulator work
// (npu::emulator_work_counter), which the recorder skips: nothing is counted twice.
class InternalScope {
 public:
  InternalScope() { ++depth_; }
  ~InternalScope() { --depth_; }
  InternalScope(const InternalScope&) = delete;
  InternalScope& operator=(const InternalScope&) = delete;
  static bool active() { return depth_ > 0; }

 private:
  static thread_local int depth_;
};

}  // namespace npuscope::npu
