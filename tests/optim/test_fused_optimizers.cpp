// The eight fused optimizers: parity with the plain references of optim_reference.h and with
// torch::optim (SGD, Adam, AdamW, RMSprop), fp32, 120 steps, two param groups with their own
// lr / weight decay and an lr schedule changing lr every step; fp16/bf16 models with fp32
// masters against the fp32 run; bit-exact resume through state_dict; found-inf steps that
// change nothing.
#include <torch/torch.h>

#include <functional>
#include <iostream>
#include <memory>

#include <gtest/gtest.h>

#include "npuscope/optim/optim.h"
#include "optim_reference.h"
#include "optim_test_util.h"

namespace npuscope::optim {
namespace {

using test::Grads;
using test::RefModel;

const auto* const kThreads = ::testing::AddGlobalTestEnvironment(new test::TwoThreadsEnvironment);

constexpr int kParitySteps = 120;
constexpr double kParityTolerance = 1e-6;  // max relative difference, fp32

// lr of step t (1-based): changes every step, like a scheduler would.
double scheduled(double base, int64_t t) { return base * (1.0 - 0.003 * static_cast<double>(t)); }

// How gradients relate to parameters, per tensor: random, or orthogonal to p row by row
// (AdamP's channel projection) or over the whole tensor (its layer projection).
enum class GradShape { kRandom, kChannelOrthogonal, kLayerOrthogonal };

GradShape adampShapeOf(size_t k, const std::vector<int64_t>& shape) {
  if (shape.size() < 2) return GradShape::kRandom;
  switch (k % 3) {
    case 0:
      return GradShape::kChannelOrthogonal;
    case 1:
      return GradShape::kLayerOrthogonal;
    default:
      return GradShape::kRandom;
  }
}

// Step t's gradients for the reference model's current parameters: noise plus a persistent
// component (so moments build up), optionally made orthogonal to p.
Grads makeGrads(const RefModel& model, int64_t t, bool adampShapes) {
  Grads grads;
  for (size_t k = 0; k < model.size(); ++k) {
    const auto& r = model[k];
    std::vector<float> g(r.p.size());
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = 0.1f * test::hashUniform(1000 + static_cast<uint64_t>(t), k, i, 3) + 0.05f * test::hashUniform(k, i, 5, 9);
    }
    const GradShape shape = adampShapes ? adampShapeOf(k, r.shape) : GradShape::kRandom;
    if (shape != GradShape::kRandom) {
      const size_t rows = shape == GradShape::kChannelOrthogonal ? static_cast<size_t>(r.shape[0]) : 1;
      const size_t len = g.size() / rows;
      for (size_t row = 0; row < rows; ++row) {
        double gp = 0.0, pp = 0.0;
        for (size_t j = row * len; j < (row + 1) * len; ++j) {
          gp += static_cast<double>(g[j]) * r.p[j];
          pp += static_cast<double>(r.p[j]) * r.p[j];
        }
        for (size_t j = row * len; j < (row + 1) * len; ++j) g[j] = static_cast<float>(g[j] - gp / pp * r.p[j]);
      }
    }
    grads.push_back(std::move(g));
  }
  return grads;
}

RefModel makeRefModel(const std::vector<std::vector<int64_t>>& shapes, at::ScalarType roundTo = at::kFloat) {
  RefModel model;
  for (size_t k = 0; k < shapes.size(); ++k) {
    test::RefTensor r;
    r.shape = shapes[k];
    r.p = test::toVector(test::makeTensor(shapes[k], 10 + k).to(roundTo));
    r.group = k % 2;
    model.push_back(std::move(r));
  }
  return model;
}

std::vector<at::Tensor> paramsFrom(const RefModel& model, at::ScalarType dtype = at::kFloat) {
  std::vector<at::Tensor> out;
  for (const auto& r : model) out.push_back(test::fromVector(r.p, r.shape).to(dtype).requires_grad_(true));
  return out;
}

void setGrads(const std::vector<at::Tensor>& params, const Grads& grads) {
  torch::NoGradGuard noGrad;
  for (size_t k = 0; k < params.size(); ++k) params[k].grad().copy_(test::fromVector(grads[k], params[k].sizes().vec()));
}

// Group 0 = even tensors with `o0`, group 1 = odd tensors with `o1`.
template <typename Options>
std::vector<ParamGroup<Options>> twoGroups(const std::vector<at::Tensor>& params, const Options& o0, const Options& o1) {
  std::vector<ParamGroup<Options>> groups(2);
  for (size_t k = 0; k < params.size(); ++k) groups[k % 2].params.push_back(params[k]);
  groups[0].options = o0;
  groups[1].options = o1;
  return groups;
}

template <typename Options>
Options secondGroup(Options o) {
  o.lr *= 0.5;
  o.weightDecay = o.weightDecay * 2.0 + 1e-3;
  return o;
}

// Steps the fused optimizer and the reference side by side and compares every parameter.
template <typename Optimizer, typename Options, typename RefStep>
void expectParity(const std::string& label, const Options& o0, RefStep refStep, bool adampShapes = false,
                  std::function<void(const Optimizer&, const test::ProjectionCounts&)> perStep = nullptr) {
  SCOPED_TRACE(label);
  const Options o1 = secondGroup(o0);
  RefModel ref = makeRefModel(test::parityShapes());
  std::vector<at::Tensor> params = paramsFrom(ref);
  Optimizer opt(twoGroups(params, o0, o1), o0);
  std::vector<Options> refGroups = {o0, o1};
  for (int64_t t = 1; t <= kParitySteps; ++t) {
    for (size_t g = 0; g < 2; ++g) {
      const double lr = scheduled(g == 0 ? o0.lr : o1.lr, t);
      opt.options(g).lr = lr;
      refGroups[g].lr = lr;
    }
    const Grads grads = makeGrads(ref, t, adampShapes);
    setGrads(params, grads);
    ASSERT_TRUE(opt.step());
    test::ProjectionCounts counts;
    refStep(ref, grads, t, refGroups, &counts);
    if (perStep) perStep(opt, counts);
  }
  EXPECT_EQ(opt.stepCount(), kParitySteps);
  double worst = 0.0;
  for (size_t k = 0; k < params.size(); ++k) {
    const double diff = test::maxRelDiff(params[k], test::fromVector(ref[k].p, ref[k].shape));
    EXPECT_LE(diff, kParityTolerance) << "tensor " << k;
    worst = std::max(worst, diff);
  }
  std::cout << "[ parity   ] " << opt.name() << " " << label << ": max rel diff " << worst
            << "\n";
}

// Adapts the references without projection counts to expectParity's signature.
template <typename Options, typename F>
auto ref(F f) {
  return [f](RefModel& m, const Grads& g, int64_t t, const std::vector<Options>& groups, test::ProjectionCounts*) {
    f(m, g, t, groups);
  };
}

TEST(FusedParity, NpuFusedSGD) {
  NpuFusedSGDOptions plain(0.05);
  plain.weightDecay = 1e-3;
  expectParity<NpuFusedSGD>("plain", plain, ref<NpuFusedSGDOptions>(test::refSgd));
  NpuFusedSGDOptions momentum(0.05);
  momentum.momentum = 0.9;
  momentum.dampening = 0.1;
  momentum.weightDecay = 1e-4;
  expectParity<NpuFusedSGD>("momentum+dampening", momentum, ref<NpuFusedSGDOptions>(test::refSgd));
  NpuFusedSGDOptions nesterov(0.05);
  nesterov.momentum = 0.9;
  nesterov.nesterov = true;
  expectParity<NpuFusedSGD>("nesterov", nesterov, ref<NpuFusedSGDOptions>(test::refSgd));
}

TEST(FusedParity, NpuFusedAdam) {
  auto step = [](RefModel& m, const Grads& g, int64_t t, const std::vector<NpuFusedAdamOptions>& o,
                 test::ProjectionCounts*) { test::refAdam(m, g, t, o, /*decoupled=*/false); };
  NpuFusedAdamOptions o;
  expectParity<NpuFusedAdam>("defaults", o, step);
  o.weightDecay = 1e-2;
  o.amsgrad = true;
  o.lr = 3e-3;
  expectParity<NpuFusedAdam>("amsgrad+wd", o, step);
}

TEST(FusedParity, NpuFusedAdamW) {
  auto step = [](RefModel& m, const Grads& g, int64_t t, const std::vector<NpuFusedAdamWOptions>& o,
                 test::ProjectionCounts*) { test::refAdam(m, g, t, o, /*decoupled=*/true); };
  NpuFusedAdamWOptions o;
  expectParity<NpuFusedAdamW>("defaults", o, step);
  o.amsgrad = true;
  o.weightDecay = 0.1;
  expectParity<NpuFusedAdamW>("amsgrad", o, step);
}

TEST(FusedParity, NpuFusedAdamPProjectsInBothViews) {
  // Gradients orthogonal to p per row and per tensor make the channel and the layer projection
  // fire on every step; the fused optimizer must take the same branch as the reference.
  auto check = [](const NpuFusedAdamP& opt, const test::ProjectionCounts& expected) {
    EXPECT_EQ(opt.lastProjections().channel, expected.channel);
    EXPECT_EQ(opt.lastProjections().layer, expected.layer);
    EXPECT_EQ(opt.lastProjections().none, expected.none);
    EXPECT_GT(expected.channel, 0);
    EXPECT_GT(expected.layer, 0);
  };
  NpuFusedAdamPOptions o;
  expectParity<NpuFusedAdamP>("defaults", o, test::refAdamP, /*adampShapes=*/true, check);
  o.weightDecay = 1e-2;
  o.nesterov = true;
  o.lr = 3e-3;
  expectParity<NpuFusedAdamP>("nesterov+wd", o, test::refAdamP, /*adampShapes=*/true, check);
  expectParity<NpuFusedAdamP>("random grads", o, test::refAdamP);
}

TEST(FusedParity, NpuFusedLamb) {
  const auto step = ref<NpuFusedLambOptions>(test::refLamb);
  NpuFusedLambOptions o;
  expectParity<NpuFusedLamb>("ascend defaults", o, step);
  o.weightDecay = 1e-2;
  o.useGlobalGradNorm = true;  // the global grad norm of these grads is ~30: scaling is active
  expectParity<NpuFusedLamb>("ascend wd+global grad norm", o, step);
  NpuFusedLambOptions adam;
  adam.adam = true;
  expectParity<NpuFusedLamb>("ascend adam (trust 1)", adam, step);
  NpuFusedLambOptions nv;
  nv.variant = LambVariant::kNvidia;
  nv.weightDecay = 1e-2;
  expectParity<NpuFusedLamb>("nvidia", nv, step);
  nv.adamWMode = false;
  nv.gradAveraging = false;
  nv.maxGradNorm = 0.0;
  expectParity<NpuFusedLamb>("nvidia l2, no averaging, no clipping", nv, step);
  NpuFusedLambOptions nvNoDecay;
  nvNoDecay.variant = LambVariant::kNvidia;
  nvNoDecay.biasCorrection = false;
  expectParity<NpuFusedLamb>("nvidia, group 0 without wd (trust 1), no bias correction", nvNoDecay, step);
}

TEST(FusedParity, NpuFusedAdadelta) {
  const auto step = ref<NpuFusedAdadeltaOptions>(test::refAdadelta);
  NpuFusedAdadeltaOptions o;
  expectParity<NpuFusedAdadelta>("defaults", o, step);
  o.weightDecay = 1e-2;
  o.rho = 0.95;
  expectParity<NpuFusedAdadelta>("wd", o, step);
}

TEST(FusedParity, NpuFusedRMSprop) {
  const auto step = ref<NpuFusedRMSpropOptions>(test::refRMSprop);
  NpuFusedRMSpropOptions o;
  o.lr = 1e-3;
  expectParity<NpuFusedRMSprop>("defaults", o, step);
  o.centered = true;
  o.momentum = 0.9;
  o.weightDecay = 1e-3;
  expectParity<NpuFusedRMSprop>("centered+momentum+wd", o, step);
}

TEST(FusedParity, NpuFusedRMSpropTF) {
  const auto step = ref<NpuFusedRMSpropTFOptions>(test::refRMSpropTF);
  NpuFusedRMSpropTFOptions o;
  o.lr = 1e-3;
  expectParity<NpuFusedRMSpropTF>("defaults (square_avg starts at 1)", o, step);
  o.initialSquareAvg = 0.0;
  o.eps = 1e-8;
  expectParity<NpuFusedRMSpropTF>("square_avg starts at 0", o, step);
  NpuFusedRMSpropTFOptions m;
  m.lr = 1e-3;
  m.momentum = 0.9;
  m.centered = true;
  m.weightDecay = 1e-3;
  expectParity<NpuFusedRMSpropTF>("centered+momentum, lr in momentum", m, step);
  m.lrInMomentum = false;
  m.decoupledDecay = true;
  expectParity<NpuFusedRMSpropTF>("momentum, decoupled decay", m, step);
  m.decoupledDecayScaledByLr = true;
  expectParity<NpuFusedRMSpropTF>("decoupled decay scaled by lr", m, step);
}

// The documented initial state: timm and torch_npu start the square average at 1.
TEST(FusedOptimizer, RMSpropTFSquareAverageStartsAtOne) {
  std::vector<at::Tensor> params = {torch::zeros({4}).requires_grad_(true)};
  NpuFusedRMSpropTF opt(params);
  params[0].grad().fill_(2.0f);
  opt.step();
  const StateDict sd = opt.stateDict();
  // s = 1 + (1 − α)(g² − 1) with α = 0.9, g = 2.
  EXPECT_FLOAT_EQ(sd.at("param.0.square_avg")[0].item<float>(), 1.0f + 0.1f * (4.0f - 1.0f));
}

// ---- torch::optim parity --------------------------------------------------------------------

template <typename TorchOptimizer, typename TorchOptions, typename Fused, typename FusedOptions>
void expectTorchParity(const std::string& label, TorchOptions torchOptions, FusedOptions fusedOptions) {
  SCOPED_TRACE(label);
  RefModel ref = makeRefModel(test::parityShapes());  // parameters and gradients only
  std::vector<at::Tensor> torchParams = paramsFrom(ref);
  std::vector<at::Tensor> fusedParams = paramsFrom(ref);
  TorchOptimizer torchOpt(torchParams, torchOptions);
  Fused fused(fusedParams, fusedOptions);
  for (int64_t t = 1; t <= kParitySteps; ++t) {
    const double lr = scheduled(fusedOptions.lr, t);
    static_cast<TorchOptions&>(torchOpt.param_groups()[0].options()).lr(lr);
    fused.setLr(lr);
    const Grads grads = makeGrads(ref, t, false);
    for (size_t k = 0; k < grads.size(); ++k) torchParams[k].mutable_grad() = test::fromVector(grads[k], ref[k].shape);
    setGrads(fusedParams, grads);
    torchOpt.step();
    fused.step();
  }
  double worst = 0.0;
  for (size_t k = 0; k < fusedParams.size(); ++k) {
    const double diff = test::maxRelDiff(fusedParams[k], torchParams[k]);
    EXPECT_LE(diff, kParityTolerance) << "tensor " << k;
    worst = std::max(worst, diff);
  }
  std::cout << "[ parity   ] " << fused.name() << " vs torch::optim " << label << ": max rel diff " << worst << "\n";
}

TEST(TorchParity, SGD) {
  NpuFusedSGDOptions f(0.05);
  f.momentum = 0.9;
  f.weightDecay = 1e-4;
  f.dampening = 0.1;
  expectTorchParity<torch::optim::SGD, torch::optim::SGDOptions, NpuFusedSGD>(
      "momentum", torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4).dampening(0.1), f);
  f.dampening = 0.0;
  f.nesterov = true;
  expectTorchParity<torch::optim::SGD, torch::optim::SGDOptions, NpuFusedSGD>(
      "nesterov", torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4).nesterov(true), f);
}

