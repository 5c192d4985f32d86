#include <algorithm>
#include <cmath>

#include "chunk_plan.h"
#include "npuscope/optim/fused_optimizers.h"
#include "step_support.h"

namespace npuscope::optim {

void NpuFusedAdamPOptions::validate() const {
  TORCH_CHECK(lr >= 0.0, "NpuFusedAdamP: invalid learning rate ", lr);
  TORCH_CHECK(beta1 >= 0.0 && beta1 < 1.0, "NpuFusedAdamP: invalid beta1 ", beta1);
  TORCH_CHECK(beta2 >= 0.0 && beta2 < 1.0, "NpuFusedAdamP: invalid beta2 ", beta2);
  TORCH_CHECK(eps >= 0.0, "NpuFusedAdamP: invalid epsilon ", eps);
  TORCH_CHECK(weightDecay >= 0.0, "NpuFusedAdamP: invalid weight_decay ", weightDecay);
}

NpuFusedAdamP::NpuFusedAdamP(const std::vector<at::Tensor>& params, const NpuFusedAdamPOptions& options,
                             FusedOptimizerConfig config)
    : NpuFusedAdamP(std::vector<ParamGroup<NpuFusedAdamPOptions>>{{params, options}}, options, config) {}

NpuFusedAdamP::NpuFusedAdamP(const std::vector<ParamGroup<NpuFusedAdamPOptions>>& groups,
                             const NpuFusedAdamPOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

namespace {

// Rows of the channel view: the first dimension for tensors of two or more dimensions; other
// tensors are never projected and form one row.
std::shared_ptr<const detail::ChunkPlan> channelPlan(const CombinedLayout& layout) {
  std::vector<int64_t> rowLens;
  for (size_t t = 0; t < layout.size(); ++t) {
    const auto& shape = layout.shape(t);
    const int64_t n = layout.numel(t);
    rowLens.push_back(shape.size() > 1 && n > 0 ? n / shape[0] : n);
  }
  return std::make_shared<detail::ChunkPlan>(detail::buildChunkPlan(layout.offsets(), layout.numels(), rowLens));
}

// timm / torch_npu: |x·y| / (‖x‖+ε) / (‖y‖+ε).
double cosine(double gp, double gg, double pp, double eps) {
  return std::abs(gp) / (std::sqrt(gg) + eps) / (std::sqrt(pp) + eps);
}

// p̂·Σ(p̂·perturb) per element is p·coef with coef = Σp·perturb / (‖p‖+ε)².
float projectionCoef(double pq, double pp, double eps) {
  const double n = std::sqrt(pp) + eps;
  return detail::f32(pq / (n * n));
}

}  // namespace

void NpuFusedAdamP::stepImpl(int64_t step) {
  std::vector<detail::AdamPCoeffs> coeffs;
  for (const auto& o : groups_) {
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
    detail::AdamPCoeffs c{};
    c.beta1 = detail::f32(o.beta1);
    c.oneMinusBeta1 = detail::f32(1.0 - o.beta1);
    c.beta2 = detail::f32(o.beta2);
    c.oneMinusBeta2 = detail::f32(1.0 - o.beta2);
    c.sqrtBiasCorrection2 = detail::f32(std::sqrt(bc2));
    c.eps = detail::f32(o.eps);
    c.negStepSize = detail::f32(-(o.lr / bc1));
    c.nesterov = o.nesterov;
    coeffs.push_back(c);
  }
  // torch_npu: p.mul_(1 − lr·wd·ratio) with lr·wd a Python float and ratio a float32 tensor.
  auto decayOf = [this](size_t group, double ratio) {
    const auto& o = groups_[group];
    if (!(o.weightDecay > 0.0)) return 1.0f;
    return 1.0f - detail::f32(o.lr * o.weightDecay) * detail::f32(ratio);
  };

  projections_ = {};
  auto& banks = mutableBanks();
  channelPlans_.resize(banks.size());
  for (size_t b = 0; b < banks.size(); ++b) {
    ParamBank& bank = banks[b];
    if (!channelPlans_[b]) channelPlans_[b] = channelPlan(bank.stepped().layout());
    const detail::ChunkPlan& rows = *channelPlans_[b];
    const CombinedLayout& layout = bank.stepped().layout();
    const CombinedTensor& m = stateSlot(bank, "exp_avg");
    const CombinedTensor& v = stateSlot(bank, "exp_avg_sq");
    const detail::StepBuffers buffers = detail::stepBuffers(bank, {&m, &v});

    const size_t nTensors = layout.size();
    std::vector<uint8_t> needsStats(nTensors, 0);
    std::vector<float> decay(nTensors, 1.0f);
    for (size_t t = 0; t < nTensors; ++t) {
      needsStats[t] = layout.shape(t).size() > 1 && layout.numel(t) > 0 ? 1 : 0;
      if (!needsStats[t]) {
        decay[t] = decayOf(static_cast<size_t>(bank.tensorGroup[t]), 1.0);
        ++projections_.none;
      }
    }
    std::vector<double> partials(4 * static_cast<size_t>(rows.numStats()), 0.0);
    detail::adampMomentsPass(buffers, rows, coeffs.data(), needsStats.data(), decay.data(), partials.data());

    std::vector<double> rowSums(4 * static_cast<size_t>(rows.numRows()), 0.0);
    detail::reduceRows(rows, partials.data(), 4, rowSums.data());
    std::vector<float> rowCoef(static_cast<size_t>(rows.numRows()), 0.0f);
    for (size_t t = 0; t < nTensors; ++t) {
      if (!needsStats[t]) continue;
      const auto group = static_cast<size_t>(bank.tensorGroup[t]);
      const auto& o = groups_[group];
      const auto r0 = static_cast<size_t>(rows.tensorFirstRow[t]);
      const auto r1 = static_cast<size_t>(rows.tensorFirstRow[t + 1]);
      const double rowLen = static_cast<double>(layout.numel(t) / layout.shape(t)[0]);
      // Channel view first.
      double maxCos = 0.0;
      double sums[4] = {0.0, 0.0, 0.0, 0.0};
      for (size_t r = r0; r < r1; ++r) {
        const double* s = &rowSums[4 * r];
        maxCos = std::max(maxCos, cosine(s[0], s[1], s[2], o.eps));
        for (int j = 0; j < 4; ++j) sums[j] += s[j];
      }
      if (maxCos < o.delta / std::sqrt(rowLen)) {
        for (size_t r = r0; r < r1; ++r) rowCoef[r] = projectionCoef(rowSums[4 * r + 3], rowSums[4 * r + 2], o.eps);
        decay[t] = decayOf(group, o.wdRatio);
        ++projections_.channel;
        continue;
      }
      // Then the layer view (the whole tensor as one row).
      if (cosine(sums[0], sums[1], sums[2], o.eps) < o.delta / std::sqrt(static_cast<double>(layout.numel(t)))) {
        const float coef = projectionCoef(sums[3], sums[2], o.eps);
        for (size_t r = r0; r < r1; ++r) rowCoef[r] = coef;
        decay[t] = decayOf(group, o.wdRatio);
        ++projections_.layer;
        continue;
      }
      decay[t] = decayOf(group, 1.0);
      ++projections_.none;
    }
    detail::adampUpdatePass(buffers, rows, coeffs.data(), needsStats.data(), decay.data(), rowCoef.data());
  }
}

}  // namespace npuscope::optim
