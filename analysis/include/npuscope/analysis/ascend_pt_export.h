// A recorded run written as torch_npu's profiler writes a card's profile: the
// `{worker}_{timestamp}_ascend_pt/` folder that MindStudio Insight, msprof-analyze and scripts
// written for real exports open (../shared/docs/formats.md, "torch_npu profiler output"):
//
//   profiler_info[_{rank}].json      the profiler's configuration, rank_id, start and end
//   profiler_metadata.json           ENV_VARIABLES, the user's metadata, and "npuscope": what made it
//   ASCEND_PROFILER_OUTPUT/
//     trace_view.json                bare event array, string ts (chrome_trace.h, ascend flavor)
//     kernel_details.csv             one row per kernel: Step Id, Task ID, Name, Type, Accelerator
//                                    Core, Start Time(us) (tab-ended), Duration(us), Wait Time(us),
//                                    Input Shapes ("""32,3,224,224""") / Data Types / Formats, ...
//     op_statistic.csv               kernels per op type and core: count, total, min, avg, max, ratio
//     operator_details.csv           one row per host op: host and device self / total durations
//     api_statistic.csv              the kernel launches (level node) per op type
//     step_trace_time.csv            per step: computing, communication (not) overlapped, free, stage
//     memory_record.csv              the device pool after each change (component PTA)
//     operator_memory.csv            each growth of the pool with the op that caused it
//     communication.json             per step and collective: time and bandwidth (runs with collectives)
//     communication_matrix.json      per collective: this rank's links to its peers
//
// The device rows are the predicted timeline's kernels (predicted_timeline.h): what a real card
// would run for the recorded ops, by the cost model; profiler_metadata.json says so. Host rows
// are the recorded ops. Recorded runs only (an imported run already is someone's export).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

struct AscendPtOptions {
  int64_t run_id = -1;                // -1: the latest run
  std::optional<StepRange> steps;     // only these steps (a profiler schedule's active cycle)
  std::string worker_name;            // the folder's worker part; "": {host}_{run id}
  std::string config_json;            // profiler_info's "config" object (torch_npu's keys); "": an export's
  std::string metadata_json;          // an object of keys added to profiler_metadata.json
};

struct AscendPtSummary {
  std::string folder;                 // the *_ascend_pt folder written
  int64_t host_ops = 0;
  int64_t kernels = 0;
  int64_t steps = 0;
  int64_t memory_records = 0;
  int64_t collectives = 0;
};

// Writes the folder. `dir` ending in "_ascend_pt" is the folder itself (made when missing);
// otherwise the folder "{worker}_{YYYYmmddHHMMSSmmm}_ascend_pt" is made inside `dir`, as
// torch_npu's tensorboard_trace_handler(dir) does. The trace file is only read. When a write fails
// (a full disk), the error names the file, and a folder this export made is removed again.
StatusOr<AscendPtSummary> exportAscendPt(TraceReader& reader, const std::string& dir,
                                         const AscendPtOptions& options = AscendPtOptions());

}  // namespace npuscope
