// LossScaler: apex's per-loss scale state machine (apex/amp/scaler.py) with Ascend apex's knobs.
//
// Dynamic scaling, rule by rule (references.md, "Dynamic loss scale"):
//   * start at min(max_scale, init_scale) (init_scale defaults to 2^16);
//   * overflow: the step is skipped, scale = max(min_scale, scale * backoff_factor) and the
//     clean-step counter `unskipped` is reset to 0;
//   * clean step: unskipped += 1; when it reaches `window`, scale = min(max_scale,
//     scale * growth_factor) and unskipped = 0.
// Static scaling never changes the scale and never skips: an overflow is reported but the step is
// taken, as apex does for a fixed loss_scale.
//
// The scaler also warns once when the scale collapses: when it reaches min_scale (if a floor is
// set) or falls below 1 (if not). Messages go to the amp log (amp.h, setLogSink).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace npuscope::amp {

struct LossScalerOptions {
  bool dynamic = true;
  double static_scale = 1.0;       // the scale when !dynamic
  double init_scale = 65536.0;     // 2^16; apex's dynamic start, Ascend's dynamic_init_scale
  double growth_factor = 2.0;      // Ascend scale_growth_factor
  double backoff_factor = 0.5;     // Ascend scale_backoff_factor
  int64_t window = 2000;           // Ascend scale_window: clean steps before a growth
  double min_scale = 0.0;          // floor of the scale; 0 = none
  double max_scale = 16777216.0;   // 2^24, cap of the scale

  // Empty when valid, else one line naming the offending field and what was expected.
  std::string validate() const;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  const LossScalerOptions& options() const { return options_; }
  bool dynamic() const { return options_.dynamic; }
  double lossScale() const { return scale_; }
  // Consecutive clean steps since the last overflow or growth.
  int64_t unskipped() const { return unskipped_; }

  // Applies one step's outcome; returns true when the step must be skipped (dynamic and
  // overflow). `id` names the scaler in the warnings ("loss scaler 0").
  bool update(bool overflow, int id = 0);

  // apex state: {loss_scale, unskipped}. set() checks the values (scale > 0 and finite,
  // unskipped >= 0) and throws c10::Error naming the field otherwise.
  void set(double lossScale, int64_t unskipped);

  // Called with one line when the scale collapses (see above); set by amp.
  using Warn = std::function<void(const std::string&)>;
  void setWarn(Warn warn) { warn_ = std::move(warn); }

 private:
  double collapseThreshold() const;

  LossScalerOptions options_;
  double scale_;
  int64_t unskipped_ = 0;
  bool collapseWarned_ = false;
  Warn warn_;
};

}  // namespace npuscope::amp
