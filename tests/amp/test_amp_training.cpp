// initialize / scale_loss / step on the npu: O2's casts and master weights, skipped steps,
// saturation-mode overflow, combine_grad padding, multiple losses, reporting, exact resume and
// short training runs where O1 and O2 track O0.
#include <cstdio>
#include <unistd.h>

#include "amp_test_util.h"

namespace npuscope::amp {
namespace {

using namespace test;

struct AmpTest : ::testing::Test {
  void SetUp() override { npu::set_overflow_mode(npu::OverflowMode::kInfNan); }
  void TearDown() override {
    reset();
    npu::set_overflow_mode(npu::OverflowMode::kInfNan);
    setStepObserver(nullptr);
    setOverflowObserver(nullptr);
  }
};

// One training step with amp; returns the (unscaled) loss and the step report.
std::pair<double, StepInfo> trainStep(torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& fwd,
                                      optim::NpuFusedOptimizer& opt, const Batch& b, double lossMultiplier = 1.0) {
  at::Tensor out = forward(fwd, b.x);
  at::Tensor loss = torch::nn::functional::cross_entropy(out, b.y);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  opt.zeroGrad();
  {
    auto scaled = scale_loss(loss * torch::scalar_tensor(lossMultiplier, loss.options()), opt);
    scaled.backward();
  }
  StepInfo info = step(opt);
  return {loss.item<double>(), info};
}

std::vector<double> run(OptLevel level, int steps, const std::vector<Batch>& data) {
  torch::manual_seed(42);
  Mlp model;
  model->to(npu0());
  Options o;
  o.opt_level = level;
  o.verbosity = 0;
  auto amped = initialize(model.ptr(), [](const auto& p, const auto& c) { return makeSgd(p, c); }, o);
  auto fwd = [&](const at::Tensor& x) { return model->forward(x); };
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(trainStep(*model, fwd, *amped.optimizer, data[s % data.size()]).first);
  return losses;
}

TEST_F(AmpTest, O1AndO2TrackO0OnNpu) {
  const auto data = makeData(8, 64, {16}, 7);
  const int steps = 40;
  const auto o0 = run(OptLevel::kO0, steps, data);
  const auto o1 = run(OptLevel::kO1, steps, data);
  const auto o2 = run(OptLevel::kO2, steps, data);
  double d1 = 0, d2 = 0;
  for (int s = 0; s < steps; ++s) {
    d1 = std::max(d1, std::abs(o1[s] - o0[s]));
    d2 = std::max(d2, std::abs(o2[s] - o0[s]));
  }
  std::printf("loss O0 %.4f -> %.4f; max |O1-O0| %.5f, max |O2-O0| %.5f over %d steps\n", o0.front(), o0.back(), d1, d2,
              steps);
  // Stated tolerance: every step's loss within 5e-3 of O0's (measured: about 2e-4).
  EXPECT_LT(d1, 5e-3);
  EXPECT_LT(d2, 5e-3);
  EXPECT_GT(d1, 0.0);  // O1 really ran in fp16
  EXPECT_GT(d2, 0.0);
  EXPECT_LT(o0.back(), 0.7 * o0.front());  // it learns
}

TEST_F(AmpTest, O2CastsModelKeepsBatchNormFp32AndRoundTripsMasters) {
  torch::manual_seed(5);
  Cnn model;
  model->to(npu0());
  const auto before = snapshot(*model);
  Options o;
  o.opt_level = OptLevel::kO2;
  auto amped = initialize(model.ptr(), [](const auto& p, const auto& c) { return makeAdam(p, c); }, o);
  EXPECT_EQ(model->conv->weight.scalar_type(), at::kHalf);
  EXPECT_EQ(model->fc->weight.scalar_type(), at::kHalf);
  EXPECT_EQ(model->bn->weight.scalar_type(), at::kFloat);
  EXPECT_EQ(model->bn->running_mean.scalar_type(), at::kFloat);
  EXPECT_TRUE(amped.optimizer->hasMasterWeights());
  // Masters start as the fp16 weights widened, exactly.
  const auto stepped = amped.optimizer->steppedParams();
  const auto& params = amped.optimizer->params();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(stepped[i].scalar_type(), at::kFloat);
    EXPECT_TRUE(bitEqual(stepped[i], params[i].to(at::kFloat)));
  }
  EXPECT_TRUE(bitEqual(model->conv->weight.to(at::kFloat), before.at("conv.weight").to(at::kHalf).to(at::kFloat)));
  const auto data = makeData(2, 8, {1, 8, 8}, 3);
  auto fwd = [&](const at::Tensor& x) {
    EXPECT_EQ(x.scalar_type(), at::kHalf);  // inputs cast at forward
    return model->forward(x);
  };
  for (int s = 0; s < 3; ++s) trainStep(*model, fwd, *amped.optimizer, data[s % 2]);
  // After steps: the fp16 model equals its fp32 masters rounded, and the masters moved.
  const auto stepped2 = amped.optimizer->steppedParams();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(bitEqual(params[i], stepped2[i].to(params[i].scalar_type())));
  EXPECT_FALSE(bitEqual(model->fc->weight, before.at("fc.weight").to(at::kHalf).to(npu0())));

