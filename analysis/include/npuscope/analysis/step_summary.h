// A run's steps summed up once, for every front-end that shows them (npuscope report's text and
// JSON, the workbench's Training tab): step times, the time lost to steps AMP skipped, loss and
// loss-scale course, and the host/device split of steps with modeled device time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

struct StepSummary {
  int64_t recorded = 0;
  int64_t total_ns = 0, skipped_ns = 0;  // step time in all, and in steps AMP skipped (lost work)
  std::vector<int64_t> durations;
  int64_t host_ns = 0, device_busy_ns = 0;  // over steps that have modeled device time
  int64_t overflow_steps = 0, skipped_steps = 0;
  std::optional<double> first_loss, last_loss;
  std::optional<double> first_scale, last_scale, min_scale, max_scale;
  struct ScaleChange {
    int64_t step;
    double from, to;
  };
  std::vector<ScaleChange> scale_changes;
  PredictedSummary predicted;  // npu runs: the predicted real-device steps
};

// `device`: the run's per-step device times (TraceReader::stepDeviceTimes), in step order; may be
// empty. `predicted` is left for the caller (it needs the reader).
StepSummary summarizeSteps(const std::vector<StepRow>& steps, const std::vector<StepDeviceTime>& device = {});

// The p-quantile (0 to 1) of `v` by nearest rank; 0 for an empty `v`.
double percentile(std::vector<int64_t> v, double p);

}  // namespace npuscope
