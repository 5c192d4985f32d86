// Opt-level presets, every override, and the refusal of contradictions.
#include <gtest/gtest.h>

#include "npuscope/amp/amp.h"

namespace npuscope::amp {
namespace {

Properties resolve(const Options& o) {
  auto p = resolveOptions(o);
  EXPECT_TRUE(p.isOk()) << p.status().message();
  return p.isOk() ? p.value() : Properties();
}

// The refusal message names every needle.
void expectRefused(const Options& o, const std::vector<std::string>& needles) {
  auto p = resolveOptions(o);
  ASSERT_FALSE(p.isOk());
  for (const auto& n : needles) EXPECT_NE(p.status().message().find(n), std::string::npos) << p.status().message();
}

TEST(AmpOptions, PresetsMatchApexTable) {
  Options o;
  o.opt_level = OptLevel::kO0;
  Properties p = resolve(o);
  EXPECT_EQ(p.cast_model_type, at::kFloat);
  EXPECT_FALSE(p.patch_ops);
  EXPECT_FALSE(p.master_weights);
  EXPECT_FALSE(p.loss_scaler.dynamic);
  EXPECT_EQ(p.loss_scaler.static_scale, 1.0);

  o.opt_level = OptLevel::kO1;
  p = resolve(o);
  EXPECT_EQ(p.cast_model_type, kNoCast);
  EXPECT_TRUE(p.patch_ops);
  EXPECT_FALSE(p.master_weights);
  EXPECT_TRUE(p.loss_scaler.dynamic);
  EXPECT_EQ(p.low_precision, at::kHalf);

  o.opt_level = OptLevel::kO2;
  p = resolve(o);
  EXPECT_EQ(p.cast_model_type, at::kHalf);
  EXPECT_FALSE(p.patch_ops);
  EXPECT_TRUE(p.keep_batchnorm_fp32);
  EXPECT_TRUE(p.master_weights);
  EXPECT_TRUE(p.loss_scaler.dynamic);
  EXPECT_EQ(p.loss_scaler.init_scale, 65536.0);
  EXPECT_TRUE(p.combine_grad);

  o.opt_level = OptLevel::kO3;
  p = resolve(o);
  EXPECT_EQ(p.cast_model_type, at::kHalf);
  EXPECT_FALSE(p.keep_batchnorm_fp32);
  EXPECT_FALSE(p.master_weights);
  EXPECT_FALSE(p.loss_scaler.dynamic);
  EXPECT_EQ(p.loss_scaler.static_scale, 1.0);
}

TEST(AmpOptions, EveryOverrideApplies) {
  Options o;
  o.opt_level = OptLevel::kO2;
  o.keep_batchnorm_fp32 = false;
  o.master_weights = false;
  o.dynamic_init_scale = 1024;
  o.scale_growth_factor = 4;
  o.scale_backoff_factor = 0.25;
  o.scale_window = 10;
  o.min_loss_scale = 2;
  o.max_loss_scale = 4096;
  o.num_losses = 3;
  o.combine_grad = false;
  o.verbosity = 0;
  o.overflow_check = OverflowCheck::kFloatStatus;
  o.cast_model_outputs = at::kHalf;
  Properties p = resolve(o);
  EXPECT_FALSE(p.keep_batchnorm_fp32);
  EXPECT_FALSE(p.master_weights);
  EXPECT_EQ(p.loss_scaler.init_scale, 1024.0);
  EXPECT_EQ(p.loss_scaler.growth_factor, 4.0);
  EXPECT_EQ(p.loss_scaler.backoff_factor, 0.25);
  EXPECT_EQ(p.loss_scaler.window, 10);
  EXPECT_EQ(p.loss_scaler.min_scale, 2.0);
  EXPECT_EQ(p.loss_scaler.max_scale, 4096.0);
  EXPECT_EQ(p.num_losses, 3);
  EXPECT_FALSE(p.combine_grad);
  EXPECT_EQ(p.verbosity, 0);
  EXPECT_EQ(p.overflow_check, OverflowCheck::kFloatStatus);
  EXPECT_EQ(p.cast_model_outputs, at::kHalf);

  Options s;
  s.opt_level = OptLevel::kO2;
  s.loss_scale = LossScale::Fixed(128);
  p = resolve(s);
  EXPECT_FALSE(p.loss_scaler.dynamic);
  EXPECT_EQ(p.loss_scaler.static_scale, 128.0);

  Options d;
  d.opt_level = OptLevel::kO0;
  d.loss_scale = LossScale::Dynamic();
  d.patch_ops = true;
  d.cast_model_type = kNoCast;
  p = resolve(d);
  EXPECT_TRUE(p.loss_scaler.dynamic);
  EXPECT_TRUE(p.patch_ops);
}

TEST(AmpOptions, Bf16Selectable) {
  Options o;
  o.opt_level = OptLevel::kO2;
  o.low_precision = at::kBFloat16;
  EXPECT_EQ(resolve(o).cast_model_type, at::kBFloat16);
  Options c;
  c.opt_level = OptLevel::kO3;
  c.cast_model_type = at::kBFloat16;
  EXPECT_EQ(resolve(c).low_precision, at::kBFloat16);
  Options one;
  one.low_precision = at::kBFloat16;
  EXPECT_EQ(resolve(one).low_precision, at::kBFloat16);
}

TEST(AmpOptions, ContradictionsAreRefusedNamingThem) {
  Options o;
  o.opt_level = OptLevel::kO1;
  o.keep_batchnorm_fp32 = true;
  expectRefused(o, {"keep_batchnorm_fp32", "O1"});

  o = {};
  o.opt_level = OptLevel::kO1;
  o.master_weights = true;
  expectRefused(o, {"master_weights", "O1"});

  o = {};
  o.opt_level = OptLevel::kO0;
  o.master_weights = true;
  expectRefused(o, {"master_weights", "O0"});

  o = {};
  o.opt_level = OptLevel::kO1;
  o.cast_model_type = at::kHalf;
  expectRefused(o, {"patch_ops", "cast_model_type"});

  o = {};
  o.opt_level = OptLevel::kO2;
  o.patch_ops = true;
  expectRefused(o, {"patch_ops", "fp16"});

  o = {};
  o.opt_level = OptLevel::kO2;
  o.cast_model_type = at::kHalf;
  o.low_precision = at::kBFloat16;
  expectRefused(o, {"cast_model_type", "low_precision"});

  for (auto set : std::vector<std::function<void(Options&)>>{
           [](Options& x) { x.dynamic_init_scale = 8; }, [](Options& x) { x.scale_window = 8; },
           [](Options& x) { x.scale_growth_factor = 3; }, [](Options& x) { x.scale_backoff_factor = 0.25; },
           [](Options& x) { x.min_loss_scale = 1; }, [](Options& x) { x.max_loss_scale = 8; }}) {
    o = {};
    o.opt_level = OptLevel::kO2;
    o.loss_scale = LossScale::Fixed(128);
    set(o);
    expectRefused(o, {"applies to loss_scale dynamic", "128"});
  }
  o = {};
  o.opt_level = OptLevel::kO3;  // static 1.0 by preset
  o.scale_window = 5;
  expectRefused(o, {"scale_window", "O3"});

  o = {};
  o.dynamic_init_scale = 1e9;
  o.max_loss_scale = 1e6;
  expectRefused(o, {"dynamic_init_scale", "max_loss_scale"});

  o = {};
  o.min_loss_scale = 100;
  o.max_loss_scale = 10;
  expectRefused(o, {"min_loss_scale", "max_loss_scale"});
}

TEST(AmpOptions, InvalidValuesNamed) {
  Options o;
  o.num_losses = 0;
  expectRefused(o, {"num_losses"});
  o = {};
  o.scale_window = 0;
  expectRefused(o, {"scale_window"});
  o = {};
  o.scale_backoff_factor = 2;
  expectRefused(o, {"scale_backoff_factor"});
  o = {};
  o.low_precision = at::kFloat;
  expectRefused(o, {"low_precision"});
  o = {};
  o.cast_model_type = at::kInt;
  expectRefused(o, {"cast_model_type"});
}

TEST(AmpOptions, Parsers) {
  EXPECT_EQ(parseOptLevel("O2").value(), OptLevel::kO2);
  EXPECT_FALSE(parseOptLevel("o2").isOk());
  EXPECT_NE(parseOptLevel("O4").status().message().find("O0, O1, O2 or O3"), std::string::npos);
  EXPECT_TRUE(parseLossScale("dynamic").value().dynamic);
  EXPECT_EQ(parseLossScale("128").value().value, 128.0);
  EXPECT_FALSE(parseLossScale("-1").isOk());
  EXPECT_FALSE(parseLossScale("12x").isOk());
  EXPECT_EQ(parseCastType("bf16").value(), at::kBFloat16);
  EXPECT_EQ(parseCastType("none").value(), kNoCast);
  EXPECT_FALSE(parseCastType("fp64").isOk());
  EXPECT_EQ(parseOverflowCheck("float_status").value(), OverflowCheck::kFloatStatus);
  EXPECT_FALSE(parseOverflowCheck("x").isOk());
  Options o;
  o.opt_level = OptLevel::kO2;
  EXPECT_NE(resolve(o).describe().find("master_weights       : true"), std::string::npos);
}

}  // namespace
}  // namespace npuscope::amp
