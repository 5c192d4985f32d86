// msprobe's dump inside a recording: when npuscope's PrecisionDebugger (python/npuscope/msprobe.py)
// dumps while a RecordingSession records (npuscope.profile, torch_npu.profiler), each dumped step
// also becomes rows of the run's trace file: a `dump_entries` row per call, linked to the op it
// became (opWatchBegin / opWatchEnd, currentOpId), and a `tensor_dumps` row per tensor with
// msprobe's statistics and argument path, linked to the same op; with task tensor the tensor's
// bytes too, through the trace writer's dump path (zstd when it pays, a payload stored once per
// step: a tensor two entries share is one stored payload, the later row referring to it). So
// `npuscope dump show`, compare and the GUI find a profiled run's msprobe entries beside its ops.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope::profiler {

// One dumped step as the debugger wrote its files.
struct MsprobeStep {
  std::string dump_json, stack_json, construct_json;  // the texts of dump.json, stack.json, construct.json
  int64_t step = -1;                                   // the recording's step the calls ran in
  std::unordered_map<std::string, int64_t> op_of_entry;  // entry -> op_events id (-1 / absent: none)
  // Task tensor: each tensor file's data_name ("{entry}.input.0.pt") and the host copy it holds.
  // Pairs holding the same tensor (one leaf met by two entries) store one payload.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

// What addMsprobeStep added.
struct MsprobeRows {
  int64_t entries = 0, tensors = 0, linked_entries = 0, payloads = 0;
};

// Adds `step` to the active recording's trace file. kFailedPrecondition when no recording is
// active; kInvalidArgument when a text is not what the debugger writes (naming the file).
StatusOr<MsprobeRows> addMsprobeStep(MsprobeStep&& step);

}  // namespace npuscope::profiler
