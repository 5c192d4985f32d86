#include "npuscope/analysis/step_summary.h"

#include <algorithm>
#include <cmath>

namespace npuscope {

StepSummary summarizeSteps(const std::vector<StepRow>& steps, const std::vector<StepDeviceTime>& device) {
  StepSummary s;
  s.recorded = static_cast<int64_t>(steps.size());
  size_t d = 0;
  for (const StepRow& r : steps) {
    s.durations.push_back(r.dur_ns);
    s.overflow_steps += r.overflow;
    s.skipped_steps += r.skipped;
    s.total_ns += r.dur_ns;
    if (r.skipped) s.skipped_ns += r.dur_ns;
    if (r.loss) {
      if (!s.first_loss) s.first_loss = r.loss;
      s.last_loss = r.loss;
    }
    if (r.loss_scale) {
      if (s.last_scale && *s.last_scale != *r.loss_scale) s.scale_changes.push_back({r.step, *s.last_scale, *r.loss_scale});
      if (!s.first_scale) s.first_scale = r.loss_scale;
      s.last_scale = r.loss_scale;
      s.min_scale = s.min_scale ? std::min(*s.min_scale, *r.loss_scale) : *r.loss_scale;
      s.max_scale = s.max_scale ? std::max(*s.max_scale, *r.loss_scale) : *r.loss_scale;
    }
    while (d < device.size() && device[d].step < r.step) ++d;
    if (d < device.size() && device[d].step == r.step && device[d].device_ops > 0) {
      s.host_ns += r.dur_ns;
      s.device_busy_ns += device[d].device_busy_ns;
    }
  }
  return s;
}

double percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::min<double>(static_cast<double>(v.size() - 1),
                                                        std::floor(p * static_cast<double>(v.size() - 1) + 0.5)));
  return static_cast<double>(v[i]);
}

}  // namespace npuscope
