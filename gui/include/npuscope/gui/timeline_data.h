// The timeline's in-memory model of one run: the ops of every thread in a compact form,
// arranged so that a frame draws in O(pixels x depth x log n) whatever the run's size, plus the
// predicted host and device lanes of a real npu, the real device streams of an imported run (with the link from
// each task to the host op that launched it) and the step table. Loaded in parallel, each
// worker with its own read-only TraceReader, so it may run off the GUI thread; everything after
// the load is plain memory and never touches SQLite. Qt-free, so tests and benchmarks can drive
// it directly.
//
// A run with more ops than LoadOptions::full_load_ops is loaded *partially*: only the op block
// summaries (op density per thread, a few thousand ops a block) and the ops of one time window
// are in memory, so a trace's size is bounded by disk, not RAM. The view asks for a new window
// as the user zooms in (TraceDocument::loadWindow).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::gui {

// One op, 72 bytes. Strings are indices into TimelineData::strings (0 is "").
struct Slice {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t id = 0;
  int64_t parent_id = -1;
  int64_t seq_nr = -1;
  int64_t device_start_ns = -1;
  int64_t device_dur_ns = -1;
  int32_t step = -1;
  uint32_t name = 0;
  uint32_t shapes = 0;
  uint32_t dtypes = 0;
  int16_t depth = 0;
  int8_t device = -1;
  uint8_t is_backward = 0;
  uint8_t host_sync = 0;  // op_events.host_sync
  int64_t end() const { return start_ns + dur_ns; }
};

enum class LaneKind {
  kThread,  // a host thread's ops
  kDevice,  // the predicted timeline of a real npu (analysis/predicted_timeline.h): an npu's stream,
            // copies of its kernels at their predicted device times (device >= 0), or the
            // predicted host, copies of host ops at their predicted host times (device -1)
  kTasks,   // a real device stream of an imported run: its tasks (id = task id, parent_id =
            // the launching host op's id or -1, dtypes = the task type)
};

// Op density of a thread where its ops are not in memory: `ops` ops start in [begin, end).
struct DensityBlock {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t ops = 0;
};

struct LoadOptions {
  int workers = 0;  // parallel readers (0: one per hardware thread, at most 4)
  // Runs with more ops load partially (see above). About 72 bytes an op in memory.
  int64_t full_load_ops = 3000000;
  // Partial loads: the ops that overlap this window (ops starting in it and the ops enclosing
  // its start); none when unset.
  bool has_window = false;
  TimeWindow window;
};

// A track of the timeline. Thread lanes hold the thread's ops grouped by depth (depth 0 first),
// each depth block in start order; on one thread ops of equal depth never overlap, so within a
// block ends are in order too and a binary search finds the visible ones. A device lane holds
// the modeled stream of one npu: copies of its leaf ops with start/dur set to the modeled
// device start/duration, all at depth 0 (the `id` leads back to the host op).
struct Lane {
  LaneKind kind = LaneKind::kThread;
  int64_t thread_id = 0;  // thread lanes
  int32_t device = -1;    // device and task lanes
  int32_t stream = -1;    // task lanes
  std::string title;
  int64_t total_ops = 0;  // ops of the lane in the whole run (thread lanes; in memory or not)
  std::vector<DensityBlock> blocks;  // partial loads: the thread's op blocks in start order
  int64_t backward_ops = 0;
  std::vector<Slice> slices;
  std::vector<uint32_t> depth_begin;  // depth d occupies [depth_begin[d], depth_begin[d + 1])
  int depthCount() const { return depth_begin.empty() ? 0 : static_cast<int>(depth_begin.size()) - 1; }
  // Indices [first, last) of depth `d` slices that overlap [begin_ns, end_ns).
  std::pair<uint32_t, uint32_t> visible(int d, int64_t begin_ns, int64_t end_ns) const;
  // First index of depth `d` whose start is >= t (depth_begin[d + 1] when none).
  uint32_t lowerBound(int d, int64_t t) const;
  // The depth-`d` slice covering `t`, or -1.
  int64_t at(int d, int64_t t) const;
};

// A slice of the timeline: lane index and index into that lane's slices.
struct SliceRef {
  int lane = -1;
  uint32_t index = 0;
  bool valid() const { return lane >= 0; }
  bool operator==(const SliceRef& o) const { return lane == o.lane && index == o.index; }
  bool operator!=(const SliceRef& o) const { return !(*this == o); }
};

class TimelineData {
 public:
  // Reads every op of `run_id` from the file at `path`, with `workers` parallel readers (0: one
  // per hardware thread, at most 4). Also reads the steps. Errors name the file.
  static StatusOr<std::unique_ptr<TimelineData>> load(const std::string& path, int64_t run_id, int workers = 0);
  static StatusOr<std::unique_ptr<TimelineData>> load(const std::string& path, int64_t run_id,
                                                      const LoadOptions& options);