TEST(TorchParity, Adam) {
  NpuFusedAdamOptions f;
  expectTorchParity<torch::optim::Adam, torch::optim::AdamOptions, NpuFusedAdam>(
      "defaults", torch::optim::AdamOptions(1e-3), f);
  f.weightDecay = 1e-2;
  f.amsgrad = true;
  expectTorchParity<torch::optim::Adam, torch::optim::AdamOptions, NpuFusedAdam>(
      "amsgrad+wd", torch::optim::AdamOptions(1e-3).weight_decay(1e-2).amsgrad(true), f);
}

TEST(TorchParity, AdamW) {
  NpuFusedAdamWOptions f;
  expectTorchParity<torch::optim::AdamW, torch::optim::AdamWOptions, NpuFusedAdamW>(
      "defaults", torch::optim::AdamWOptions(1e-3).weight_decay(1e-2), f);
  f.amsgrad = true;
  expectTorchParity<torch::optim::AdamW, torch::optim::AdamWOptions, NpuFusedAdamW>(
      "amsgrad", torch::optim::AdamWOptions(1e-3).weight_decay(1e-2).amsgrad(true), f);
}

TEST(TorchParity, RMSprop) {
  NpuFusedRMSpropOptions f;
  f.lr = 1e-3;
  expectTorchParity<torch::optim::RMSprop, torch::optim::RMSpropOptions, NpuFusedRMSprop>(
      "defaults", torch::optim::RMSpropOptions(1e-3), f);
  f.centered = true;
  f.momentum = 0.9;
  f.weightDecay = 1e-3;
  expectTorchParity<torch::optim::RMSprop, torch::optim::RMSpropOptions, NpuFusedRMSprop>(
      "centered+momentum+wd", torch::optim::RMSpropOptions(1e-3).centered(true).momentum(0.9).weight_decay(1e-3), f);
}

