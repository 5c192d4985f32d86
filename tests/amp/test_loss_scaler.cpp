// The dynamic loss-scale state machine, rule by rule (references.md "Dynamic loss scale").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "npuscope/amp/loss_scaler.h"

namespace npuscope::amp {
namespace {

LossScalerOptions dyn(double init, int64_t window) {
  LossScalerOptions o;
  o.init_scale = init;
  o.window = window;
  return o;
}

TEST(LossScaler, DefaultsAreApexs) {
  LossScaler s;
  EXPECT_EQ(s.lossScale(), 65536.0);
  EXPECT_EQ(s.options().window, 2000);
  EXPECT_EQ(s.options().max_scale, 16777216.0);
}

TEST(LossScaler, InitIsCappedByMax) {
  LossScalerOptions o = dyn(65536, 10);
  o.max_scale = 1024;
  EXPECT_EQ(LossScaler(o).lossScale(), 1024.0);
}

TEST(LossScaler, GrowsAfterWindowCleanStepsAndResetsCounter) {
  LossScaler s(dyn(8, 3));
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.lossScale(), 8.0);
  EXPECT_EQ(s.unskipped(), 2);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.lossScale(), 16.0);
  EXPECT_EQ(s.unskipped(), 0);
  for (int i = 0; i < 3; ++i) s.update(false);
  EXPECT_EQ(s.lossScale(), 32.0);
}

TEST(LossScaler, BacksOffOnOverflowSkipsAndResetsCounter) {
  LossScaler s(dyn(1024, 3));
  s.update(false);
  s.update(false);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.lossScale(), 512.0);
  EXPECT_EQ(s.unskipped(), 0);
  // The counter restarted: two clean steps are not a window.
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.lossScale(), 512.0);
  s.update(false);
  EXPECT_EQ(s.lossScale(), 1024.0);
}

TEST(LossScaler, CustomGrowthAndBackoffFactors) {
  LossScalerOptions o = dyn(100, 1);
  o.growth_factor = 3;
  o.backoff_factor = 0.25;
  LossScaler s(o);
  s.update(false);
  EXPECT_EQ(s.lossScale(), 300.0);
  s.update(true);
  EXPECT_EQ(s.lossScale(), 75.0);
}

TEST(LossScaler, CapAtMax) {
  LossScalerOptions o = dyn(512, 1);
  o.max_scale = 1024;
  LossScaler s(o);
  s.update(false);
  EXPECT_EQ(s.lossScale(), 1024.0);
  s.update(false);
  EXPECT_EQ(s.lossScale(), 1024.0);
}

TEST(LossScaler, FloorAtMinAndOneCollapseWarning) {
  LossScalerOptions o = dyn(1024, 100);
  o.min_scale = 256;
  LossScaler s(o);
  std::vector<std::string> warnings;
  s.setWarn([&](const std::string& w) { warnings.push_back(w); });
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.lossScale(), 256.0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("min_loss_scale"), std::string::npos);
}

TEST(LossScaler, CollapseBelowOneWarnsOnceWithoutFloor) {
  LossScaler s(dyn(4, 100));
  std::vector<std::string> warnings;
  s.setWarn([&](const std::string& w) { warnings.push_back(w); });
  s.update(true);  // 2
  s.update(true);  // 1
  EXPECT_TRUE(warnings.empty());
  s.update(true);  // 0.5
  s.update(true);  // 0.25
  EXPECT_EQ(s.lossScale(), 0.25);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("below 1"), std::string::npos);
}

TEST(LossScaler, StaticNeverChangesNorSkips) {
  LossScalerOptions o;
  o.dynamic = false;
  o.static_scale = 128;
  LossScaler s(o);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.lossScale(), 128.0);
  for (int i = 0; i < 5000; ++i) s.update(false);
  EXPECT_EQ(s.lossScale(), 128.0);
}

TEST(LossScaler, ValidationNamesTheField) {
  LossScalerOptions o;
  o.growth_factor = 1.0;
  EXPECT_NE(o.validate().find("scale_growth_factor"), std::string::npos);
  o = {};
  o.backoff_factor = 1.5;
  EXPECT_NE(o.validate().find("scale_backoff_factor"), std::string::npos);
  o = {};
  o.window = 0;
  EXPECT_NE(o.validate().find("scale_window"), std::string::npos);
  o = {};
  o.min_scale = 1e9;
  EXPECT_NE(o.validate().find("min_loss_scale"), std::string::npos);
  EXPECT_THROW(LossScaler{o}, c10::Error);
  LossScaler s;
  EXPECT_THROW(s.set(-1, 0), c10::Error);
  s.set(32, 7);
  EXPECT_EQ(s.lossScale(), 32.0);
  EXPECT_EQ(s.unskipped(), 7);
}

}  // namespace
}  // namespace npuscope::amp
