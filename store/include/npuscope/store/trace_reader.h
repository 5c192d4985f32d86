// The reader of npuscope trace files: every question the CLI, the GUI and the exporters ask of a
// trace store goes through this class, so no front end owns SQL. A reader opens the file
// read-only and may do so while a TraceWriter (in this or another process) is still writing it:
// WAL mode lets each query see the last committed state; multi-query operations (an aggregate,
// an export) read one consistent snapshot.
//
// Conventions: times are int64 nanoseconds of the recording's monotonic clock (the same clock as
// the file's *_ns columns); integer fields documented as "-1: none" mirror NULL in the file.
// Every query is a prepared statement; the big ones are written for files of 10M+ ops.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "npuscope/store/sqlite_handles.h"
#include "npuscope/store/records.h"
#include "npuscope/store/status.h"

namespace npuscope {

// A half-open time interval [begin_ns, end_ns). The default covers all time.
struct TimeWindow {
  int64_t begin_ns = std::numeric_limits<int64_t>::min();
  int64_t end_ns = std::numeric_limits<int64_t>::max();
  bool bounded() const {
    return begin_ns != std::numeric_limits<int64_t>::min() || end_ns != std::numeric_limits<int64_t>::max();
  }
  bool contains(int64_t t) const { return t >= begin_ns && t < end_ns; }
};

// An inclusive step range [first, last]. Ops outside every step (step NULL) never match one.
struct StepRange {
  int64_t first = std::numeric_limits<int64_t>::min();
  int64_t last = std::numeric_limits<int64_t>::max();
};

// One row of `runs` (docs/schema.md); NULL text reads as "".
struct RunRow {
  int64_t id = 0;
  int64_t started_ns = 0;
  std::optional<int64_t> ended_ns;  // none while running, or when the run was killed
  int64_t wall_start_ns = 0;        // Unix ns of started_ns
  std::string status;               // running | completed | failed
  std::string command, model, opt_level, optimizer, device, config_json, results_json;
  int64_t dropped_records = 0;
  // Imported runs (schema 5): the importer's format (`kineto`, `torch_npu`), the source file or
  // folder; empty for runs npuscope recorded. Rank and world size of a job's run, -1: unknown.
  std::string source, source_path;
  int64_t rank = -1, world_size = -1;
  std::string job;  // schema 8: the job a rank's run belongs to, "": not known
  bool imported() const { return !source.empty(); }
};

// One row of `collectives` (schema 8): a collective of a multi-rank job as one rank saw it.
struct CollectiveRow {
  int64_t id = 0;
  int64_t step = -1;     // -1: outside any step
  int64_t op_id = -1;    // the hcom_* op that enqueued it, -1: none
  int64_t group = 0, seq = 0;
  std::string kind, dtype;
  int64_t bytes = 0, group_size = 0;
  int64_t start_ns = 0;
  int64_t end_ns = -1;   // -1: it never completed
};

// One thread of a run, with what a timeline needs to label and order its track.
struct ThreadSummary {
  int64_t thread_id = 0;
  int64_t op_count = 0;
  int64_t backward_op_count = 0;  // ops with is_backward = 1
  int64_t first_start_ns = 0;
  int64_t last_end_ns = 0;        // max(start_ns + dur_ns)
  bool holdsBackward() const { return backward_op_count > 0; }
};

// One op_blocks row: a few thousand consecutive ops of one thread, summarised. A timeline
// zoomed out over a run too large to hold draws op density from these.
struct OpBlockSummary {
  int64_t thread_id = 0;
  int64_t ops = 0;
  int64_t min_start_ns = 0;
  int64_t max_end_ns = 0;
};

// One op as a timeline draws it. Strings are views into the reader's string cache and stay
// valid as long as the reader lives; the ids behind them are the file's string ids (the same for
// every reader of the file), so a consumer can key on them instead of hashing the strings.
struct OpSlice {
  int64_t id = 0;
  int64_t parent_id = -1;        // -1: top level
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t thread_id = 0;
  int64_t step = -1;             // -1: outside any step
  int64_t seq_nr = -1;           // autograd sequence number, -1: none
  int64_t device_start_ns = -1;  // modeled stream start, -1: not modeled
  int64_t device_dur_ns = -1;    // modeled device duration, -1: not modeled
  int32_t depth = 0;
  int32_t device = -1;           // npu index, -1: host-only op
  bool is_backward = false;
  bool host_sync = false;        // the host waits for the device here (op_events.host_sync)
  std::string_view name;
  std::string_view input_shapes;  // "[[2, 3], []]" as the profiler wrote it; empty: not recorded
  std::string_view input_dtypes;  // "float, Scalar"; empty: not recorded
  int64_t name_id = 0;            // string ids of name, input_shapes, input_dtypes (0: none)
  int64_t shapes_id = 0;
  int64_t dtypes_id = 0;
};

// Which ops a timeline query returns: those of one thread that overlap `window` (ops that began
// before the window and still run in it come first, outermost first), then in start order.
struct TimelineQuery {
  int64_t run_id = 0;
  int64_t thread_id = 0;
  TimeWindow window;
  int64_t min_dur_ns = 0;  // level of detail: skip shorter ops (the enclosing ops of the window start are always kept)
  size_t limit = 0;        // 0: no limit
};

enum class OpGroupBy { kName, kNameAndShapes };
enum class OpSortKey { kSelfTime, kTotalTime, kCount, kAvgTime, kName, kDeviceTime };

// A key_averages-style op table. Ops are selected by their start: start_ns in `window` and, if
// given, step in `steps`. An op's self time is its duration minus the durations of its direct
// children (ops whose parent_id is its id, wherever they start; children carry their parent's
// step).
struct OpAggregateQuery {
  int64_t run_id = 0;
  TimeWindow window;
  std::optional<StepRange> steps;
  OpGroupBy group_by = OpGroupBy::kName;
  OpSortKey sort = OpSortKey::kSelfTime;
  bool descending = true;  // kName sorts ascending when this is false
  size_t top_n = 0;        // 0: every group
};

struct OpAggregate {
  std::string name;
  std::string input_shapes;  // only with OpGroupBy::kNameAndShapes ("" when not recorded)
  int64_t calls = 0;
  int64_t total_ns = 0;      // sum of dur_ns
  int64_t self_ns = 0;       // sum of dur_ns minus direct children's dur_ns
  int64_t min_ns = 0;        // shortest call (dur_ns)
  int64_t max_ns = 0;        // longest call
  double avg_ns = 0;         // total_ns / calls
  double self_pct = 0;       // 100 * self_ns / table.self_sum_ns
  double total_pct = 0;      // 100 * total_ns / table.self_sum_ns (PyTorch's "CPU total %")
  int64_t device_ns = 0;     // sum of device_dur_ns (modeled)
  int64_t device_calls = 0;  // calls with a modeled device duration
};

struct OpAggregateTable {
  std::vector<OpAggregate> rows;  // sorted, at most top_n
  int64_t op_count = 0;           // ops selected
  int64_t group_count = 0;        // groups before top_n
  int64_t self_sum_ns = 0;        // sum of self time of every selected op: the 100 % of both percentages
  int64_t total_device_ns = 0;
};

// One row of `steps`.
struct StepRow {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  std::optional<double> loss, loss_scale, lr, grad_norm;
  bool overflow = false;
  bool skipped = false;
};

struct OverflowEventRow {
  int64_t id = 0;
  int64_t step = -1;  // -1: none
  int64_t ts_ns = 0;
  std::string source, op_name, detail;
  int64_t op_id = -1;  // op_events id, -1: none (schema 6; source first_op)
};

struct MemorySample {
  int64_t ts_ns = 0;
  int32_t device = 0;
  int64_t allocated = 0;
  int64_t reserved = 0;
};

struct MemoryQuery {
  int64_t run_id = 0;
  std::optional<int32_t> device;  // none: every device
  TimeWindow window;
  // 0: every sample. Otherwise at most about max_points samples per device: the window is cut
  // into max_points equal buckets and each bucket keeps its sample of highest allocated memory
  // (peaks survive downsampling) with the bucket's highest reserved value.
  size_t max_points = 0;
};

// A tensor dump without its payload.
struct TensorDumpInfo {
  int64_t id = 0;
  int64_t step = -1;   // -1: none
  int64_t op_id = -1;  // -1: none
  std::string op_name, op_type, io, dtype, shape, format;
  int64_t idx = 0;
  std::optional<double> min, max, mean, l2norm;
  std::optional<int64_t> nan_count, inf_count;
  int64_t data_bytes = 0;  // stored size of its payload (0: statistics only)
  int64_t data_ref = -1;   // the row whose stored payload it shares (-1: its own data column)
  std::string arg;         // msprobe's argument path ("input.0.1", "output.0"); "": `{io}.{idx}`
  // The tensor's name after its op's: msprobe's argument path, or `{io}.{idx}`.
  std::string argName() const { return arg.empty() ? io + "." + std::to_string(idx) : arg; }
};

// A dumped call in msprobe's terms (`dump_entries`, schema 9).
struct DumpEntryRow {
  int64_t step = -1;
  std::string name, parent, stack;  // parent, stack: "" when none
  int64_t op_id = -1;  // schema 12: the op the call became (op_events id), -1: not linked
};

struct TensorDumpData {
  std::vector<uint8_t> bytes;  // as stored (a shared payload: its holding row's)
  bool zstd_frame = false;     // the bytes start with a zstd frame magic (the dumper compressed them)
};

// Per step: how busy the modeled device was (sum of its ops' modeled durations) and the span of
// its stream, for host-bound / device-bound analysis.
// A real device task of an imported run (`device_tasks`).
struct DeviceTaskRow {
  int64_t id = 0;
  int64_t step = -1;         // -1: none
  int64_t op_id = -1;        // the launching host op, -1: unknown
  int32_t device = 0;
  int32_t stream = 0;
  std::string name, type;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t correlation = -1;
  std::string input_shapes;  // "" when the source gives none
  int64_t bytes = -1;
  std::string comm_group;
};

// Device tasks summed by name (or type).
struct DeviceTaskAggregate {
  std::string name;
  std::string type;  // the type of the group's tasks (by name: the first seen)
  int64_t calls = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
};

struct StepDeviceTime {
  int64_t step = 0;
  int64_t ops = 0;               // ops of the step (any thread)
  int64_t device_ops = 0;        // ops with a modeled device duration (imported runs: device tasks)
  int64_t device_busy_ns = 0;    // sum of modeled device durations
  int64_t device_first_ns = -1;  // earliest modeled stream start, -1: none
  int64_t device_last_ns = -1;   // latest modeled stream end, -1: none
};

struct MemoryPeak {
  int32_t device = 0;
  int64_t allocated = 0;  // highest sample
  int64_t reserved = 0;
  int64_t samples = 0;
};

// An inclusive range of op_events ids.
struct OpIdRange {
  int64_t lo = 0, hi = 0;
};

class OpCursor;
class MemoryCursor;

class TraceReader {
 public:
  // Opens `path` read-only. Errors (missing, not npuscope, corrupt, newer schema) come from
  // openTraceDatabase and name the file.
  static StatusOr<std::unique_ptr<TraceReader>> open(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::string& path() const { return path_; }

  // Runs, latest first (by wall-clock start).
  StatusOr<std::vector<RunRow>> runs();
  StatusOr<RunRow> run(int64_t run_id);
  // The latest run; kNotFound when the file holds none.
  StatusOr<RunRow> latestRun();

  // The threads that hold ops of the run, by first op (from the op_blocks summary).
  StatusOr<std::vector<ThreadSummary>> threads(int64_t run_id);
  // The run's op blocks by thread, each thread's in start order (ops not yet summarised in a
  // block of a live file are left out).
  StatusOr<std::vector<OpBlockSummary>> opBlocks(int64_t run_id);

  StatusOr<OpAggregateTable> opAggregates(const OpAggregateQuery& query);

  StatusOr<std::vector<OpSlice>> timeline(const TimelineQuery& query);
  // Streams the ops of one thread whose start lies in `window`, in start order; for exporters
  // and anything else too big to hold in memory.
  StatusOr<OpCursor> openOpCursor(int64_t run_id, int64_t thread_id, const TimeWindow& window);

  // The ops of the steps in `range`, every thread, in id order (ops outside steps are not read).
  StatusOr<std::vector<OpSlice>> stepOps(int64_t run_id, const StepRange& range);

  // The op of op_events id `id` (op_events.id is the rowid), kNotFound when there is none.
  StatusOr<OpSlice> opById(int64_t id);

  StatusOr<std::vector<StepRow>> steps(int64_t run_id, const std::optional<StepRange>& range = std::nullopt);
  StatusOr<std::vector<OverflowEventRow>> overflowEvents(int64_t run_id);
  // The run's collectives in the order they were enqueued.
  StatusOr<std::vector<CollectiveRow>> collectives(int64_t run_id);
  // One row per step that holds ops, in step order. A run with real device tasks (imported)
  // reads them: busy time is the union of its tasks' intervals on each device, summed over
  // devices; otherwise the modeled device columns of its ops are summed.
  StatusOr<std::vector<StepDeviceTime>> stepDeviceTimes(int64_t run_id);

  // Real device tasks of a run (imported traces) starting in `window`, in start order.
  StatusOr<std::vector<DeviceTaskRow>> deviceTasks(int64_t run_id, const TimeWindow& window = {}, size_t limit = 0);
  StatusOr<int64_t> deviceTaskCount(int64_t run_id);
  // Device tasks grouped by name (by_type: by type), by total time, longest first.
  StatusOr<std::vector<DeviceTaskAggregate>> deviceTaskAggregates(int64_t run_id, bool by_type = false);
  // Peak allocated / reserved memory per device, in device order.
  StatusOr<std::vector<MemoryPeak>> memoryPeaks(int64_t run_id);

  // Schema 10, memory by owner (empty for older files and runs recorded without memory): the
  // run's device blocks (device -1: every device) in (device, alloc_seq) order, each device's
  // peak as the recorder saw it, and the allocations refused. Op ids are op_events ids.
  StatusOr<std::vector<MemoryBlockRecord>> memoryBlocks(int64_t run_id, int device = -1);
  StatusOr<std::vector<MemoryDeviceRecord>> memoryDevices(int64_t run_id);
  StatusOr<std::vector<MemoryOomRecord>> memoryOoms(int64_t run_id);
  // Schema 11: the memory each device software component reserved (imported npu_module_mem.csv),
  // in (device, component, time) order; empty for older files and for recorded runs.
  StatusOr<std::vector<MemoryComponentRecord>> memoryComponents(int64_t run_id);

  StatusOr<std::vector<MemorySample>> memory(const MemoryQuery& query);
  // Streams memory samples of a run in time order.
  StatusOr<MemoryCursor> openMemoryCursor(int64_t run_id, const TimeWindow& window);
  // Earliest time stamp of the run's ops, steps, memory samples and device tasks (and its started_ns).
  StatusOr<int64_t> earliestTime(int64_t run_id);

  StatusOr<std::vector<TensorDumpInfo>> tensorDumps(int64_t run_id);
  // The run's msprobe entries in call order (empty for a run without them).
  StatusOr<std::vector<DumpEntryRow>> dumpEntries(int64_t run_id);
  StatusOr<TensorDumpData> tensorDumpData(int64_t dump_id);

  // The text of an interned string id of this file ("" for unknown ids); the view lives as long
  // as the reader. Reloads the strings table when a live file has grown new ones.
  std::string_view stringValue(int64_t id);
  // Damage seen while reading a corrupt file that still opens (its strings table out of order,
  // unreadable part-way, or lacking an id a row names; op rows out of id order), one sentence
  // each, in the order seen.
  // Not an integrity check: only what was read is looked at (strings are read when a name is
  // first asked for). Reading goes on past it, so a report can still be printed; front-ends
  // warn with these.
  const std::vector<std::string>& damage() const { return damage_; }
  // The op of a statement's current row (columns kOpColumns), its strings from the cache.
  OpSlice opSliceAt(sqlite3_stmt* st);
  // Op rows read in id order come with rising ids; one that does not (a corrupt b-tree can send
  // a read round in a loop, millions of rows from a small file) is damage, noted, and the read
  // stops there. `last_id` is the id before, updated when in order.
  bool opInOrder(int64_t id, int64_t* last_id);

  // A read transaction: every query between begin and end sees one snapshot of a live file.
  // Nesting is counted; only the outermost pair talks to SQLite.
  Status beginSnapshot();
  Status endSnapshot();

  sqlite3* db() const { return db_.get(); }

 private:
  TraceReader(std::string path, ScopedDb db);
  // Which op_blocks a query reads (defined in trace_reader.cpp).
  struct BlockFilter;
  // The op id ranges of the blocks that pass `filter`, joined and in id order, followed by the
  // ids past the last block when there are any.
  StatusOr<std::vector<OpIdRange>> opRanges(const BlockFilter& filter);
  StatusOr<std::optional<OpIdRange>> unblockedOps();
  StatusOr<int64_t> maxOpId();
  StatusOr<std::vector<StepDeviceTime>> stepTaskTimes(int64_t run_id);
  // The run's stored op table (op_totals, written when it ended), or none.
  StatusOr<std::optional<OpAggregateTable>> storedOpTable(const OpAggregateQuery& q, bool by_shapes);
  StatusOr<sqlite3_stmt*> cached(const char* key, const std::string& sql);
  Status loadStrings();
  void noteDamage(std::string what);

  std::string path_;
  ScopedDb db_;
  std::unordered_map<std::string, ScopedStmt> statements_;
  std::unordered_map<int64_t, std::string> strings_;
  int64_t max_string_id_ = 0;
  bool strings_unreadable_ = false;  // the strings table is corrupt: do not retry per unknown id
  bool missing_string_noted_ = false;
  std::vector<std::string> damage_;
  int64_t schema_ = 0;  // the file's schema version (a reader reads 8 and 9)
  int snapshot_depth_ = 0;
  std::unordered_map<int64_t, std::vector<ThreadSummary>> finished_run_threads_;  // cache for ended runs
};

// Forward-only stream of OpSlices over a prepared statement. Movable, not copyable.
class OpCursor {
 public:
  OpCursor(OpCursor&&) = default;
  OpCursor& operator=(OpCursor&&) = default;
  // The next op, or false at the end (or on an error: see status()).
  bool next(OpSlice* out);
  const Status& status() const { return status_; }