  // Partial loads: only the ops of loadedWindow() are in memory (the lanes' blocks say where
  // the others are). Full loads: every op, loadedWindow() unbounded.
  bool partial() const { return partial_; }
  // Damage its readers found in the file (TraceReader::damage()), each once.
  const std::vector<std::string>& damage() const { return damage_; }
  const TimeWindow& loadedWindow() const { return loaded_; }
  // Every op starting in [begin, end) is in memory.
  bool covers(int64_t begin_ns, int64_t end_ns) const {
    return !partial_ || (begin_ns >= loaded_.begin_ns && end_ns <= loaded_.end_ns);
  }
  // Ops of the run on all threads (opCount(): those in memory).
  int64_t totalOps() const { return total_ops_; }
  // About how many ops start in [begin, end), from the block summaries (exact for full loads
  // up to the blocks' resolution).
  int64_t estimateOps(int64_t begin_ns, int64_t end_ns) const;

  int64_t runId() const { return run_id_; }
  int64_t beginNs() const { return begin_ns_; }
  int64_t endNs() const { return end_ns_; }
  int64_t opCount() const { return op_count_; }
  const std::vector<Lane>& lanes() const { return lanes_; }
  const std::vector<StepRow>& steps() const { return steps_; }
  const std::string& str(uint32_t i) const { return strings_[i < strings_.size() ? i : 0]; }
  size_t stringCount() const { return strings_.size(); }
  const Slice& slice(SliceRef r) const { return lanes_[r.lane].slices[r.index]; }

  // The host op with this id (its thread lane), or an invalid ref.
  SliceRef findById(int64_t id) const;
  // An npu run's predicted steps (analysis/predicted_timeline.h) in step order: every step whose
  // ops are all in memory. Their kernels' device_start_ns / device_dur_ns are the predicted
  // ones, each step placed by PredictedStepPlacer.
  const std::vector<PredictedStep>& predictedSteps() const { return predicted_steps_; }
  const PredictedStep* predictedStep(int64_t step) const;
  // The device-lane copy of a host op, or an invalid ref.
  SliceRef deviceCopyOf(SliceRef host) const;
  // A real device task's launching host op (its thread lane), or an invalid ref.
  SliceRef launchOf(SliceRef task) const;
  // The real device tasks a host op launched, in start order.
  std::vector<SliceRef> tasksOf(SliceRef host) const;
  // The op's duration minus its direct children's durations.
  int64_t selfNs(SliceRef r) const;
  // The forward/backward partner by autograd sequence number: for a forward op the outermost
  // backward op with its seq_nr, for a backward op the outermost forward op. Invalid if none.
  SliceRef partner(SliceRef r) const;
  // The step row covering `t`, or nullptr.
  const StepRow* stepAt(int64_t t) const;
  const StepRow* stepByIndex(int64_t step) const;

  // The op table of the ops that start in `window` on host threads, with exactly the semantics
  // of TraceReader::opAggregates (self time = duration minus direct children's durations,
  // wherever those start; percentages of the selected ops' summed self time).
  OpAggregateTable aggregate(const TimeWindow& window, OpGroupBy group_by = OpGroupBy::kName,
                             OpSortKey sort = OpSortKey::kSelfTime) const;

  // Host ops whose name contains `needle` (case-insensitive), in start order.
  std::vector<SliceRef> search(std::string_view needle) const;
  // The index of string `s`; 0 when the run has no such string.
  uint32_t stringIndex(std::string_view s) const;

 private:
  friend class TimelineLoader;  // load()'s phases (timeline_data.cpp)
  TimelineData() = default;
  int64_t run_id_ = 0;
  HostModelParams model_;  // the predicted timeline's parameters for this run (its world size)
  int64_t begin_ns_ = 0;
  int64_t end_ns_ = 0;
  int64_t op_count_ = 0;
  std::vector<Lane> lanes_;
  std::vector<std::string> strings_;
  std::vector<PredictedStep> predicted_steps_;
  std::vector<std::pair<int64_t, SliceRef>> device_copy_by_op_;  // (op id, its predicted kernel), sorted
  struct Predicted {
    std::vector<Slice> host;                     // the predicted host lane, in start order
    std::vector<std::vector<Slice>> per_device;  // each npu's predicted kernels
    std::vector<std::vector<Slice>> per_device_comm;  // each npu's predicted collectives
  };
  Predicted predict();
  std::vector<StepRow> steps_;
  int host_lanes_ = 0;  // lanes_[0, host_lanes_) are thread lanes
  bool partial_ = false;
  std::vector<std::string> damage_;
  TimeWindow loaded_;
  int64_t total_ops_ = 0;
  std::vector<std::pair<int64_t, SliceRef>> tasks_by_op_;  // (launching op id, task), sorted
};

}  // namespace npuscope::gui
