// NpuFusedAdam and NpuFusedAdamW: one kernel, different weight-decay coefficients.
#include <cmath>

#include "npuscope/optim/fused_optimizers.h"
#include "step_support.h"

namespace npuscope::optim {
namespace {

template <typename Options>
void validateAdam(const Options& o, const char* name) {
  TORCH_CHECK(o.lr >= 0.0, name, ": invalid learning rate ", o.lr);
  TORCH_CHECK(o.eps >= 0.0, name, ": invalid epsilon ", o.eps);
  TORCH_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0, name, ": invalid beta1 ", o.beta1);
  TORCH_CHECK(o.beta2 >= 0.0 && o.beta2 < 1.0, name, ": invalid beta2 ", o.beta2);
  TORCH_CHECK(o.weightDecay >= 0.0, name, ": invalid weight_decay ", o.weightDecay);
}

// torch's scalars: bias corrections in double, step size lr/bc1, √bc2 (std::pow as torch's C++ Adam).
template <typename Options>
detail::AdamCoeffs adamCoeffs(const Options& o, int64_t step, double decay, double l2) {
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  detail::AdamCoeffs c{};
  c.decay = detail::f32(decay);
  c.l2 = detail::f32(l2);
  c.beta1 = detail::f32(o.beta1);
  c.oneMinusBeta1 = detail::f32(1.0 - o.beta1);
  c.beta2 = detail::f32(o.beta2);
  c.oneMinusBeta2 = detail::f32(1.0 - o.beta2);
  c.sqrtBiasCorrection2 = detail::f32(std::sqrt(bc2));
  c.eps = detail::f32(o.eps);
  c.negStepSize = detail::f32(-(o.lr / bc1));
  c.amsgrad = o.amsgrad;
  return c;
}

}  // namespace

void NpuFusedAdamOptions::validate() const { validateAdam(*this, "NpuFusedAdam"); }
void NpuFusedAdamWOptions::validate() const { validateAdam(*this, "NpuFusedAdamW"); }

NpuFusedAdam::NpuFusedAdam(const std::vector<at::Tensor>& params, const NpuFusedAdamOptions& options,
                           FusedOptimizerConfig config)
    : NpuFusedAdam(std::vector<ParamGroup<NpuFusedAdamOptions>>{{params, options}}, options, config) {}

NpuFusedAdam::NpuFusedAdam(const std::vector<ParamGroup<NpuFusedAdamOptions>>& groups,
                           const NpuFusedAdamOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

NpuFusedAdamW::NpuFusedAdamW(const std::vector<at::Tensor>& params, const NpuFusedAdamWOptions& options,
                             FusedOptimizerConfig config)
    : NpuFusedAdamW(std::vector<ParamGroup<NpuFusedAdamWOptions>>{{params, options}}, options, config) {}

NpuFusedAdamW::NpuFusedAdamW(const std::vector<ParamGroup<NpuFusedAdamWOptions>>& groups,
                             const NpuFusedAdamWOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

void NpuFusedAdam::stepImpl(int64_t step) {
  std::vector<detail::AdamCoeffs> coeffs;
  bool anyAmsgrad = false;
  for (const auto& o : groups_) {
    coeffs.push_back(adamCoeffs(o, step, /*decay=*/1.0, /*l2=*/o.weightDecay));
    anyAmsgrad = anyAmsgrad || o.amsgrad;
  }
  for (auto& bank : mutableBanks()) {
    const CombinedTensor& m = stateSlot(bank, "exp_avg");
    const CombinedTensor& v = stateSlot(bank, "exp_avg_sq");
    const CombinedTensor* vmax = anyAmsgrad ? &stateSlot(bank, "max_exp_avg_sq") : nullptr;
    detail::adamStep(detail::stepBuffers(bank, {&m, &v, vmax}), coeffs.data());
  }
}

void NpuFusedAdamW::stepImpl(int64_t step) {
  std::vector<detail::AdamCoeffs> coeffs;
  bool anyAmsgrad = false;
  for (const auto& o : groups_) {
    coeffs.push_back(adamCoeffs(o, step, /*decay=*/1.0 - o.lr * o.weightDecay, /*l2=*/0.0));
    anyAmsgrad = anyAmsgrad || o.amsgrad;
  }
  for (auto& bank : mutableBanks()) {
    const CombinedTensor& m = stateSlot(bank, "exp_avg");
    const CombinedTensor& v = stateSlot(bank, "exp_avg_sq");
    const CombinedTensor* vmax = anyAmsgrad ? &stateSlot(bank, "max_exp_avg_sq") : nullptr;
    detail::adamStep(detail::stepBuffers(bank, {&m, &v, vmax}), coeffs.data());
  }
}

}  // namespace npuscope::optim
