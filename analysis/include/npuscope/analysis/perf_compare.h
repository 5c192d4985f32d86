// Performance compare of two runs (msprof-analyze compare_tools, HTA TraceDiff): per host op name
// and per device task (or modeled device time of an op) — calls, total, avg, max on each side,
// difference and ratio, ops on one side only — and the step times side by side. Works across
// sources: an emulated run against an imported torch_npu or Kineto trace, O1 against O2, before
// against after.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

struct PerfSide {
  int64_t calls = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  double avgNs() const { return calls ? static_cast<double>(total_ns) / static_cast<double>(calls) : 0; }
};

struct PerfRow {
  std::string name;
  PerfSide a, b;
  int64_t diffNs() const { return b.total_ns - a.total_ns; }
  // b / a of the totals; 0 when a is absent (the op is on B's side only).
  double ratio() const { return a.total_ns > 0 ? static_cast<double>(b.total_ns) / static_cast<double>(a.total_ns) : 0; }
  bool onlyA() const { return b.calls == 0; }
  bool onlyB() const { return a.calls == 0; }
};

struct PerfStepPair {
  int64_t index = 0;             // position among each run's recorded steps
  int64_t step_a = -1, step_b = -1;
  int64_t dur_a = -1, dur_b = -1;  // -1: the run has fewer steps
};

struct PerfCompareResult {
  std::vector<PerfRow> host;    // host ops by name, largest |difference| first
  std::vector<PerfRow> device;  // device tasks by op type (taskCompareKey), or an op's modeled
                                // device time for runs without real tasks
  std::string device_a, device_b;  // what each side's device rows are: "real" | "model" | "none"
  std::vector<PerfStepPair> steps;
  int64_t host_total_a = 0, host_total_b = 0;      // sum of top-level host op time
  int64_t device_total_a = 0, device_total_b = 0;
};

StatusOr<PerfCompareResult> comparePerf(TraceReader& a, int64_t run_a, TraceReader& b, int64_t run_b);

// "trans_TransData_12" -> "trans_TransData": device task names carry instance numbers.
std::string taskGroupName(const std::string& name);
// The row a device task is compared under: its op type when the source gives one (torch_npu's
// kernel_details / COMPUTE_TASK_INFO: "Conv2D" for Conv2D1, Conv2D4, ...), else its name
// without instance numbers (types that only name a core or a kind of task: kernel, AI_CORE,
// HCCL, EVENT_WAIT_SQE, ...).
std::string taskCompareKey(const std::string& name, const std::string& type);

}  // namespace npuscope
