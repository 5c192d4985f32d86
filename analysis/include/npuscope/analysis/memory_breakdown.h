// Memory by owner (schema 10): which device blocks were live at any moment of a run, what they
// held, and each device's peak explained — bytes by category, the largest tensors with their
// owners and allocating ops, fragmentation, refused allocations. Torch- and Qt-free: the
// CLI's `report` and `memory`, the advisor and the GUI read the same numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "npuscope/store/memory_category.h"
#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

// The blocks of one device live at one moment.
struct LiveSet {
  int32_t device = 0;
  int64_t seq = -1;      // after this pool event (-1: taken at a time)
  int64_t ts_ns = 0;
  int64_t allocated = 0;  // the live blocks' sizes added up: the pool's allocated bytes then
  int64_t bytes[kMemoryCategoryCount] = {};
  std::vector<MemoryBlockRecord> blocks;  // largest first
};

// Live after pool event `seq` of `device`: allocated at or before it, not freed by then.
LiveSet liveAtSeq(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t seq);
// Live at `ts_ns`: allocated at or before it, freed after it.
LiveSet liveAtTime(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t ts_ns);

// The pool event of highest allocated bytes of `device` among events at times in
// [from_ns, to_ns] (the blocks' allocations and frees replayed in event order).
struct SeqPeak {
  int64_t seq = -1;  // -1: no event in the window
  int64_t ts_ns = 0;
  int64_t allocated = 0;
};
SeqPeak sweepPeak(const std::vector<MemoryBlockRecord>& blocks, int device, int64_t from_ns, int64_t to_ns);

// Each step's peak on `device` (steps in the order given; a step without events is left out):
// one replay of the events, then the live set at each step's peak by category.
struct StepPeak {
  int64_t step = 0;
  int64_t seq = -1;
  int64_t allocated = 0;
  int64_t bytes[kMemoryCategoryCount] = {};
};
std::vector<StepPeak> stepPeaks(const std::vector<MemoryBlockRecord>& blocks, int device, const std::vector<StepRow>& steps);

// Bytes by category over time on `device`: after each pool event (in event order), thinned to
// at most about `max_points` samples (the run cut into equal time buckets, each keeping its
// sample of highest allocated bytes, so peaks survive); 0: every event.
struct CategorySample {
  int64_t ts_ns = 0;
  int64_t allocated = 0;
  int64_t bytes[kMemoryCategoryCount] = {};
};
std::vector<CategorySample> categorySeries(const std::vector<MemoryBlockRecord>& blocks, int device, size_t max_points);

struct DeviceMemory {
  int32_t device = 0;
  int64_t capacity = 0;
  // The peak: of the run (the recorder's) or of the step asked for (replayed).
  int64_t peak_allocated = 0;
  int64_t reserved_at_peak = -1;    // -1: not known (a step's peak, a file without the recorder's)
  int64_t peak_reserved = 0;        // highest reserved of the run's memory samples
  int64_t pool_peak_allocated = 0;  // a run without the recorder's record (an import): the samples'
                                    // highest allocated, above the blocks' peak when they are the
                                    // ops' allocations only (operator_memory.csv)
  int64_t largest_cached = -1;      // the largest free cached block at the peak, -1: not known
  int64_t peak_step = -1;
  bool peak_in_step = false;        // peak_step is one of the run's steps (not after the last, e.g. evaluation)
  int64_t peak_op_id = -1;
  std::string peak_op;              // the op allocating at the peak ("" when none)
  LiveSet at_peak;
  // Allocated bytes when each step began (steps in order), for growth across steps.
  std::vector<std::pair<int64_t, int64_t>> step_start_allocated;
  // Refused allocations, each with what was live then.
  struct Oom {
    MemoryOomRecord record;
    std::string op;  // the op that asked ("" when none)
    LiveSet live;
  };
  std::vector<Oom> ooms;
};

// Per device with block records, in device order (empty for a run without them). `step`: the
// peak within that step instead of the run's.
StatusOr<std::vector<DeviceMemory>> memoryByDevice(TraceReader& reader, int64_t run_id,
                                                   std::optional<int64_t> step = std::nullopt);
// The same from the run's blocks read before (reader.memoryBlocks(run_id)).
StatusOr<std::vector<DeviceMemory>> memoryByDevice(TraceReader& reader, int64_t run_id,
                                                   const std::vector<MemoryBlockRecord>& blocks,
                                                   std::optional<int64_t> step = std::nullopt);

// The allocated bytes of `device` at each of `times` (as liveAtTime's .allocated, for many
// times at once: one sort of the blocks' allocations and frees).
std::vector<int64_t> allocatedAtTimes(const std::vector<MemoryBlockRecord>& blocks, int device,
                                      const std::vector<int64_t>& times);

// Device memory by component of the device software (schema 11: an imported torch_npu
// npu_module_mem.csv), per device in device order: each component's highest reservation and
// when, and what each reserved when their sum was highest.
struct ComponentPeak {
  std::string component;
  int64_t peak = 0;           // bytes
  int64_t peak_ns = 0;
  int64_t at_total_peak = 0;  // bytes it reserved when the device's total was highest
};
struct DeviceComponents {
  int32_t device = 0;
  int64_t total_peak = 0;     // the components' reservations added up, at its highest
  int64_t total_peak_ns = 0;
  std::vector<ComponentPeak> components;  // highest peak first
};
std::vector<DeviceComponents> componentPeaks(const std::vector<MemoryComponentRecord>& rows);

// What a block is for a person: its owner, else the op that allocated it ("aten::empty #123"),
// else "-".
std::string blockOwnerText(const MemoryBlockRecord& block, TraceReader& reader);

// The categories of a live set, largest first, as "activation 1.20 GiB (61%), gradient ...";
// at most `top` of them.
std::string categorySummary(const LiveSet& live, int top = kMemoryCategoryCount);

}  // namespace npuscope
