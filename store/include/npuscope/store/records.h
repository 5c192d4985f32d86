// The event records producers hand to the trace writer. Op records are fixed-size and
// allocation-free; strings (names, shape lists) travel as ids of the process's StringTable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace npuscope {

struct OpRecord {
  int64_t id = 0;               // unique in the run (producer-assigned); parents refer to it
  int64_t parent_id = -1;       // -1: top level
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t seq_nr = -1;          // autograd sequence number, -1 when none
  int64_t device_start_ns = -1; // modeled stream start, -1 when not modeled
  int64_t device_dur_ns = -1;
  uint64_t thread_id = 0;
  int32_t step = -1;            // -1: outside any step
  uint32_t name_id = 0;
  uint32_t shapes_id = 0;       // 0: none
  uint32_t dtypes_id = 0;
  int16_t depth = 0;
  int8_t device = -1;           // npu index, -1 for host-only ops
  uint8_t is_backward = 0;
  uint8_t host_sync = 0;        // 1: the host waits for the device here (copy to the host, item, synchronize)
};

// A batch of op records, filled by one thread and handed to the writer whole.
struct OpBuffer {
  static constexpr size_t kCapacity = 4096;
  size_t size = 0;
  OpRecord records[kCapacity];
  bool full() const { return size == kCapacity; }
};

struct StepRecord {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  double loss = 0;
  double loss_scale = 1;
  bool overflow = false;
  bool skipped = false;
  double lr = 0;
  double grad_norm = -1;  // < 0: not measured (stored as NULL)
};

struct OverflowRecord {
  int64_t step = -1;
  int64_t ts_ns = 0;
  std::string source;  // float_status | nonfinite_grad | dump_check | first_op
  std::string op_name;
  std::string detail;
  int64_t op_id = -1;  // op_events id of the op it happened in, -1: not known
};

struct MemoryRecord {
  int64_t ts_ns = 0;
  int32_t device = 0;
  uint64_t allocated = 0;
  uint64_t reserved = 0;
};

// A device block that was live while the run recorded (schema 10, table memory_blocks).
struct MemoryBlockRecord {
  int64_t alloc_seq = 0;
  int64_t free_seq = -1;   // -1: live when recording stopped
  int64_t alloc_ns = 0;
  int64_t free_ns = -1;
  int64_t size = 0;
  int64_t requested = 0;
  int64_t op_id = -1;      // producer id of the allocating op, -1: none
  int64_t step = -1;
  uint64_t address = 0;
  int32_t device = 0;
  uint8_t category = 0;    // npu::MemoryCategory's value (memory_categories.id)
  bool update = false;     // its row was written while it was live: this one sets its free
                           // (free_seq, free_ns, category) on that row
  std::string owner;       // "": none
};

// A device's peak while the run recorded (table memory_devices).
struct MemoryDeviceRecord {
  int32_t device = 0;
  int64_t start_seq = 0, end_seq = 0;
  int64_t peak_seq = -1;   // -1: no allocation while steps were kept
  int64_t peak_ns = 0;
  int64_t peak_allocated = 0, peak_reserved = 0, largest_cached = 0;
  int64_t peak_op_id = -1, peak_step = -1;
  int64_t capacity = 0;
};

// An allocation the device refused (table memory_ooms).
struct MemoryOomRecord {
  int32_t device = 0;
  int64_t seq = 0;
  int64_t ts_ns = 0;
  int64_t requested = 0;
  int64_t op_id = -1;
  int64_t step = -1;
  std::string message;
};

// Memory a component of the device software reserved at a moment (schema 11, table
// memory_components): torch_npu's npu_module_mem.csv rows, imported.
struct MemoryComponentRecord {
  int32_t device = 0;
  std::string component;   // CANN's name: APP, HCCL, RUNTIME, GE, SLOG ...
  int64_t ts_ns = 0;
  int64_t reserved = 0;    // bytes
};