// ---- every optimizer, type-erased, for the master-weight, resume and found-inf tests ----------

using Factory = std::function<std::unique_ptr<NpuFusedOptimizer>(const std::vector<at::Tensor>&, FusedOptimizerConfig)>;

struct Named {
  std::string name;
  Factory make;
};

// Each optimizer with options that create all of its state slots.
std::vector<Named> allOptimizers() {
  std::vector<Named> out;
  out.push_back({"NpuFusedSGD", [](const auto& p, auto c) {
                   NpuFusedSGDOptions o(0.05);
                   o.momentum = 0.9;
                   o.weightDecay = 1e-4;
                   return std::make_unique<NpuFusedSGD>(p, o, c);
                 }});
  out.push_back({"NpuFusedAdam", [](const auto& p, auto c) {
                   NpuFusedAdamOptions o;
                   o.amsgrad = true;
                   o.weightDecay = 1e-3;
                   return std::make_unique<NpuFusedAdam>(p, o, c);
                 }});
  out.push_back({"NpuFusedAdamW", [](const auto& p, auto c) { return std::make_unique<NpuFusedAdamW>(p, NpuFusedAdamWOptions{}, c); }});
  out.push_back({"NpuFusedAdamP", [](const auto& p, auto c) {
                   NpuFusedAdamPOptions o;
                   o.weightDecay = 1e-2;
                   return std::make_unique<NpuFusedAdamP>(p, o, c);
                 }});
  out.push_back({"NpuFusedLamb", [](const auto& p, auto c) {
                   NpuFusedLambOptions o;
                   o.weightDecay = 1e-2;
                   return std::make_unique<NpuFusedLamb>(p, o, c);
                 }});
  out.push_back({"NpuFusedAdadelta", [](const auto& p, auto c) { return std::make_unique<NpuFusedAdadelta>(p, NpuFusedAdadeltaOptions{}, c); }});
  out.push_back({"NpuFusedRMSprop", [](const auto& p, auto c) {
                   NpuFusedRMSpropOptions o;
                   o.lr = 1e-3;
                   o.centered = true;
                   o.momentum = 0.9;
                   return std::make_unique<NpuFusedRMSprop>(p, o, c);
                 }});
  out.push_back({"NpuFusedRMSpropTF", [](const auto& p, auto c) {
                   NpuFusedRMSpropTFOptions o;
                   o.lr = 1e-3;
                   o.centered = true;
                   o.momentum = 0.9;
                   return std::make_unique<NpuFusedRMSpropTF>(p, o, c);
                 }});
  return out;
}