  // keep_batchnorm_fp32 off: everything fp16.
  Cnn m2;
  m2->to(npu0());
  o.keep_batchnorm_fp32 = false;
  initialize(m2.ptr(), [](const auto& p, const auto& c) { return makeAdam(p, c); }, o);
  EXPECT_EQ(m2->bn->weight.scalar_type(), at::kHalf);
  EXPECT_EQ(m2->bn->running_var.scalar_type(), at::kHalf);

  // bf16 instead of fp16: the model, its inputs and a training step.
  Cnn m3;
  m3->to(npu0());
  Options b;
  b.opt_level = OptLevel::kO2;
  b.low_precision = at::kBFloat16;
  auto a3 = initialize(m3.ptr(), [](const auto& p, const auto& c) { return makeAdam(p, c); }, b);
  EXPECT_EQ(m3->conv->weight.scalar_type(), at::kBFloat16);
  EXPECT_EQ(m3->bn->weight.scalar_type(), at::kFloat);
  auto [loss3, info3] = trainStep(*m3, [&](const at::Tensor& x) {
    EXPECT_EQ(x.scalar_type(), at::kBFloat16);
    return m3->forward(x);
  }, *a3.optimizer, data[0]);
  EXPECT_TRUE(std::isfinite(loss3));
  EXPECT_FALSE(info3.skipped);
  EXPECT_EQ(a3.optimizer->stepCount(), 1);
}

TEST_F(AmpTest, InitializeRebuildsAnExistingOptimizerAndRefusesMisuse) {
  Mlp model;
  model->to(npu0());
  optim::NpuFusedAdamOptions ao;
  ao.lr = 3e-3;
  ao.weightDecay = 0.1;
  auto opt = std::make_shared<optim::NpuFusedAdam>(model->parameters(), ao);
  Options o;
  o.opt_level = OptLevel::kO2;
  auto amped = initialize(model.ptr(), opt, o);
  ASSERT_NE(amped.optimizer.get(), opt.get());
  auto* adam = dynamic_cast<optim::NpuFusedAdam*>(amped.optimizer.get());
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->options(0).lr, 3e-3);
  EXPECT_EQ(adam->options(0).weightDecay, 0.1);
  EXPECT_TRUE(adam->hasMasterWeights());
  // The stale optimizer refuses to step.
  expectError([&] { opt->step(); }, {"no longer lives in the combined buffer"});

  Mlp m2;
  m2->to(npu0());
  auto o2 = makeSgd(m2->parameters(), {});
  o2->step();
  expectError([&] { initialize(m2.ptr(), o2, o); }, {"already taken 1 step"});
  Options nc;
  nc.combine_grad = false;
  expectError([&] { initialize(m2.ptr(), makeSgd(m2->parameters(), {}), nc); }, {"combine_grad"});
  expectError([&] { initialize(m2->parameters(), o); }, {"O2", "plain parameters"});
  Mlp other;
  expectError([&] { initialize(model.ptr(), makeSgd(other->parameters(), {}), {}); }, {"not a parameter of the model"});
}

TEST_F(AmpTest, SkippedStepLeavesParamsAndStateBitIdentical) {
  torch::manual_seed(9);
  Mlp model;
  model->to(npu0());
  Options o;
  o.opt_level = OptLevel::kO2;
  o.verbosity = 0;
  auto amped = initialize(model.ptr(), [](const auto& p, const auto& c) { return makeAdam(p, c); }, o);
  auto& opt = *amped.optimizer;
  const auto data = makeData(2, 16, {16}, 1);
  auto fwd = [&](const at::Tensor& x) { return model->forward(x); };
  auto [l0, s0] = trainStep(*model, fwd, opt, data[0]);
  ASSERT_FALSE(s0.skipped);
  const auto params = snapshot(*model);
  const auto state = opt.stateDict();
  // 1e6 * 65536 overflows fp16 in backward.
  auto [l1, s1] = trainStep(*model, fwd, opt, data[1], 1e6);
  EXPECT_TRUE(s1.overflow);
  EXPECT_TRUE(s1.skipped);
  EXPECT_EQ(s1.overflow_source, "non_finite");
  EXPECT_EQ(s1.loss_scale, 65536.0);
  EXPECT_EQ(s1.next_loss_scale, 32768.0);
  EXPECT_EQ(opt.stepCount(), 1);
  for (const auto& [k, v] : snapshot(*model)) EXPECT_TRUE(bitEqual(v, params.at(k))) << k;
  const auto state2 = opt.stateDict();
  ASSERT_EQ(state2.size(), state.size());
  for (const auto& [k, v] : state2) EXPECT_TRUE(bitEqual(v, state.at(k))) << k;
  // And the next clean step goes through.
  auto [l2, s2] = trainStep(*model, fwd, opt, data[1]);
  EXPECT_FALSE(s2.skipped);
  EXPECT_EQ(opt.stepCount(), 2);
}