 private:
  friend class TraceReader;
  OpCursor(TraceReader* reader, ScopedStmt stmt, std::vector<OpIdRange> ranges)
      : reader_(reader), stmt_(std::move(stmt)), ranges_(std::move(ranges)) {}
  TraceReader* reader_;
  ScopedStmt stmt_;              // bound to ranges_[next_range_]
  std::vector<OpIdRange> ranges_;
  size_t next_range_ = 0;
  int64_t last_id_ = INT64_MIN;
  Status status_;
};

class MemoryCursor {
 public:
  MemoryCursor(MemoryCursor&&) = default;
  MemoryCursor& operator=(MemoryCursor&&) = default;
  bool next(MemorySample* out);
  const Status& status() const { return status_; }

 private:
  friend class TraceReader;
  explicit MemoryCursor(ScopedStmt stmt) : stmt_(std::move(stmt)) {}
  ScopedStmt stmt_;
  Status status_;
};

// Sorts an op table as TraceReader::opAggregates does (ties by name, then shapes, so the order
// is stable); for front ends that aggregate ops they already hold.
void sortOpTable(std::vector<OpAggregate>* rows, OpSortKey sort, bool descending);
// A table row from a group's sums: avg and percentages derived, self_sum_ns the table's 100 %.
OpAggregate makeOpAggregate(std::string name, std::string input_shapes, int64_t calls, int64_t total_ns,
                            int64_t self_ns, int64_t min_ns, int64_t max_ns, int64_t device_ns, int64_t device_calls,
                            int64_t self_sum_ns);

// The strings of the CLI's op table for a sort key ("self", "total", "count", "avg", "name",
// "device") and back; kInvalidArgument names the accepted keys.
StatusOr<OpSortKey> parseOpSortKey(const std::string& text);
const char* opSortKeyName(OpSortKey key);

}  // namespace npuscope