// Gradients of step t rounded to `dtype` (so an fp16 model and an fp32 model see the same values).
Grads roundedGrads(const RefModel& model, int64_t t, at::ScalarType dtype) {
  Grads grads = makeGrads(model, t, false);
  for (size_t k = 0; k < grads.size(); ++k) {
    grads[k] = test::toVector(test::fromVector(grads[k], model[k].shape).to(dtype));
  }
  return grads;
}

void setGradsAs(const std::vector<at::Tensor>& params, const Grads& grads) {
  torch::NoGradGuard noGrad;
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].grad().copy_(test::fromVector(grads[k], params[k].sizes().vec()).to(params[k].scalar_type()));
  }
}

// Largest |low − ref| in units of half a low-precision ulp at ref: ≤ 1 means "ref rounded".
double worstRounding(const at::Tensor& low, const at::Tensor& reference, bool bf16) {
  const auto a = test::toVector(low);
  const auto b = test::toVector(reference);
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / test::halfUlp(b[i], bf16));
  }
  return worst;
}

// An fp16/bf16 model with fp32 masters against the same optimizer on an fp32 model fed the same
// (representable) values: masters track the fp32 run, and the model is that run rounded.
void expectMasterParity(const Named& opt, at::ScalarType low, int steps) {
  SCOPED_TRACE(opt.name + (low == at::kHalf ? " fp16" : " bf16"));
  const bool bf16 = low == at::kBFloat16;
  RefModel shapes = makeRefModel(test::parityShapes(), low);  // values representable in `low`
  std::vector<at::Tensor> fp32Params = paramsFrom(shapes);
  std::vector<at::Tensor> lowParams = paramsFrom(shapes, low);
  auto fp32 = opt.make(fp32Params, {});
  auto mixed = opt.make(lowParams, FusedOptimizerConfig{/*masterWeights=*/true});
  ASSERT_TRUE(mixed->hasMasterWeights());
  const std::vector<at::Tensor> masters = mixed->steppedParams();
  for (size_t k = 0; k < masters.size(); ++k) ASSERT_EQ(masters[k].scalar_type(), at::kFloat);
  for (int64_t t = 1; t <= steps; ++t) {
    const Grads grads = roundedGrads(shapes, t, low);
    setGradsAs(fp32Params, grads);
    setGradsAs(lowParams, grads);  // the model's fp16 grads; step() stages them into the masters
    fp32->step();
    mixed->step();
  }
  for (size_t k = 0; k < lowParams.size(); ++k) {
    EXPECT_LE(test::maxRelDiff(masters[k], fp32Params[k]), kParityTolerance) << "master " << k;
    EXPECT_LE(worstRounding(lowParams[k], fp32Params[k], bf16), 1.0 + 1e-6) << "model " << k;
  }
}