TEST_F(AmpTest, SaturationOverflowIsCaughtOnlyByTheRegister) {
  npu::set_overflow_mode(npu::OverflowMode::kSaturation);
  const auto data = makeData(1, 16, {16}, 2);
  for (OverflowCheck check : {OverflowCheck::kNonFinite, OverflowCheck::kFloatStatus, OverflowCheck::kAuto}) {
    SCOPED_TRACE(overflowCheckName(check));
    torch::manual_seed(4);
    Mlp model;
    model->to(npu0());
    Options o;
    o.opt_level = OptLevel::kO2;
    o.overflow_check = check;
    o.verbosity = 0;
    auto amped = initialize(model.ptr(), [](const auto& p, const auto& c) { return makeSgd(p, c); }, o);
    auto fwd = [&](const at::Tensor& x) { return model->forward(x); };
    const auto before = snapshot(*model);
    auto [loss, info] = trainStep(*model, fwd, *amped.optimizer, data[0], 1e6);
    // The fp16 gradients saturated to +-65504: finite.
    bool saturated = false;
    for (const auto& p : amped.optimizer->params()) {
      saturated = saturated || p.grad().abs().max().item<float>() == 65504.0f;
      EXPECT_TRUE(at::isfinite(p.grad()).all().item<bool>());
    }
    EXPECT_TRUE(saturated);
    if (check == OverflowCheck::kNonFinite) {
      EXPECT_FALSE(info.overflow);  // the non-finite check cannot see it
      EXPECT_FALSE(info.skipped);
    } else {
      EXPECT_EQ(properties().overflow_check, OverflowCheck::kFloatStatus);
      EXPECT_TRUE(info.overflow);
      EXPECT_TRUE(info.skipped);
      EXPECT_EQ(info.overflow_source, "float_status");
      for (const auto& [k, v] : snapshot(*model)) EXPECT_TRUE(bitEqual(v, before.at(k))) << k;
    }
    reset();
  }
}

