#include "npuscope/amp/grad_scaler.h"

#include <cmath>

#include <ATen/ATen.h>

#include "npuscope/amp/amp.h"
#include "npuscope/optim/multi_tensor.h"

namespace npuscope::amp {
namespace {

bool lowPrecisionWithoutMasters(const optim::NpuFusedOptimizer& opt) {
  for (const auto& bank : opt.banks()) {
    const auto t = bank.params.dtype();
    if ((t == at::kHalf || t == at::kBFloat16) && !bank.hasMasters()) return true;
  }
  return false;
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  TORCH_CHECK(std::isfinite(options_.init_scale) && options_.init_scale > 0, "GradScaler: init_scale ",
              options_.init_scale, ": expected a positive finite number");
  TORCH_CHECK(options_.growth_factor > 1.0, "GradScaler: growth_factor ", options_.growth_factor,
              ": expected a number > 1");
  TORCH_CHECK(options_.backoff_factor > 0.0 && options_.backoff_factor < 1.0, "GradScaler: backoff_factor ",
              options_.backoff_factor, ": expected a number in (0, 1)");
  TORCH_CHECK(options_.growth_interval >= 1, "GradScaler: growth_interval ", options_.growth_interval,
              ": expected at least 1");
}

at::Tensor GradScaler::scale(const at::Tensor& outputs) {
  if (!options_.enabled) return outputs;
  TORCH_CHECK(outputs.defined() && at::isFloatingType(outputs.scalar_type()),
              "GradScaler.scale: expected a floating tensor");
  scaledSinceUpdate_ = true;
  scaleUsed_ = scale_;
  at::Tensor out = outputs.scalar_type() == at::kDouble ? outputs : outputs.to(at::kFloat);
  return out * at::scalar_tensor(scale_, out.options());
}

GradScaler::PerOptimizer& GradScaler::beginUnscale(const void* key) {
  PerOptimizer& st = perOptimizer_[key];
  TORCH_CHECK(st.stage != Stage::kUnscaled,
              "GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update()");
  TORCH_CHECK(st.stage != Stage::kStepped, "GradScaler.unscale_: unscale_() is being called after step()");
  return st;
}

void GradScaler::reportOverflow(const std::string& name) {
  OverflowEvent e;
  e.source = "non_finite";
  e.detail = "GradScaler: non-finite gradient in " + name + " at scale " + std::to_string(scale_);
  e.loss_scale = scale_;
  detail::notifyOverflow(e);
}

GradScaler::PerOptimizer& GradScaler::beginStep(const void* key) {
  TORCH_CHECK(scaledSinceUpdate_,
              "GradScaler.step: step() before scale(): this iteration's loss was not scaled with scaler.scale(loss) "
              "since the last update()");
  PerOptimizer& st = perOptimizer_[key];
  TORCH_CHECK(st.stage != Stage::kStepped, "GradScaler.step: step() has already been called since the last update()");
  return st;
}

void GradScaler::unscale_(optim::NpuFusedOptimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& st = beginUnscale(&optimizer);
  TORCH_CHECK(!lowPrecisionWithoutMasters(optimizer), "GradScaler.unscale_: attempting to unscale FP16/BF16 gradients: ",
              optimizer.name(),
              " steps low-precision parameters without fp32 master weights; torch.amp expects fp32 (master) "
              "gradients (build the optimizer with FusedOptimizerConfig.masterWeights, or keep the model fp32)");
  at::Tensor foundInf = at::zeros({1}, at::TensorOptions().dtype(at::kFloat));
  optimizer.unscaleGrads(1.0 / scale_, foundInf);
  st.foundInf = optim::readFoundInf(foundInf);
  st.stage = Stage::kUnscaled;
  if (st.foundInf) reportOverflow(optimizer.name());
}

void GradScaler::unscale_(const void* key, const std::string& name, const std::vector<at::Tensor>& grads) {
  if (!options_.enabled) return;
  PerOptimizer& st = beginUnscale(key);
  // Refused before any gradient changes (torch.amp refuses fp16 gradients; bf16 it takes).
  for (const at::Tensor& g : grads) {
    TORCH_CHECK(!g.defined() || g.scalar_type() != at::kHalf, "GradScaler.unscale_: attempting to unscale FP16 "
                "gradients of ", name, "; torch.amp expects fp32 parameters (keep the model fp32 under autocast)");
  }
  at::NoGradGuard noGrad;
  bool found = false;
  for (const at::Tensor& g : grads) {
    if (!g.defined()) continue;
    at::Tensor grad = g;  // a handle sharing g's storage: mul_ writes the user's gradient
    grad.mul_(1.0 / scale_);
    if (!found && !at::isfinite(grad).all().item<bool>()) found = true;
  }
  st.foundInf = found;
  st.stage = Stage::kUnscaled;
  if (found) reportOverflow(name);
}

bool GradScaler::step(optim::NpuFusedOptimizer& optimizer) {
  if (!options_.enabled) return optimizer.step();
  PerOptimizer& st = beginStep(&optimizer);
  if (st.stage == Stage::kReady) unscale_(optimizer);
  bool stepped = false;
  if (st.foundInf) {
    optimizer.step(at::ones({1}, at::TensorOptions().dtype(at::kFloat)));  // skip; drops staged grads
  } else {
    stepped = optimizer.step();
  }
  st.stage = Stage::kStepped;
  return stepped;
}

bool GradScaler::step(const void* key, const std::string& name, const std::vector<at::Tensor>& grads,
                      const std::function<void()>& stepFn) {
  if (!options_.enabled) {
    stepFn();
    return true;
  }
  PerOptimizer& st = beginStep(key);
  if (st.stage == Stage::kReady) unscale_(key, name, grads);
  const bool stepped = !st.foundInf;
  if (stepped) stepFn();
  st.stage = Stage::kStepped;
  return stepped;
}

void GradScaler::update(std::optional<double> newScale) {
  if (!options_.enabled) return;
  bool any = false;
  bool found = false;
  for (const auto& [opt, st] : perOptimizer_) {
    if (st.stage == Stage::kReady) continue;
    any = true;
    found = found || st.foundInf;
  }
  StepInfo info;
  info.loss_scale = scaleUsed_ > 0 ? scaleUsed_ : scale_;
  if (newScale) {
    TORCH_CHECK(std::isfinite(*newScale) && *newScale > 0, "GradScaler.update: new_scale ", *newScale,
                ": expected a positive finite number");
    scale_ = *newScale;
  } else {
    TORCH_CHECK(any, "GradScaler.update: no inf checks were recorded prior to update() (call unscale_() or step() "
                     "first)");
    if (found) {
      scale_ *= options_.backoff_factor;
      growthTracker_ = 0;
    } else if (++growthTracker_ == options_.growth_interval) {
      const double grown = scale_ * options_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;
      growthTracker_ = 0;
    }
  }
  info.overflow = info.skipped = found;
  if (found) info.overflow_source = "non_finite";
  info.next_loss_scale = scale_;
  perOptimizer_.clear();
  scaledSinceUpdate_ = false;
  scaleUsed_ = 0;
  detail::notifyStep(info);
}

optim::StateDict GradScaler::state_dict() const {
  optim::StateDict d;
  if (!options_.enabled) return d;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  d["scale"] = at::scalar_tensor(scale_, f64);
  d["growth_factor"] = at::scalar_tensor(options_.growth_factor, f64);
  d["backoff_factor"] = at::scalar_tensor(options_.backoff_factor, f64);
  d["growth_interval"] = at::scalar_tensor(options_.growth_interval, i64);
  d["_growth_tracker"] = at::scalar_tensor(growthTracker_, i64);
  return d;
}

void GradScaler::load_state_dict(const optim::StateDict& dict) {
  TORCH_CHECK(options_.enabled, "GradScaler.load_state_dict: this scaler is disabled");
  TORCH_CHECK(!dict.empty(), "GradScaler.load_state_dict: the state dict is empty (saved by a disabled scaler?)");
  auto get = [&](const char* key) {
    const auto it = dict.find(key);
    TORCH_CHECK(it != dict.end() && it->second.numel() == 1, "GradScaler.load_state_dict: the state has no ", key);
    return it->second;
  };
  const double scale = get("scale").item<double>();
  TORCH_CHECK(std::isfinite(scale) && scale > 0, "GradScaler.load_state_dict: scale ", scale,
              ": expected a positive finite number");
  GradScalerOptions o = options_;
  o.growth_factor = get("growth_factor").item<double>();
  o.backoff_factor = get("backoff_factor").item<double>();
  o.growth_interval = get("growth_interval").item<int64_t>();
  const int64_t tracker = get("_growth_tracker").item<int64_t>();
  GradScaler check(o);  // validates the options
  options_ = o;
  scale_ = scale;
  growthTracker_ = tracker;
}

}  // namespace npuscope::amp