TEST(MasterWeights, HalfModelTracksTheFp32RunWithinRounding) {
  for (const auto& opt : allOptimizers()) expectMasterParity(opt, at::kHalf, 100);
}

TEST(MasterWeights, BFloat16ModelTracksTheFp32RunWithinRounding) {
  for (const auto& opt : allOptimizers()) expectMasterParity(opt, at::kBFloat16, 100);
}

// Control for the two tests above: without masters, an fp16 model loses the small Adam updates
// and drifts well beyond rounding, so those tests do detect a missing master path.
TEST(MasterWeights, WithoutMastersAnFp16ModelDrifts) {
  RefModel shapes = makeRefModel(test::parityShapes(), at::kHalf);
  std::vector<at::Tensor> fp32Params = paramsFrom(shapes);
  std::vector<at::Tensor> halfParams = paramsFrom(shapes, at::kHalf);
  NpuFusedAdam fp32(fp32Params);
  NpuFusedAdam half(halfParams);
  EXPECT_FALSE(half.hasMasterWeights());
  for (int64_t t = 1; t <= 100; ++t) {
    const Grads grads = roundedGrads(shapes, t, at::kHalf);
    setGradsAs(fp32Params, grads);
    setGradsAs(halfParams, grads);
    fp32.step();
    half.step();
  }
  double worst = 0.0;
  for (size_t k = 0; k < halfParams.size(); ++k) worst = std::max(worst, worstRounding(halfParams[k], fp32Params[k], false));
  EXPECT_GT(worst, 2.0);
}

