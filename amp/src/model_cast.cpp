#include "model_cast.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>

#include "npuscope/optim/fused_optimizers.h"

namespace npuscope::amp::detail {
namespace {

template <class Impl>
bool affineBn(const torch::nn::Module& m) {
  const auto* bn = dynamic_cast<const Impl*>(&m);
  return bn != nullptr && bn->options.affine();
}

bool castable(const at::Tensor& t, at::ScalarType dtype) {
  return t.defined() && at::isFloatingType(t.scalar_type()) && t.scalar_type() != dtype;
}

template <class F>
void forEachCastable(torch::nn::Module& model, at::ScalarType dtype, bool keepBn, F&& f) {
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (keepBn && isAffineBatchNorm(*m)) continue;
    for (auto& p : m->named_parameters(/*recurse=*/false)) {
      if (castable(p.value(), dtype)) f(p.value());
    }
    for (auto& b : m->named_buffers(/*recurse=*/false)) {
      if (castable(b.value(), dtype)) f(b.value());
    }
  }
}

template <class T>
std::shared_ptr<optim::NpuFusedOptimizer> rebuildAs(const optim::NpuFusedOptimizer& old,
                                                    const std::vector<std::vector<at::Tensor>>& groups,
                                                    const optim::FusedOptimizerConfig& config) {
  const auto* typed = dynamic_cast<const T*>(&old);
  if (typed == nullptr) return nullptr;
  using Options = std::decay_t<decltype(typed->options(0))>;
  std::vector<optim::ParamGroup<Options>> pg;
  for (size_t g = 0; g < groups.size(); ++g) pg.push_back({groups[g], typed->options(g)});
  return std::make_shared<T>(pg, typed->options(0), config);
}

}  // namespace

bool isAffineBatchNorm(const torch::nn::Module& m) {
  return affineBn<torch::nn::BatchNorm1dImpl>(m) || affineBn<torch::nn::BatchNorm2dImpl>(m) ||
         affineBn<torch::nn::BatchNorm3dImpl>(m);
}

bool needsCast(torch::nn::Module& model, at::ScalarType dtype, bool keepBatchnormFp32) {
  bool any = false;
  forEachCastable(model, dtype, keepBatchnormFp32, [&](at::Tensor&) { any = true; });
  return any;
}

void castModel(torch::nn::Module& model, at::ScalarType dtype, bool keepBatchnormFp32) {
  at::NoGradGuard noGrad;
  forEachCastable(model, dtype, keepBatchnormFp32, [&](at::Tensor& t) {
    t.set_data(t.to(dtype));
    if (t.grad().defined()) t.mutable_grad() = at::Tensor();  // a grad of the old dtype would not fit
  });
}

std::shared_ptr<optim::NpuFusedOptimizer> rebuildOptimizer(const optim::NpuFusedOptimizer& old,
                                                           const optim::FusedOptimizerConfig& config) {
  TORCH_CHECK(old.stepCount() == 0, "amp::initialize: ", old.name(), " has already taken ", old.stepCount(),
              " step(s); initialize amp before the first optimizer step");
  std::vector<int32_t> groupOf(old.params().size(), 0);
  for (const auto& bank : old.banks()) {
    for (size_t i = 0; i < bank.paramIndices.size(); ++i) groupOf[bank.paramIndices[i]] = bank.tensorGroup[i];
  }
  std::vector<std::vector<at::Tensor>> groups(old.numGroups());
  for (size_t i = 0; i < old.params().size(); ++i) groups.at(groupOf[i]).push_back(old.params()[i]);

  std::shared_ptr<optim::NpuFusedOptimizer> out;
  if (!out) out = rebuildAs<optim::NpuFusedSGD>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedAdam>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedAdamW>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedAdamP>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedLamb>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedAdadelta>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedRMSprop>(old, groups, config);
  if (!out) out = rebuildAs<optim::NpuFusedRMSpropTF>(old, groups, config);
  TORCH_CHECK(out != nullptr, "amp::initialize: cannot rebuild optimizer ", old.name(),
              " over the cast parameters; pass an OptimizerFactory instead");
  return out;
}

}  // namespace npuscope::amp::detail
