// Findings over a recorded or imported run, as msprof-analyze's advisor and `nsys analyze` give
// them: each rule looks at the run's op table, steps, overflow events and memory, and when it
// fires says how bad it is, the numbers that prove it, the ops or steps it concerns and what to
// try. Torch- and Qt-free; the CLI (`npuscope advise`) and the GUI print the same findings.
//
// Rules (ids are stable; thresholds in AdvisorOptions):
//   not_native_ops     ops a real torch_npu would run on the host or not at all (analysis/op_support.h)
//   dynamic_shapes     an op taking input shapes it had not taken before in step after step (of
//                      the first 64; each new shape compiles a new operator on Ascend)
//   cast_overhead      time in dtype conversions and copies above a share of the op time
//   skipped_steps      steps skipped for overflow: how many and the time they cost
//   loss_scale         the dynamic loss scale collapsing (below 1) or oscillating (many backoffs)
//   memory_capacity    peak reserved device memory near the device's capacity
//   memory_model_state  master weights and optimizer state holding a large share of the peak
//   memory_activations  activations kept for backward holding a large share of the peak
//   memory_fragmentation  much of the reserved memory free (cached) at the peak
//   memory_leak         allocated memory at the start of a step growing step after step
//                      (the four need memory by owner: analysis/memory_breakdown.h)
//   fp32_cube          under O1/O2, matmuls and convolutions whose inputs are all fp32 (in the
//                      steps' middle step; needs recorded dtypes)
//   unfused_optimizer  an Optimizer.step#X.step (PyTorch's mark) running many small ops per step
//   host_bound         the device idles most of the step waiting for the host: an npu run's
//                      predicted timeline (analysis/predicted_timeline.h) of its middle step, with
//                      what a doubled batch and the task queue would change; an imported run's
//                      real device tasks against its steps
//   first_nonfinite    where the first NaN / inf of the run's dumps appeared, and for a rank of a
//                      job (its ranks in the same file, e.g. an imported msprobe job) on which rank
//                      and whether the others received it through a collective (first_nonfinite.h)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

enum class Severity { kInfo, kWarning, kCritical };
const char* severityName(Severity s);  // "info" "warning" "critical"

struct Finding {
  std::string rule;      // the rule id above
  Severity severity = Severity::kInfo;
  std::string title;     // one line: what was found
  std::string evidence;  // the numbers that prove it
  std::string suggestion;
  std::vector<std::string> ops;     // op names it concerns (for the GUI to highlight)
  std::vector<int64_t> steps;       // steps it concerns
};

struct AdvisorOptions {
  int64_t dynamic_shapes_min = 4;        // steps in which one op takes a new input shape
  double cast_share_min = 0.10;          // of the run's op self time
  double skipped_share_warn = 0.05;      // of the run's step time
  int64_t scale_backoffs_oscillating = 4;  // loss-scale decreases in the run
  double memory_share_warn = 0.90;       // of the device's capacity
  int64_t device_capacity_bytes = int64_t{32} << 30;  // Ascend 910: 32 GiB HBM
  double memory_state_share_min = 0.5;      // master weights + optimizer state, of the peak
  double memory_activation_share_min = 0.5;  // of the peak
  double memory_fragmentation_share_min = 0.3;  // of the reserved bytes at the peak
  int64_t memory_fragmentation_bytes_min = int64_t{256} << 20;
  int64_t memory_leak_steps_min = 4;         // steps of growth
  int64_t memory_leak_bytes_min = int64_t{1} << 20;
  double fp32_cube_share_min = 0.05;     // of the matmul/convolution time of the step
  int64_t unfused_optimizer_ops_min = 20;  // ops under one optimizer step
  double host_bound_idle_min = 0.5;      // device idle share of the step
};

// Every rule over run `run_id`, most severe first.
StatusOr<std::vector<Finding>> advise(TraceReader& reader, int64_t run_id, const AdvisorOptions& options = {});

}  // namespace npuscope