// AMP's path: loss-scaled fp16 grads unscaled into the fp32 master grads, with overflow detection.
TEST(MasterWeights, UnscaleGradsStagesScaledHalfGradsIntoTheMasters) {
  RefModel shapes = makeRefModel(test::parityShapes(), at::kHalf);
  std::vector<at::Tensor> direct = paramsFrom(shapes, at::kHalf);
  std::vector<at::Tensor> scaled = paramsFrom(shapes, at::kHalf);
  NpuFusedAdam a(direct, {}, FusedOptimizerConfig{true});
  NpuFusedAdam b(scaled, {}, FusedOptimizerConfig{true});
  for (int64_t t = 1; t <= 5; ++t) {
    const Grads grads = roundedGrads(shapes, t, at::kHalf);
    setGradsAs(direct, grads);
    Grads times1024 = grads;
    for (auto& g : times1024) {
      for (float& v : g) v *= 1024.0f;  // exact in fp16 (power of two, no overflow at these sizes)
    }
    setGradsAs(scaled, times1024);
    at::Tensor foundInf = torch::zeros({1});
    b.unscaleGrads(1.0 / 1024, foundInf);
    EXPECT_EQ(foundInf.item<float>(), 0.0f);
    EXPECT_TRUE(b.step(foundInf));
    EXPECT_TRUE(a.step());
  }
  for (size_t k = 0; k < direct.size(); ++k) EXPECT_TRUE(test::bitEqual(direct[k], scaled[k])) << k;

  // An overflowing grad is flagged and the step skipped.
  scaled[2].grad()[0][0].fill_(std::numeric_limits<float>::infinity());
  at::Tensor foundInf = torch::zeros({1});
  b.unscaleGrads(1.0 / 1024, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 1.0f);
  EXPECT_FALSE(b.step(foundInf));
  for (size_t k = 0; k < direct.size(); ++k) EXPECT_TRUE(test::bitEqual(direct[k], scaled[k])) << k;
}