// One input or output tensor of a dumped op (the dumper's `tensor_dumps` row). Not a hot-path
// record: the dumper hands the writer one batch per op (TraceWriter::addTensorDumps).
struct TensorDumpRecord {
  int64_t step = -1;   // -1: outside any step
  int64_t op_id = -1;  // op_events id of the op, -1 when not linked
  std::string op_name; // the dumper's stable name, e.g. "addmm.3.forward"
  std::string op_type; // e.g. "aten::addmm"
  std::string io;      // input | output
  int64_t idx = 0;
  std::string dtype;   // e.g. "float16" (compare.h's dtype names)
  std::string shape;   // e.g. "[2, 4]"
  std::string format = "ND";
  bool has_stats = false;  // false: the statistics columns are NULL
  double min = 0, max = 0, mean = 0, l2norm = 0;
  int64_t nan_count = 0, inf_count = 0;
  std::vector<uint8_t> data;  // raw little-endian payload; empty: statistics only (or shared)
  bool data_encoded = false;  // `data` already in its stored form (encodeDumpPayload)
  // A payload is stored once per step. A row whose bytes later rows of the same step may share
  // carries a producer-chosen `payload_key` (!= 0); a row whose bytes equal such an earlier
  // row's carries that key in `same_data_as` and no `data` (stored as tensor_dumps.data_ref, the
  // holding row's id). Keys are unique within a step; the holder must be added first.
  uint64_t payload_key = 0;
  uint64_t same_data_as = 0;
  // Schema 9: msprobe's path of the argument ("input.0", "input.0.1", "input.bias", "output.0");
  // empty for the dumper's own rows (named `{io}.{idx}`).
  std::string arg;
};

// One dumped API or module call in msprobe's terms (schema 9, table dump_entries): its entry
// name, the module entry it ran in (construct.json) and its call stack (stack.json).
struct DumpEntryRecord {
  int64_t step = -1;
  std::string name;    // e.g. "Functional.conv2d.0.forward"
  std::string parent;  // "": top level
  std::string stack;   // frames one per line; "": none
  int64_t op_id = -1;  // schema 12: the op_events id of the op the call became, -1: not linked
};

// A task that ran on a real device, read from an imported trace (a GPU kernel or copy, an Ascend
// AI Core / AI CPU / HCCL task): the `device_tasks` row. Names and types are StringTable ids.
struct DeviceTaskRecord {
  int64_t step = -1;         // -1: outside any step
  int64_t op_id = -1;        // the host op that launched it (an OpRecord id of the run), -1: unknown
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t correlation = -1;  // the source's correlation / connection id, -1: none
  int64_t bytes = -1;        // bytes moved (copies, collectives) when the source gives them
  int32_t device = 0;
  int32_t stream = 0;
  uint32_t name_id = 0;
  uint32_t type_id = 0;      // e.g. kernel, gpu_memcpy, AI_CORE, AI_VECTOR_CORE, HCCL
  uint32_t shapes_id = 0;    // 0: none
  std::string comm_group;    // a collective's group, empty: none
};

struct RunInfo {
  int64_t started_ns = 0;
  int64_t wall_start_ns = 0;
  std::string command, model, opt_level, optimizer, device, config_json;
  // Imported runs (schema 5): the format and path they came from, and the rank of a job.
  std::string source, source_path;
  int64_t rank = -1, world_size = -1;  // -1: unknown
  std::string job;  // schema 8: the job a rank's run belongs to ("": not known)
};

// One collective of a multi-rank job (schema 8, table collectives).
struct CollectiveRecord {
  int64_t step = -1;
  int64_t op_id = -1;     // the hcom_* op that enqueued it (producer id), -1: not recorded
  int64_t group = 0;      // process group, numbered in creation order
  int64_t seq = 0;        // the group's n-th collective, from 1
  std::string kind;       // allreduce, broadcast, ...
  int64_t bytes = 0;
  std::string dtype;
  int64_t group_size = 0;
  int64_t start_ns = 0;   // enqueued
  int64_t end_ns = -1;    // completed, -1: never
};

}  // namespace npuscope
