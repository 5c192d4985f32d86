#include "npuscope/optim/fused_optimizers.h"
#include "step_support.h"

namespace npuscope::optim {

void NpuFusedAdadeltaOptions::validate() const {
  TORCH_CHECK(lr >= 0.0, "NpuFusedAdadelta: invalid learning rate ", lr);
  TORCH_CHECK(rho >= 0.0 && rho <= 1.0, "NpuFusedAdadelta: invalid rho ", rho);
  TORCH_CHECK(eps >= 0.0, "NpuFusedAdadelta: invalid epsilon ", eps);
  TORCH_CHECK(weightDecay >= 0.0, "NpuFusedAdadelta: invalid weight_decay ", weightDecay);
}

NpuFusedAdadelta::NpuFusedAdadelta(const std::vector<at::Tensor>& params, const NpuFusedAdadeltaOptions& options,
                                   FusedOptimizerConfig config)
    : NpuFusedAdadelta(std::vector<ParamGroup<NpuFusedAdadeltaOptions>>{{params, options}}, options, config) {}

NpuFusedAdadelta::NpuFusedAdadelta(const std::vector<ParamGroup<NpuFusedAdadeltaOptions>>& groups,
                                   const NpuFusedAdadeltaOptions& defaults, FusedOptimizerConfig config)
    : FusedOptimizerWithOptions(groups, defaults, config) {}

void NpuFusedAdadelta::stepImpl(int64_t /*step*/) {
  std::vector<detail::AdadeltaCoeffs> coeffs;
  for (const auto& o : groups_) {
    coeffs.push_back(detail::AdadeltaCoeffs{detail::f32(-o.lr), detail::f32(o.weightDecay), detail::f32(o.rho),
                                            detail::f32(1.0 - o.rho), detail::f32(o.eps)});
  }
  for (auto& bank : mutableBanks()) {
    const CombinedTensor& squareAvg = stateSlot(bank, "square_avg");
    const CombinedTensor& accDelta = stateSlot(bank, "acc_delta");
    detail::adadeltaStep(detail::stepBuffers(bank, {&squareAvg, &accDelta}), coeffs.data());
  }
}

}  // namespace npuscope::optim