// ---- state_dict ----------------------------------------------------------------------------

// Through a pickle (the format torch::save writes) and back, to show the dict is serialisable.
StateDict pickleRoundTrip(const StateDict& sd) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [k, v] : sd) dict.insert(k, v);
  const std::vector<char> bytes = torch::pickle_save(dict);
  const auto back = torch::pickle_load(bytes).toGenericDict();
  StateDict out;
  for (const auto& entry : back) out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

void expectBitEqualDicts(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, value] : a) {
    ASSERT_TRUE(b.count(key)) << key;
    EXPECT_TRUE(test::bitEqual(value, b.at(key))) << key;
  }
}

void expectBitExactResume(const Named& opt, at::ScalarType dtype, bool masters) {
  SCOPED_TRACE(opt.name + (masters ? " fp16+masters" : " fp32"));
  RefModel shapes = makeRefModel(test::parityShapes(), dtype);
  std::vector<at::Tensor> paramsA = paramsFrom(shapes, dtype);
  const FusedOptimizerConfig config{masters};
  auto a = opt.make(paramsA, config);
  for (int64_t t = 1; t <= 25; ++t) {
    setGradsAs(paramsA, roundedGrads(shapes, t, dtype));
    a->step();
  }
  a->setLr(0, a->lr(0) * 0.5);  // a scheduler moved the lr: the checkpoint must carry it
  const StateDict saved = pickleRoundTrip(a->stateDict());

  std::vector<at::Tensor> paramsB = clones(paramsA);
  auto b = opt.make(paramsB, config);
  b->loadStateDict(saved);
  EXPECT_EQ(b->stepCount(), a->stepCount());
  EXPECT_EQ(b->lr(0), a->lr(0));
  expectBitEqualDicts(a->stateDict(), b->stateDict());

  for (int64_t t = 26; t <= 50; ++t) {
    const Grads grads = roundedGrads(shapes, t, dtype);
    setGradsAs(paramsA, grads);
    setGradsAs(paramsB, grads);
    a->step();
    b->step();
  }
  for (size_t k = 0; k < paramsA.size(); ++k) EXPECT_TRUE(test::bitEqual(paramsA[k], paramsB[k])) << "param " << k;
  expectBitEqualDicts(a->stateDict(), b->stateDict());
}

TEST(StateDict, RoundTripResumesBitExactly) {
  for (const auto& opt : allOptimizers()) {
    expectBitExactResume(opt, at::kFloat, false);
    expectBitExactResume(opt, at::kHalf, true);
  }
}

TEST(StateDict, LoadDropsSlotsTheCheckpointLacksAndRejectsMismatches) {
  std::vector<at::Tensor> params = {test::makeTensor({3, 4}, 1).requires_grad_(true)};
  NpuFusedAdam fresh(clones(params));
  const StateDict beforeAnyStep = fresh.stateDict();
  EXPECT_EQ(beforeAnyStep.count("param.0.exp_avg"), 0u);

  NpuFusedAdam a(params);
  a.step();
  EXPECT_EQ(a.stateDict().count("param.0.exp_avg"), 1u);
  a.loadStateDict(beforeAnyStep);
  EXPECT_EQ(a.stepCount(), 0);
  EXPECT_EQ(a.stateDict().count("param.0.exp_avg"), 0u);

  std::vector<at::Tensor> other = {test::makeTensor({4, 3}, 1).requires_grad_(true)};
  NpuFusedAdam b(other);
  b.step();
  StateDict wrongShape = b.stateDict();
  EXPECT_THROW(a.loadStateDict(wrongShape), c10::Error);
  NpuFusedSGD sgd(clones(params), NpuFusedSGDOptions(0.1));
  EXPECT_THROW(sgd.loadStateDict(a.stateDict()), c10::Error);  // no "group.0.momentum"
}

