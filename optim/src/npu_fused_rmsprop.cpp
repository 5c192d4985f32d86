// NpuFusedRMSprop (torch semantics) and NpuFusedRMSpropTF (TensorFlow / timm semantics).
#include <ATen/core/grad_mode.h>

#include "npuscope/optim/fused_optimizers.h"
#include "step_support.h"

namespace npuscope::optim {
namespace {

template <typename Options>
void validateRMSprop(const Options& o, const char* name) {
  TORCH_CHECK(o.lr >= 0.0, name, ": invalid learning rate ", o.lr);
  TORCH_CHECK(o.eps >= 0.0, name, ": invalid epsilon ", o.eps);
  TORCH_CHECK(o.momentum >= 0.0, name, ": invalid momentum ", o.momentum);
  TORCH_CHECK(o.weightDecay >= 0.0, name, ": invalid weight_decay ", o.weightDecay);
  TORCH_CHECK(o.alpha >= 0.0, name, ": invalid alpha ", o.alpha);
}

}  // namespace

void NpuFusedRMSpropOptions::validate() const { validateRMSprop(*this, "NpuFusedRMSprop"); }
void NpuFusedRMSpropTFOptions::validate() const { validateRMSprop(*this, "NpuFusedRMSpropTF"); }

NpuFusedRMSprop::NpuFusedRMSprop(const std::vector<at::Tensor>& params, const NpuFusedRMSpropOptions& options,
                                 FusedOptimizerConfig config)
    : NpuFusedRMSprop(std::vector<ParamGroup<NpuFusedRMSpropOptions>>{{params, options}}, options, config) {}

NpuFusedRMSprop::NpuFusedRMSprop(const std::vector<ParamGroup<NpuFusedRMSpropOptions>>& groups,
                                 const NpuFusedRMSpropOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

void NpuFusedRMSprop::stepImpl(int64_t /*step*/) {
  std::vector<detail::RMSpropCoeffs> coeffs;
  bool anyMomentum = false;
  bool anyCentered = false;
  for (const auto& o : groups_) {
    detail::RMSpropCoeffs c{};
    c.negLr = detail::f32(-o.lr);
    c.weightDecay = detail::f32(o.weightDecay);
    c.alpha = detail::f32(o.alpha);
    c.oneMinusAlpha = detail::f32(1.0 - o.alpha);
    c.eps = detail::f32(o.eps);
    c.momentum = detail::f32(o.momentum);
    c.centered = o.centered;
    c.hasMomentum = o.momentum > 0.0;
    coeffs.push_back(c);
    anyMomentum = anyMomentum || c.hasMomentum;
    anyCentered = anyCentered || c.centered;
  }
  for (auto& bank : mutableBanks()) {
    const CombinedTensor& squareAvg = stateSlot(bank, "square_avg");
    const CombinedTensor* buffer = anyMomentum ? &stateSlot(bank, "momentum_buffer") : nullptr;
    const CombinedTensor* gradAvg = anyCentered ? &stateSlot(bank, "grad_avg") : nullptr;
    detail::rmspropStep(detail::stepBuffers(bank, {&squareAvg, buffer, gradAvg}), coeffs.data());
  }
}

NpuFusedRMSpropTF::NpuFusedRMSpropTF(const std::vector<at::Tensor>& params, const NpuFusedRMSpropTFOptions& options,
                                     FusedOptimizerConfig config)
    : NpuFusedRMSpropTF(std::vector<ParamGroup<NpuFusedRMSpropTFOptions>>{{params, options}}, options, config) {}

NpuFusedRMSpropTF::NpuFusedRMSpropTF(const std::vector<ParamGroup<NpuFusedRMSpropTFOptions>>& groups,
                                     const NpuFusedRMSpropTFOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

void NpuFusedRMSpropTF::stepImpl(int64_t /*step*/) {
  std::vector<detail::RMSpropTFCoeffs> coeffs;
  bool anyMomentum = false;
  bool anyCentered = false;
  for (const auto& o : groups_) {
    detail::RMSpropTFCoeffs c{};
    c.lr = detail::f32(o.lr);
    c.negLr = detail::f32(-o.lr);
    const bool decay = o.weightDecay != 0.0;
    c.l2 = decay && !o.decoupledDecay ? detail::f32(o.weightDecay) : 0.0f;
    c.negDecoupled =
        decay && o.decoupledDecay ? detail::f32(-(o.decoupledDecayScaledByLr ? o.lr * o.weightDecay : o.weightDecay))
                                  : 0.0f;
    c.oneMinusAlpha = detail::f32(1.0 - o.alpha);
    c.eps = detail::f32(o.eps);
    c.momentum = detail::f32(o.momentum);
    c.centered = o.centered;
    c.hasMomentum = o.momentum > 0.0;
    c.lrInMomentum = o.lrInMomentum;
    coeffs.push_back(c);
    anyMomentum = anyMomentum || c.hasMomentum;
    anyCentered = anyCentered || c.centered;
  }
  for (auto& bank : mutableBanks()) {
    bool created = false;
    const CombinedTensor& squareAvg = stateSlot(bank, "square_avg", 0.0, &created);
    if (created) {
      // Each group's own starting value (1 by default, see the options); padding stays zero.
      at::NoGradGuard noGrad;
      for (size_t i = 0; i < squareAvg.size(); ++i) {
        const double init = groups_[static_cast<size_t>(bank.tensorGroup[i])].initialSquareAvg;
        if (init != 0.0) squareAvg.view(i).fill_(init);
      }
    }
    const CombinedTensor* buffer = anyMomentum ? &stateSlot(bank, "momentum_buffer") : nullptr;
    const CombinedTensor* gradAvg = anyCentered ? &stateSlot(bank, "grad_avg") : nullptr;
    detail::rmspropTFStep(detail::stepBuffers(bank, {&squareAvg, buffer, gradAvg}), coeffs.data());
  }
}

}  // namespace npuscope::optim