TEST_F(AmpTest, CombineGradPaddingNeverRaisesOverflowAndMatchesPerTensor) {
  const auto data = makeData(1, 16, {16}, 5);
  std::vector<at::Tensor> grads[2];
  for (int combine = 1; combine >= 0; --combine) {
    torch::manual_seed(8);
    Mlp model;
    model->to(npu0());
    Options o;
    o.opt_level = OptLevel::kO1;
    o.combine_grad = combine == 1;
    o.dynamic_init_scale = 1024;
    initialize(model->parameters(), o);
    const auto bufs = grad_buffers();
    if (combine) {
      ASSERT_EQ(bufs.size(), 1u);
      const auto& layout = bufs[0].layout();
      int64_t expectOffset = 0;
      for (size_t i = 0; i < layout.size(); ++i) {
        EXPECT_EQ(layout.offset(i), expectOffset);
        expectOffset += (layout.numel(i) + 15) / 16 * 16 + 32;
        EXPECT_EQ(model->parameters()[i].grad().data_ptr(), bufs[0].data(i));
      }
      // Poison every padding element.
      at::Tensor flat = bufs[0].flat().cpu();
      at::Tensor poisoned = flat.clone();
      for (size_t i = 0; i < layout.size(); ++i) {
        const int64_t end = i + 1 < layout.size() ? layout.offset(i + 1) : layout.totalNumel();
        poisoned.narrow(0, layout.offset(i) + layout.numel(i), end - layout.offset(i) - layout.numel(i))
            .fill_(std::numeric_limits<float>::infinity());
      }
      bufs[0].flat().copy_(poisoned);
    } else {
      EXPECT_TRUE(bufs.empty());
    }
    at::Tensor loss = torch::nn::functional::cross_entropy(forward([&](const at::Tensor& x) { return model->forward(x); },
                                                                   data[0].x),
                                                           data[0].y);
    LossResult r;
    {
      auto scaled = scale_loss(loss);
      scaled.backward();
      r = scaled.finish();
    }
    EXPECT_FALSE(r.overflow);
    EXPECT_EQ(r.loss_scale, 1024.0);
    bool stepped = false;
    StepInfo info = step([&] { stepped = true; });
    EXPECT_TRUE(stepped);
    EXPECT_FALSE(info.overflow);
    for (const auto& p : model->parameters()) grads[combine].push_back(p.grad().cpu().clone());
    reset();
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_TRUE(bitEqual(grads[0][i], grads[1][i])) << i;
}

TEST_F(AmpTest, TwoLossesAccumulateUnscaledGradients) {
  const auto data = makeData(1, 16, {16}, 6);
  auto grads = [&](bool amped) {
    torch::manual_seed(12);
    Mlp model;
    model->to(npu0());
    Options o;
    o.opt_level = amped ? OptLevel::kO2 : OptLevel::kO0;
    o.num_losses = 2;
    o.verbosity = 0;
    if (amped) o.master_weights = true;
    auto a = initialize(model.ptr(), [](const auto& p, const auto& c) { return makeSgd(p, c); }, o);
    a.optimizer->zeroGrad();
    auto fwd = [&](const at::Tensor& x) { return model->forward(x); };
    for (int id = 0; id < 2; ++id) {
      at::Tensor out = forward(fwd, data[0].x);
      at::Tensor loss = id == 0 ? torch::nn::functional::cross_entropy(out, data[0].y) : out.pow(2).mean();
      auto scaled = scale_loss(loss, *a.optimizer, id);
      scaled.backward();
    }
    a.optimizer->clipGradNorm(1e9);  // stages master grads without changing them
    std::vector<at::Tensor> g;
    for (const auto& p : a.optimizer->steppedParams()) g.push_back(p.grad().cpu().clone());
    step(*a.optimizer);
    reset();
    return g;
  };
  const auto ref = grads(false);
  const auto got = grads(true);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(got[i].scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(got[i], ref[i], 2e-2, 2e-3)) << i << " max diff " << (got[i] - ref[i]).abs().max();
  }
}

TEST_F(AmpTest, ReportsStepsOverflowsAndOneSummaryPerBurst) {
  LogCapture log;
  std::vector<StepInfo> steps;
  std::vector<OverflowEvent> overflows;
  setStepObserver([&](const StepInfo& s) { steps.push_back(s); });
  setOverflowObserver([&](const OverflowEvent& e) { overflows.push_back(e); });
  torch::manual_seed(2);
  Mlp model;
  model->to(npu0());
  Options o;
  o.opt_level = OptLevel::kO2;
  o.dynamic_init_scale = 8;
  o.min_loss_scale = 1;
  auto amped = initialize(model.ptr(), [](const auto& p, const auto& c) { return makeSgd(p, c, 0.0); }, o);
  const auto data = makeData(1, 16, {16}, 2);
  auto fwd = [&](const at::Tensor& x) { return model->forward(x); };
  // Three overflows in a row (scale 8 -> 4 -> 2 -> 1), a clean step, then one more overflow.
  for (double mult : {1e8, 1e8, 1e8, 1.0, 1e8, 1.0}) trainStep(*model, fwd, *amped.optimizer, data[0], mult);
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[0].loss_scale, 8.0);
  EXPECT_TRUE(steps[0].skipped && steps[1].skipped && steps[2].skipped && !steps[3].skipped);
  EXPECT_EQ(steps[2].loss_scale, 2.0);
  EXPECT_EQ(steps[3].loss_scale, 1.0);
  EXPECT_EQ(steps[4].loss_scale, 1.0);
  EXPECT_TRUE(steps[4].overflow);
  EXPECT_EQ(overflows.size(), 4u);
  EXPECT_EQ(overflows[0].source, "non_finite");
  EXPECT_FALSE(overflows[0].op_name.empty());
  EXPECT_EQ(log.count("skipped 3 steps (step 0-2)"), 1);
  EXPECT_EQ(log.count("skipped 1 step (step 4)"), 1);
  EXPECT_EQ(log.count("skipped"), 2);  // one line per burst, not per step
  EXPECT_EQ(log.count("collapsed"), 1);
}

