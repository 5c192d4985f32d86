// GradScaler with torch.amp semantics over the fused optimizers, and its misuse errors.
#include "amp_test_util.h"

namespace npuscope::amp {
namespace {

using namespace test;

struct ScalerRig {
  std::vector<Batch> data = makeData(1, 8, {16}, 4);
  Mlp model{nullptr};
  std::shared_ptr<optim::NpuFusedOptimizer> opt;
  explicit ScalerRig(bool fp16Masters = true, bool fp16 = true) {
    torch::manual_seed(1);  // same weights in every rig, whatever ran before
    model = Mlp();
    model->to(npu0());
    if (fp16) model->to(at::kHalf);
    optim::FusedOptimizerConfig c;
    c.masterWeights = fp16Masters;
    opt = makeSgd(model->parameters(), c, 0.1);
  }
  at::Tensor loss(double mult = 1.0) {
    at::Tensor x = data[0].x.to(model->fc1->weight.scalar_type());
    at::Tensor l = torch::nn::functional::cross_entropy(model->forward(x).to(at::kFloat), data[0].y);
    return l * torch::scalar_tensor(mult, l.options());
  }
};

TEST(GradScaler, GrowthAfterIntervalAndBackoffOnInf) {
  ScalerRig s;
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 2;
  GradScaler scaler(o);
  auto iteration = [&](double mult) {
    s.opt->zeroGrad();
    scaler.scale(s.loss(mult)).backward();
    const bool stepped = scaler.step(*s.opt);
    scaler.update();
    return stepped;
  };
  EXPECT_TRUE(iteration(1));
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  EXPECT_TRUE(iteration(1));
  EXPECT_EQ(scaler.get_scale(), 2048.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  const auto before = snapshot(*s.model);
  const int64_t steps = s.opt->stepCount();
  EXPECT_FALSE(iteration(1e8));  // overflow: skipped, backoff, tracker reset
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(s.opt->stepCount(), steps);
  for (const auto& [k, v] : snapshot(*s.model)) EXPECT_TRUE(bitEqual(v, before.at(k))) << k;
  scaler.update(4.0);
  EXPECT_THROW(scaler.update(), c10::Error);  // nothing recorded since the last update
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

TEST(GradScaler, UnscaledGradsEqualUnscaledBackward) {
  ScalerRig ref(false, false), s(false, false);
  ref.opt->zeroGrad();
  ref.loss().backward();
  GradScaler scaler;
  s.opt->zeroGrad();
  scaler.scale(s.loss()).backward();
  scaler.unscale_(*s.opt);
  for (size_t i = 0; i < s.opt->params().size(); ++i) {
    EXPECT_TRUE(at::allclose(s.opt->params()[i].grad().cpu(), ref.opt->params()[i].grad().cpu(), 1e-5, 1e-7)) << i;
  }
}

TEST(GradScaler, MisuseIsAnError) {
  {
    ScalerRig s;
    GradScaler scaler;
    s.loss().backward();
    expectError([&] { scaler.step(*s.opt); }, {"step() before scale()"});
  }
  {
    ScalerRig s;
    GradScaler scaler;
    scaler.scale(s.loss()).backward();
    scaler.unscale_(*s.opt);
    expectError([&] { scaler.unscale_(*s.opt); }, {"unscale_() has already been called", "update()"});
    scaler.step(*s.opt);
    expectError([&] { scaler.unscale_(*s.opt); }, {"after step()"});
    expectError([&] { scaler.step(*s.opt); }, {"step() has already been called"});
    scaler.update();
    // After update() the cycle starts again.
    scaler.scale(s.loss()).backward();
    scaler.unscale_(*s.opt);
    scaler.step(*s.opt);
    scaler.update();
  }
  {
    ScalerRig s(/*fp16Masters=*/false);  // fp16 model stepped without fp32 masters
    GradScaler scaler;
    scaler.scale(s.loss()).backward();
    expectError([&] { scaler.unscale_(*s.opt); }, {"FP16", "master"});
  }
  {
    GradScalerOptions bad;
    bad.growth_interval = 0;
    expectError([&] { GradScaler g(bad); }, {"growth_interval"});
  }
}

TEST(GradScaler, StateDictRoundTripAndDisabled) {
  GradScalerOptions o;
  o.init_scale = 256;
  o.growth_interval = 5;
  GradScaler a(o);
  ScalerRig s;
  a.scale(s.loss()).backward();
  a.step(*s.opt);
  a.update();
  const auto d = a.state_dict();
  EXPECT_EQ(d.at("scale").item<double>(), 256.0);
  EXPECT_EQ(d.at("_growth_tracker").item<int64_t>(), 1);
  EXPECT_EQ(d.at("growth_interval").item<int64_t>(), 5);
  GradScaler b;
  b.load_state_dict(d);
  EXPECT_EQ(b.get_scale(), 256.0);
  EXPECT_EQ(b.growth_tracker(), 1);
  EXPECT_EQ(b.get_growth_interval(), 5);
  auto broken = d;
  broken.erase("_growth_tracker");
  expectError([&] { b.load_state_dict(broken); }, {"_growth_tracker"});

  GradScalerOptions off;
  off.enabled = false;
  GradScaler c(off);
  at::Tensor l = s.loss();
  EXPECT_TRUE(bitEqual(c.scale(l), l));
  EXPECT_EQ(c.get_scale(), 1.0);
  EXPECT_TRUE(c.state_dict().empty());
}

}  // namespace
}  // namespace npuscope::amp
