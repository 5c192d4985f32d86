#include "npuscope/optim/fused_optimizers.h"
#include "step_support.h"

namespace npuscope::optim {

void NpuFusedSGDOptions::validate() const {
  TORCH_CHECK(lr >= 0.0, "NpuFusedSGD: invalid learning rate ", lr);
  TORCH_CHECK(momentum >= 0.0, "NpuFusedSGD: invalid momentum ", momentum);
  TORCH_CHECK(weightDecay >= 0.0, "NpuFusedSGD: invalid weight_decay ", weightDecay);
  TORCH_CHECK(!nesterov || (momentum > 0.0 && dampening == 0.0),
              "NpuFusedSGD: Nesterov momentum requires a momentum and zero dampening");
}

NpuFusedSGD::NpuFusedSGD(const std::vector<at::Tensor>& params, const NpuFusedSGDOptions& options,
                         FusedOptimizerConfig config)
    : NpuFusedSGD(std::vector<ParamGroup<NpuFusedSGDOptions>>{{params, options}}, options, config) {}

NpuFusedSGD::NpuFusedSGD(const std::vector<ParamGroup<NpuFusedSGDOptions>>& groups,
                         const NpuFusedSGDOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

void NpuFusedSGD::stepImpl(int64_t /*step*/) {
  std::vector<detail::SgdCoeffs> coeffs;
  bool anyMomentum = false;
  for (const auto& o : groups_) {
    detail::SgdCoeffs c{};
    c.negLr = detail::f32(-o.lr);
    c.weightDecay = detail::f32(o.weightDecay);
    c.momentum = detail::f32(o.momentum);
    c.oneMinusDampening = detail::f32(1.0 - o.dampening);
    c.hasMomentum = o.momentum != 0.0;
    c.nesterov = o.nesterov;
    coeffs.push_back(c);
    anyMomentum = anyMomentum || c.hasMomentum;
  }
  for (auto& bank : mutableBanks()) {
    // torch keeps no buffer until the first step with momentum, which then copies the gradient
    // in: a freshly created buffer means "initialise".
    bool created = false;
    const CombinedTensor* buffer = anyMomentum ? &stateSlot(bank, "momentum_buffer", 0.0, &created) : nullptr;
    for (auto& c : coeffs) c.initBuffer = created;
    detail::sgdStep(detail::stepBuffers(bank, {buffer}), coeffs.data());
  }
}

}  // namespace npuscope::optim