TEST_F(AmpTest, PlainParametersWithTorchOptimizerSkipOnOverflow) {
  torch::manual_seed(3);
  Mlp model;
  model->to(npu0());
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  Options o;
  o.opt_level = OptLevel::kO1;
  o.verbosity = 0;
  initialize(model->parameters(), o);
  const auto data = makeData(1, 16, {16}, 3);
  for (double mult : {1e8, 1.0}) {
    const auto before = snapshot(*model);
    sgd.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(
        forward([&](const at::Tensor& x) { return model->forward(x); }, data[0].x), data[0].y);
    { scale_loss(loss * torch::scalar_tensor(mult, loss.options())).backward(); }
    StepInfo info = step([&] { sgd.step(); });
    EXPECT_EQ(info.skipped, mult > 1);
    bool same = true;
    for (const auto& [k, v] : snapshot(*model)) same = same && bitEqual(v, before.at(k));
    EXPECT_EQ(same, mult > 1);
  }
}

TEST_F(AmpTest, ResumeFromCheckpointIsBitExact) {
  const auto data = makeData(4, 16, {1, 8, 8}, 11);
  const int total = 12, at = 5;
  char path[] = "/tmp/npuscope_amp_ckptXXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  Options o;
  o.opt_level = OptLevel::kO2;
  o.dynamic_init_scale = 1 << 24;  // overflows at first: backoff, then growth every 3 steps
  o.scale_window = 3;
  o.verbosity = 0;
  auto adam = [](const auto& p, const auto& c) { return makeAdam(p, c); };

  auto runFrom = [&](int begin, int end, bool load, bool save, std::vector<double>* losses, std::vector<double>* scales) {
    torch::manual_seed(load ? 999 : 77);  // a resumed run starts from different weights
    Cnn model;
    model->to(npu0());
    auto a = initialize(model.ptr(), adam, o);
    if (load) load_checkpoint(path, *model, *a.optimizer);
    auto fwd = [&](const at::Tensor& x) { return model->forward(x); };
    for (int s = begin; s < end; ++s) {
      auto [loss, info] = trainStep(*model, fwd, *a.optimizer, data[s % data.size()]);
      losses->push_back(loss);
      scales->push_back(info.loss_scale);
      if (save && s + 1 == at) save_checkpoint(path, *model, *a.optimizer);
    }
    auto snap = snapshot(*model);
    reset();
    return snap;
  };
  std::vector<double> fullLoss, fullScale, resLoss, resScale;
  const auto full = runFrom(0, total, false, true, &fullLoss, &fullScale);
  const auto resumed = runFrom(at, total, true, false, &resLoss, &resScale);
  std::remove(path);
  ASSERT_EQ(resLoss.size(), static_cast<size_t>(total - at));
  for (int s = at; s < total; ++s) {
    EXPECT_EQ(std::memcmp(&resLoss[s - at], &fullLoss[s], sizeof(double)), 0) << "step " << s;
    EXPECT_EQ(resScale[s - at], fullScale[s]) << "step " << s;
  }
  // The scale really moved both ways within the run.
  bool backoff = false, growth = false;
  for (size_t s = 1; s < fullScale.size(); ++s) {
    backoff = backoff || fullScale[s] < fullScale[s - 1];
    growth = growth || fullScale[s] > fullScale[s - 1];
  }
  EXPECT_TRUE(backoff);
  EXPECT_TRUE(growth);
  for (const auto& [k, v] : full) EXPECT_TRUE(bitEqual(v, resumed.at(k))) << k;
}

TEST_F(AmpTest, StateDictRoundTripAndRefusals) {
  Mlp model;
  model->to(npu0());
  Options o;
  o.num_losses = 2;
  initialize(model->parameters(), o);
  StateDict d = state_dict();
  EXPECT_EQ(d.at("loss_scaler0.loss_scale").item<double>(), 65536.0);
  EXPECT_EQ(d.at("loss_scaler1.unskipped").item<int64_t>(), 0);
  d["loss_scaler1.loss_scale"] = torch::scalar_tensor(512.0, torch::kDouble);
  d["loss_scaler1.unskipped"] = torch::scalar_tensor(int64_t{7}, torch::kLong);
  load_state_dict(d);
  EXPECT_EQ(loss_scale(1), 512.0);
  EXPECT_EQ(state_dict().at("loss_scaler1.unskipped").item<int64_t>(), 7);
  StateDict missing = d;
  missing.erase("loss_scaler1.unskipped");
  expectError([&] { load_state_dict(missing); }, {"loss_scaler1"});
  EXPECT_EQ(loss_scale(1), 512.0);
  d["loss_scaler5.loss_scale"] = torch::scalar_tensor(1.0, torch::kDouble);
  expectError([&] { load_state_dict(d); }, {"loss_scaler5", "num_losses"});
  expectError([&] { scale_loss(torch::ones({1}), 2); }, {"loss_id 2"});
}

}  // namespace
}  // namespace npuscope::amp
