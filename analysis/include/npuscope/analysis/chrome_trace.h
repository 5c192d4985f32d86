// Export of a recorded run as Chrome trace JSON (the "Trace Event Format"), which Perfetto UI
// and chrome://tracing open:
//   {"traceEvents":[...],"displayTimeUnit":"ms","otherData":{...}}
// - every op: a complete event {"ph":"X","cat":"cpu_op","name","pid","tid","ts","dur","args"}
//   on its thread, args "External id" (op id), "Parent id", "Step", "Sequence number",
//   "Input Dims", "Input type", "Device", "Device dur (modeled) us", and for backward ops
//   "Backward": 1 and "Fwd thread id" (thread of the forward op with the same sequence number);
// - one "ProfilerStep#N" slice per stored step (cat "user_annotation") on the main thread
//   (the thread with the most forward ops), args with loss, loss scale, overflow, skipped;
// - thread_name / process_name / *_sort_index metadata events (ph "M") in every file;
// - counters (ph "C"): "Memory npu:N" {allocated, reserved} in bytes per device, and
//   "Loss scale" / "Loss" at each step start;
// - an npu run's predicted timeline (analysis/predicted_timeline.h), step by step: the host's
//   predicted ops on the host process's thread "host (predicted, a real npu)" (cat "predicted")
//   and the kernels on npu N's predicted stream (pid 1000+N, thread "npu:N stream (predicted)",
//   cat "kernel"); each step placed at its recorded start (or after the previous predicted step
//   when that one runs longer). The predicted lanes are written with their step's slice, so
//   they sit in the part of their step. An imported run's real device tasks instead, per stream.
// ts and dur are microseconds relative to the run's earliest record, written with exactly three
// decimals (integer nanoseconds, no rounding). Slices on one track always nest: a slice that
// sticks out of its enclosing slice (clock jitter, a step boundary inside an op) is shortened to
// end with it, because Perfetto drops partially overlapping slices; the count is reported.
//
// The output is streamed (memory does not grow with the run) and split by time into files of at
// most `max_file_bytes` each, every one a complete trace of its own: OUT.json, OUT.1.json, ...
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

struct PredictedStep;
struct PredictedOp;

// One predicted step as the exporter writes it (ChromeTraceOptions::on_predicted_step).
struct PredictedStepView {
  const StepRow* step = nullptr;
  int64_t placed_at_ns = 0;                         // its predicted start on the recording's clock
  const PredictedStep* prediction = nullptr;
  const std::vector<PredictedOp>* ops = nullptr;    // host order, times from placed_at_ns
  const std::vector<OpSlice>* recorded = nullptr;   // the step's recorded ops (PredictedOp::id = OpSlice::id)
};

struct ChromeTraceOptions {
  int64_t run_id = -1;                     // -1: the latest run
  uint64_t max_file_bytes = 256ull << 20;  // chrome://tracing's practical limit
  TimeWindow window;                       // only ops, steps and samples that start in it
  bool device_stream = true;               // the predicted host and npu stream tracks
  bool memory_counters = true;
  // torch_npu's trace_view.json instead (ascend_pt_export.h): a bare JSON array, `ts` strings in
  // Unix microseconds, ProfilerStep#N as cpu_op, the host process "Python" with "Thread N"
  // threads, "Input Dims" / "Input type" as ";\r\n" lists; each npu an "Ascend Hardware"
  // process whose "Stream 2" holds the predicted kernels under their Ascend op type
  // (ascend_kernels.h) with torch_npu's task args and a HostToDevice flow from the launching op;
  // collectives on an "HCCL" process's "Group 0 Communication". No predicted host lane, no
  // counters, never split. Recorded runs only.
  bool ascend_trace_view = false;
  // Called with each predicted step once its events are written (an npu run's steps with kernels).
  std::function<Status(const PredictedStepView&)> on_predicted_step;
};

struct ChromeTraceSummary {
  std::vector<std::string> files;  // in time order; files[0] is the requested path
  int64_t op_events = 0;
  int64_t step_events = 0;
  int64_t device_events = 0;
  int64_t predicted_host_events = 0;
  int64_t counter_events = 0;
  int64_t clamped_slices = 0;  // slices shortened so they nest in their parent
  int64_t base_ns = 0;         // the recording time that is ts 0
};

// Writes the run as Chrome trace JSON at `out_path` (and OUT.1.json, ... when it is larger than
// max_file_bytes; stale parts of an earlier, longer export of the same name are removed). A
// single event larger than the limit still gets its own file.
StatusOr<ChromeTraceSummary> exportChromeTrace(TraceReader& reader, const std::string& out_path,
                                               const ChromeTraceOptions& options = ChromeTraceOptions());

// The path of part `part` (0-based) of an export to `out_path`: "t.json" -> "t.json", "t.1.json".
std::string chromeTracePartPath(const std::string& out_path, size_t part);

}  // namespace npuscope
