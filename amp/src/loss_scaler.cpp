#include "npuscope/amp/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <c10/util/Exception.h>

#include "npuscope/store/format.h"

namespace npuscope::amp {

std::string LossScalerOptions::validate() const {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!dynamic) {
    if (!positive(static_scale)) return "loss_scale " + formatGeneral(static_scale) + ": expected a positive finite number";
    return {};
  }
  if (!positive(init_scale)) return "dynamic_init_scale " + formatGeneral(init_scale) + ": expected a positive finite number";
  if (!(std::isfinite(growth_factor) && growth_factor > 1.0)) {
    return "scale_growth_factor " + formatGeneral(growth_factor) + ": expected a finite number > 1";
  }
  if (!(backoff_factor > 0.0 && backoff_factor < 1.0)) {
    return "scale_backoff_factor " + formatGeneral(backoff_factor) + ": expected a number in (0, 1)";
  }
  if (window < 1) return "scale_window " + std::to_string(window) + ": expected at least 1";
  if (!(std::isfinite(min_scale) && min_scale >= 0)) {
    return "min_loss_scale " + formatGeneral(min_scale) + ": expected a finite number >= 0 (0: no floor)";
  }
  if (!positive(max_scale)) return "max_loss_scale " + formatGeneral(max_scale) + ": expected a positive finite number";
  if (min_scale > max_scale) {
    return "min_loss_scale " + formatGeneral(min_scale) + " exceeds max_loss_scale " + formatGeneral(max_scale);
  }
  return {};
}

LossScaler::LossScaler(LossScalerOptions options) : options_(options) {
  const std::string err = options_.validate();
  TORCH_CHECK(err.empty(), "LossScaler: ", err);
  scale_ = options_.dynamic ? std::max(options_.min_scale, std::min(options_.max_scale, options_.init_scale))
                            : options_.static_scale;
}

double LossScaler::collapseThreshold() const { return options_.min_scale > 0 ? options_.min_scale : 1.0; }

bool LossScaler::update(bool overflow, int id) {
  if (!options_.dynamic) {
    ++unskipped_;
    return false;
  }
  bool skip = false;
  if (overflow) {
    skip = true;
    scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    unskipped_ = 0;
    const bool collapsed = options_.min_scale > 0 ? scale_ <= options_.min_scale : scale_ < 1.0;
    if (collapsed && !collapseWarned_) {
      collapseWarned_ = true;
      if (warn_) {
        std::ostringstream os;
        os << "loss scaler " << id << ": the loss scale collapsed to " << scale_
           << (options_.min_scale > 0 ? " (the min_loss_scale floor)" : " (below 1)")
           << "; gradients overflow at every scale, which points at a diverging model or an fp16-unsafe op"
           << " rather than at the scale";
        warn_(os.str());
      }
    }
  } else {
    ++unskipped_;
  }
  if (unskipped_ == options_.window) {
    scale_ = std::min(options_.max_scale, scale_ * options_.growth_factor);
    unskipped_ = 0;
  }
  if (scale_ > collapseThreshold()) collapseWarned_ = false;  // re-armed once the scale recovers
  return skip;
}

void LossScaler::set(double lossScale, int64_t unskipped) {
  TORCH_CHECK(std::isfinite(lossScale) && lossScale > 0, "LossScaler: loss_scale ", lossScale,
              " in the state: expected a positive finite number");
  TORCH_CHECK(unskipped >= 0, "LossScaler: unskipped ", unskipped, " in the state: expected >= 0");
  scale_ = lossScale;
  unskipped_ = unskipped;
  collapseWarned_ = false;
}

}  // namespace npuscope::amp