// ---- found-inf -----------------------------------------------------------------------------

void expectFoundInfIsANoOp(const Named& opt, at::ScalarType dtype, bool masters) {
  SCOPED_TRACE(opt.name + (masters ? " fp16+masters" : " fp32"));
  RefModel shapes = makeRefModel(test::parityShapes(), dtype);
  std::vector<at::Tensor> params = paramsFrom(shapes, dtype);
  auto o = opt.make(params, FusedOptimizerConfig{masters});
  for (int64_t t = 1; t <= 5; ++t) {
    setGradsAs(params, roundedGrads(shapes, t, dtype));
    o->step();
  }
  setGradsAs(params, roundedGrads(shapes, 6, dtype));
  const std::vector<at::Tensor> before = clones(params);
  const StateDict stateBefore = o->stateDict();

  EXPECT_FALSE(o->step(torch::ones({1})));
  EXPECT_EQ(o->stepCount(), 5);
  for (size_t k = 0; k < params.size(); ++k) EXPECT_TRUE(test::bitEqual(params[k], before[k])) << "param " << k;
  expectBitEqualDicts(o->stateDict(), stateBefore);

  // The same check notices a real step.
  EXPECT_TRUE(o->step(torch::zeros({1})));
  bool changed = false;
  for (size_t k = 0; k < params.size(); ++k) changed = changed || !test::bitEqual(params[k], before[k]);
  EXPECT_TRUE(changed);
}

TEST(FoundInf, SkippedStepChangesNothing) {
  for (const auto& opt : allOptimizers()) {
    expectFoundInfIsANoOp(opt, at::kFloat, false);
    expectFoundInfIsANoOp(opt, at::kHalf, true);
  }
}

// ---- misc ----------------------------------------------------------------------------------

TEST(FusedOptimizer, DefaultsAreTorchNpus) {
  EXPECT_EQ(NpuFusedAdamOptions{}.lr, 1e-3);
  EXPECT_EQ(NpuFusedAdamOptions{}.eps, 1e-8);
  EXPECT_EQ(NpuFusedAdamOptions{}.weightDecay, 0.0);
  EXPECT_EQ(NpuFusedAdamWOptions{}.weightDecay, 1e-2);
  EXPECT_EQ(NpuFusedAdamPOptions{}.delta, 0.1);
  EXPECT_EQ(NpuFusedAdamPOptions{}.wdRatio, 0.1);
  EXPECT_EQ(NpuFusedLambOptions{}.eps, 1e-6);
  EXPECT_EQ(NpuFusedLambOptions{}.variant, LambVariant::kAscend);
  EXPECT_EQ(NpuFusedAdadeltaOptions{}.lr, 1.0);
  EXPECT_EQ(NpuFusedAdadeltaOptions{}.rho, 0.9);
  EXPECT_EQ(NpuFusedAdadeltaOptions{}.eps, 1e-6);
  EXPECT_EQ(NpuFusedRMSpropOptions{}.alpha, 0.99);
  EXPECT_EQ(NpuFusedRMSpropTFOptions{}.alpha, 0.9);
  EXPECT_EQ(NpuFusedRMSpropTFOptions{}.eps, 1e-10);
  EXPECT_TRUE(NpuFusedRMSpropTFOptions{}.lrInMomentum);
  EXPECT_EQ(NpuFusedRMSpropTFOptions{}.initialSquareAvg, 1.0);
}

TEST(FusedOptimizer, RejectsInvalidOptions) {
  std::vector<at::Tensor> params = {torch::zeros({3}).requires_grad_(true)};
  NpuFusedSGDOptions nesterovWithoutMomentum(0.1);
  nesterovWithoutMomentum.nesterov = true;
  EXPECT_THROW(NpuFusedSGD(params, nesterovWithoutMomentum), c10::Error);
  NpuFusedAdamOptions badBeta;
  badBeta.beta2 = 1.0;
  EXPECT_THROW(NpuFusedAdam(clones(params), badBeta), c10::Error);
  EXPECT_THROW(NpuFusedAdam(std::vector<at::Tensor>{}), c10::Error);
  EXPECT_THROW(NpuFusedAdam(std::vector<at::Tensor>{params[0], params[0]}), c10::Error);
}

}  // namespace
}  // namespace npuscope::optim
