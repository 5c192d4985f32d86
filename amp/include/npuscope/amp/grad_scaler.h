// GradScaler with torch.amp's semantics (torch/cuda/amp/grad_scaler.py) over the fused
// optimizers:
//
//   amp::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale_(*opt);              // optional, e.g. before opt->clipGradNorm()
//   scaler.step(*opt);                  // skipped when a gradient is inf/nan
//   scaler.update();
//
// update(): on an overflow in any optimizer since the last update, scale *= backoff_factor and
// the growth tracker resets; otherwise the tracker counts up and after growth_interval clean
// steps scale *= growth_factor (only if the result is finite) and the tracker resets. There is
// no cap and no floor, as in torch.
//
// Misuse is an error (c10::Error): unscale_() twice before update(), unscale_() after step(),
// step() twice before update(), step() without a scale() since the last update(), update()
// with nothing unscaled or stepped, and low-precision gradients handed to unscale_() — torch.amp
// expects fp32 (master) gradients, so an optimizer stepping fp16/bf16 parameters must be built
// with master weights.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "npuscope/optim/fused_optimizer.h"

namespace npuscope::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() is the identity, step() just steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale, in fp32 for low-precision outputs.
  at::Tensor scale(const at::Tensor& outputs);
  // Unscales the optimizer's gradients in place (into the fp32 masters with master weights)
  // and records whether any is inf/nan.
  void unscale_(optim::NpuFusedOptimizer& optimizer);
  // Unscales if unscale_() was not called, then steps unless an inf/nan was found. Returns
  // whether the optimizer stepped.
  bool step(optim::NpuFusedOptimizer& optimizer);
  // The same for an optimizer that is not fused (Python's torch.optim): `key` identifies it,
  // `name` names it in errors, `grads` are its parameters' gradients (undefined ones are
  // skipped), unscaled in place one by one; `stepFn` steps it.
  void unscale_(const void* key, const std::string& name, const std::vector<at::Tensor>& grads);
  bool step(const void* key, const std::string& name, const std::vector<at::Tensor>& grads,
            const std::function<void()>& stepFn);
  // Updates the scale from this iteration's found-infs, or sets it to `newScale`.
  void update(std::optional<double> newScale = std::nullopt);

  double get_scale() const { return options_.enabled ? scale_ : 1.0; }
  double get_growth_factor() const { return options_.growth_factor; }
  double get_backoff_factor() const { return options_.backoff_factor; }
  int64_t get_growth_interval() const { return options_.growth_interval; }
  int64_t growth_tracker() const { return growthTracker_; }
  bool is_enabled() const { return options_.enabled; }

  // torch's keys: "scale", "growth_factor", "backoff_factor" (float64 scalars),
  // "growth_interval", "_growth_tracker" (int64 scalars). Empty when disabled.
  optim::StateDict state_dict() const;
  void load_state_dict(const optim::StateDict& dict);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    bool foundInf = false;
  };

  GradScalerOptions options_;
  double scale_;
  int64_t growthTracker_ = 0;
  bool scaledSinceUpdate_ = false;
  double scaleUsed_ = 0;
  std::map<const void*, PerOptimizer> perOptimizer_;
  // The found-inf bookkeeping shared by both kinds of optimizer.
  PerOptimizer& beginUnscale(const void* key);
  void reportOverflow(const std::string& name);
  PerOptimizer& beginStep(const void* key);
};

}  // namespace npuscope::amp
