#include <algorithm>
#include <cmath>

#include "chunk_plan.h"
#include "npuscope/optim/fused_optimizers.h"
#include "npuscope/optim/multi_tensor.h"
#include "step_support.h"

namespace npuscope::optim {

void NpuFusedLambOptions::validate() const {
  TORCH_CHECK(lr >= 0.0, "NpuFusedLamb: invalid learning rate ", lr);
  TORCH_CHECK(beta1 >= 0.0 && beta1 < 1.0, "NpuFusedLamb: invalid beta1 ", beta1);
  TORCH_CHECK(beta2 >= 0.0 && beta2 < 1.0, "NpuFusedLamb: invalid beta2 ", beta2);
  TORCH_CHECK(eps >= 0.0, "NpuFusedLamb: invalid epsilon ", eps);
  TORCH_CHECK(weightDecay >= 0.0, "NpuFusedLamb: invalid weight_decay ", weightDecay);
  TORCH_CHECK(maxGradNorm >= 0.0, "NpuFusedLamb: invalid max_grad_norm ", maxGradNorm);
  TORCH_CHECK(variant == LambVariant::kAscend || variant == LambVariant::kNvidia, "NpuFusedLamb: unknown variant");
}

NpuFusedLamb::NpuFusedLamb(const std::vector<at::Tensor>& params, const NpuFusedLambOptions& options,
                           FusedOptimizerConfig config)
    : NpuFusedLamb(std::vector<ParamGroup<NpuFusedLambOptions>>{{params, options}}, options, config) {}

NpuFusedLamb::NpuFusedLamb(const std::vector<ParamGroup<NpuFusedLambOptions>>& groups,
                           const NpuFusedLambOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

void NpuFusedLamb::stepImpl(int64_t step) {
  // Both variants scale gradients by the norm of all gradients of the optimizer, padding excluded.
  bool needGlobalNorm = false;
  for (const auto& o : groups_) {
    needGlobalNorm = needGlobalNorm || (o.variant == LambVariant::kAscend ? o.useGlobalGradNorm : o.maxGradNorm > 0.0);
  }
  const double globalNorm = needGlobalNorm ? l2Norm(steppedGradBuffers()) : 0.0;
  lastGlobalGradNorm_ = globalNorm;

  std::vector<detail::LambCoeffs> coeffs;
  for (const auto& o : groups_) {
    detail::LambCoeffs c{};
    c.beta1 = detail::f32(o.beta1);
    c.beta2 = detail::f32(o.beta2);
    c.oneMinusBeta2 = detail::f32(1.0 - o.beta2);
    c.eps = detail::f32(o.eps);
    c.negLr = detail::f32(-o.lr);
    if (o.variant == LambVariant::kAscend) {
      c.gradDivisor = o.useGlobalGradNorm && globalNorm > 1.0 ? detail::f32(globalNorm) : 1.0f;
      c.l2 = 0.0f;
      c.beta3 = detail::f32(1.0 - o.beta1);
      c.biasCorrection1 = 1.0f;
      c.biasCorrection2 = 1.0f;
      c.decoupled = detail::f32(o.weightDecay);
      c.trust = !o.adam;
    } else {
      c.gradDivisor = o.maxGradNorm > 0.0 && globalNorm > o.maxGradNorm ? detail::f32(globalNorm / o.maxGradNorm) : 1.0f;
      c.l2 = o.adamWMode ? 0.0f : detail::f32(o.weightDecay);
      c.beta3 = o.gradAveraging ? detail::f32(1.0 - o.beta1) : 1.0f;
      c.biasCorrection1 = o.biasCorrection ? detail::f32(1.0 - std::pow(o.beta1, static_cast<double>(step))) : 1.0f;
      c.biasCorrection2 = o.biasCorrection ? detail::f32(1.0 - std::pow(o.beta2, static_cast<double>(step))) : 1.0f;
      c.decoupled = o.adamWMode ? detail::f32(o.weightDecay) : 0.0f;
      c.trust = o.weightDecay != 0.0 || o.useNvLamb;
    }
    coeffs.push_back(c);
  }

  for (auto& bank : mutableBanks()) {
    const CombinedTensor& m = stateSlot(bank, "exp_avg");
    const CombinedTensor& v = stateSlot(bank, "exp_avg_sq");
    const detail::StepBuffers buffers = detail::stepBuffers(bank, {&m, &v});
    const detail::ChunkPlan& plan = *buffers.plan;
    std::vector<double> partials(2 * static_cast<size_t>(plan.numStats()), 0.0);
    detail::lambMomentsPass(buffers, coeffs.data(), partials.data());

    bool anyTrust = false;
    for (int32_t g : bank.tensorGroup) anyTrust = anyTrust || coeffs[static_cast<size_t>(g)].trust;
    if (!anyTrust) continue;
    std::vector<double> rows(2 * static_cast<size_t>(plan.numRows()), 0.0);
    detail::reduceRows(plan, partials.data(), 2, rows.data());
    std::vector<float> trust(bank.tensorGroup.size(), 1.0f);
    for (size_t t = 0; t < trust.size(); ++t) {
      const auto& o = groups_[static_cast<size_t>(bank.tensorGroup[t])];
      const auto row = static_cast<size_t>(plan.tensorFirstRow[t]);  // one row per tensor
      const double paramNorm = std::sqrt(rows[2 * row]);
      const double updateNorm = std::sqrt(rows[2 * row + 1]);
      if (o.variant == LambVariant::kAscend) {
        const double weightNorm = std::clamp(paramNorm, 0.0, 10.0);
        trust[t] = weightNorm == 0.0 || updateNorm == 0.0 ? 1.0f : detail::f32(weightNorm / updateNorm);
      } else {
        trust[t] = paramNorm != 0.0 && updateNorm != 0.0 ? detail::f32(paramNorm / updateNorm) : 1.0f;
      }
    }
    detail::lambUpdatePass(buffers, coeffs.data(), trust.data());
  }
}

}  // namespace npuscope::optim
