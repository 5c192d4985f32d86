// compare.h: decoding, statistics, msprobe metrics against hand-computed values, verdicts, and
// whole-run comparison over trace files written by TraceWriter (payloads through zstd).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "npuscope/analysis/compare.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::compare {
using namespace npuscope::tensor;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CompareTest, HalfAndBfloat16Decode) {
  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0xC000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(halfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_EQ(bfloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(aclDataType(DType::kFloat16), 2);
  EXPECT_EQ(aclDataType(DType::kFloat32), 1);
  EXPECT_EQ(aclDataType(DType::kBFloat16), 27);
  EXPECT_EQ(parseDType("float16"), DType::kFloat16);
  EXPECT_EQ(parseDType("half"), DType::kUnknown);
}

TEST(CompareTest, StatsCountNonFinite) {
  const float v[] = {1.0f, -2.0f, INFINITY, NAN, 3.0f};
  const TensorStats s = computeStats(reinterpret_cast<const uint8_t*>(v), DType::kFloat32, 5);
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_EQ(s.inf_count, 1);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_TRUE(std::isinf(s.max));
  const float w[] = {3.0f, 4.0f};
  const TensorStats t = computeStats(reinterpret_cast<const uint8_t*>(w), DType::kFloat32, 2);
  EXPECT_DOUBLE_EQ(t.mean, 3.5);
  EXPECT_DOUBLE_EQ(t.l2norm, 5.0);
  EXPECT_EQ(t.nan_count + t.inf_count, 0);
}

TEST(CompareTest, MetricsMatchHandComputedValues) {
  const double a[] = {1, 2, 3}, b[] = {1, 2, 4};
  const TensorMetrics m = computeMetrics(a, b, 3);
  EXPECT_NEAR(m.cosine, 17.0 / std::sqrt(14.0 * 21.0), 1e-12);
  EXPECT_DOUBLE_EQ(m.euc_dist, 1.0);
  EXPECT_DOUBLE_EQ(m.max_abs_err, 1.0);
  EXPECT_NEAR(m.max_relative_err, 0.25, 1e-12);
  EXPECT_NEAR(m.one_thousandth_ratio, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(m.five_thousandths_ratio, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(verdictFor(m), Verdict::kWarning);  // cosine 0.9915 > 0.99 but MaxAbsErr 1 >= 0.001

  const double c[] = {1.003, 2, 3};  // relative error 0.003/1.003 ~ 0.0030: in the 5/1000 share only
  const TensorMetrics n = computeMetrics(c, a, 3);
  EXPECT_NEAR(n.max_abs_err, 0.003, 1e-12);
  EXPECT_NEAR(n.one_thousandth_ratio, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(n.five_thousandths_ratio, 1.0, 1e-12);
  EXPECT_NEAR(n.euc_dist, 0.003, 1e-12);
}

TEST(CompareTest, VerdictsFollowMsprobeRules) {
  const double a[] = {1, 2, 3}, close[] = {1.0005, 2, 3}, orth_a[] = {1, 0}, orth_b[] = {0, 1};
  EXPECT_EQ(verdictFor(computeMetrics(close, a, 3)), Verdict::kPass);
  EXPECT_EQ(verdictFor(computeMetrics(orth_a, orth_b, 2)), Verdict::kError);  // cosine 0 < 0.9
  const double big[] = {1, 2, 5};                                               // MaxAbsErr 2 > 1
  EXPECT_EQ(verdictFor(computeMetrics(big, a, 3)), Verdict::kError);
  const double zeros[] = {0, 0};
  const TensorMetrics z = computeMetrics(zeros, zeros, 2);
  EXPECT_EQ(z.cosine, 1.0);
  EXPECT_EQ(verdictFor(z), Verdict::kPass);
  // The same inf / NaN on both sides is exact; inf against a number is an error.
  const double x[] = {kInf, kNaN, 1}, y[] = {kInf, kNaN, 1}, f[] = {1, 1, 1};
  const TensorMetrics same = computeMetrics(x, y, 3);
  EXPECT_EQ(same.max_abs_err, 0.0);
  EXPECT_EQ(verdictFor(same), Verdict::kPass);
  EXPECT_EQ(verdictFor(computeMetrics(x, f, 3)), Verdict::kError);
  EXPECT_TRUE(dtypesComparable(DType::kFloat16, DType::kFloat32));
  EXPECT_TRUE(dtypesComparable(DType::kBFloat16, DType::kFloat16));
  EXPECT_FALSE(dtypesComparable(DType::kInt64, DType::kFloat32));
}

TEST(CompareTest, ShapeText) {
  auto s = parseShape("[2, 3, 4]");
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(*s, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(parseShape("[]").isOk());
  EXPECT_FALSE(parseShape("2,3").isOk());
  EXPECT_EQ(formatShape({2, 3}), "[2, 3]");
}

TensorDumpRecord record(int64_t step, const std::string& op, const std::string& io, const std::vector<float>& v,
                        const std::string& dtype = "float32") {
  TensorDumpRecord r;
  r.step = step;
  r.op_name = op;
  r.op_type = "aten::" + op.substr(0, op.find('.'));
  r.io = io;
  r.dtype = dtype;
  r.shape = "[" + std::to_string(v.size()) + "]";
  const TensorStats s = computeStats(reinterpret_cast<const uint8_t*>(v.data()), DType::kFloat32, v.size());
  r.has_stats = true;
  r.min = s.min;
  r.max = s.max;
  r.mean = s.mean;
  r.l2norm = s.l2norm;
  r.nan_count = s.nan_count;
  r.inf_count = s.inf_count;
  r.data.resize(v.size() * 4);
  std::memcpy(r.data.data(), v.data(), r.data.size());
  return r;
}

int64_t writeRun(TraceWriter& w, float relu_last) {
  auto run = w.beginRun(RunInfo{});
  EXPECT_TRUE(run.isOk());
  std::vector<float> zeros(4096, 0.0f);  // compresses: stored as a zstd frame
  w.addTensorDumps({record(0, "addmm.0.forward", "input", {1, 2, 3}), record(0, "addmm.0.forward", "output", zeros)});
  w.addTensorDumps({record(0, "relu.0.forward", "output", {1, 2, relu_last})});
  w.addTensorDumps({record(1, "relu.0.forward", "output", {5, 6, 7})});
  EXPECT_TRUE(w.endRun("completed").isOk());
  return *run;
}

TEST(CompareTest, IdenticalRunsGiveCosineOneAndNoError) {
  const std::string path = (std::filesystem::temp_directory_path() / "npuscope_compare_test.db").string();
  std::filesystem::remove(path);
  int64_t r1, r2, r3;
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    r1 = writeRun(**w, 3);
    r2 = writeRun(**w, 3);
    r3 = writeRun(**w, 40);
  }
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  auto dumps = (*reader)->tensorDumps(r1);
  ASSERT_TRUE(dumps.isOk());
  ASSERT_EQ(dumps->size(), 4u);
  EXPECT_LT((*dumps)[1].data_bytes, 4096 * 4);  // the zero tensor was compressed

  auto same = compareRuns(**reader, r1, **reader, r2);
  ASSERT_TRUE(same.isOk()) << same.status().message();
  ASSERT_EQ(same->rows.size(), 4u);
  for (const auto& row : same->rows) {
    ASSERT_TRUE(row.has_metrics) << row.tensorName();
    EXPECT_EQ(row.metrics.cosine, 1.0) << row.tensorName();
    EXPECT_EQ(row.metrics.max_abs_err, 0.0) << row.tensorName();
    EXPECT_EQ(row.metrics.euc_dist, 0.0);
    EXPECT_EQ(row.verdict, Verdict::kPass);
  }
  EXPECT_TRUE(same->first_divergent_op.empty());

  auto diff = compareRuns(**reader, r3, **reader, r1);
  ASSERT_TRUE(diff.isOk());
  EXPECT_EQ(diff->first_divergent_op, "relu.0.forward");
  EXPECT_EQ(diff->first_divergent_step, 0);
  EXPECT_EQ(diff->error, 1u);
  const std::string csv = toCsv(*diff);
  EXPECT_EQ(csv.rfind("Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape", 0), 0u);
  EXPECT_NE(csv.find("relu.0.forward.output.0"), std::string::npos);

  CompareOptions only1;
  only1.step = 1;
  auto step1 = compareRuns(**reader, r3, **reader, r1, only1);
  ASSERT_TRUE(step1.isOk());
  EXPECT_EQ(step1->rows.size(), 1u);
  EXPECT_EQ(step1->error, 0u);
  std::filesystem::remove(path);
}

}  // namespace

// An O2-style run whose backward ran on a loss scale of 1024 against an unscaled run: its
// gradients are 1024x the bench's and must compare clean once the scale is taken out, while a
// genuinely different tensor still fails.
TEST(CompareTest, LossScaledGradientsCompareAfterTheScaleIsRemoved) {
  const std::string path = (std::filesystem::temp_directory_path() / "npuscope_compare_scaled.db").string();
  std::filesystem::remove(path);
  int64_t scaled, plain;
  auto writeScaledRun = [](TraceWriter& w, double loss_scale, float factor, float other) {
    auto run = w.beginRun(RunInfo{});
    EXPECT_TRUE(run.isOk());
    StepRecord st;
    st.step = 0;
    st.loss_scale = loss_scale;
    w.addStep(st);
    w.addTensorDumps({record(0, "mm.0.backward", "output", {1.5f * factor, -2.0f * factor, 0.25f * factor})});
    w.addTensorDumps({record(0, "relu.0.forward", "output", {1, 2, other})});
    EXPECT_TRUE(w.endRun("completed").isOk());
    return *run;
  };
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    scaled = writeScaledRun(**w, 1024.0, 1024.0f, 3);
    plain = writeScaledRun(**w, 1.0, 1.0f, 30);
  }
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader.isOk());
  auto res = compareRuns(**reader, scaled, **reader, plain);
  ASSERT_TRUE(res.isOk()) << res.status().message();
  ASSERT_EQ(res->rows.size(), 2u);
  const CompareRow& grad = res->rows[0];
  EXPECT_EQ(grad.loss_scale_ratio, 1024.0);
  EXPECT_EQ(grad.verdict, Verdict::kPass) << grad.message;
  EXPECT_EQ(grad.metrics.max_abs_err, 0.0);
  EXPECT_NE(grad.message.find("loss-scale ratio 1024"), std::string::npos) << grad.message;
  const CompareRow& act = res->rows[1];
  EXPECT_EQ(act.loss_scale_ratio, 1.0) << "an activation is not scaled";
  EXPECT_EQ(act.verdict, Verdict::kError);
  EXPECT_EQ(res->first_divergent_op, "relu.0.forward");
}

// msprobe's statistics ("summary") mode: runs whose dumps hold statistics only (an msprobe dump,
// read), named by msprobe's argument paths; differences A - B, relative errors |diff / B|, and
// msprobe's rule: warning when |diff| / (|max(a, b)| + 1e-10) > 0.5 for any statistic.
TEST(CompareTest, StatisticsOnlyRunsFollowMsprobesSummaryRules) {
  const std::string path = (std::filesystem::temp_directory_path() / "npuscope_compare_summary.db").string();
  std::filesystem::remove(path);
  auto stats = [](int64_t step, const std::string& entry, const std::string& arg, double mx, double mn, double mean,
                  double norm, int64_t nan = 0) {
    TensorDumpRecord r;
    r.step = step;
    r.op_name = entry;
    r.op_type = entry.substr(0, entry.rfind('.', entry.rfind('.') - 1));
    r.io = arg.substr(0, arg.find('.'));
    r.arg = arg;
    r.dtype = "float32";
    r.shape = "[4]";
    r.has_stats = true;
    r.max = mx;
    r.min = mn;
    r.mean = mean;
    r.l2norm = norm;
    r.nan_count = nan;
    r.inf_count = nan ? -1 : 0;
    return r;
  };
  int64_t a, b;
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    a = *(*w)->beginRun(RunInfo{});
    (*w)->addTensorDumps({stats(-1, "Functional.linear.0.forward", "input.0", 1, -1, 0.5, 2),
                          stats(-1, "Functional.linear.0.forward", "output.0", 3, -1, 0.30, 4),
                          stats(-1, "Functional.relu.0.forward", "output.0", NAN, NAN, NAN, NAN, 1)});
    ASSERT_TRUE((*w)->endRun("completed").isOk());
    b = *(*w)->beginRun(RunInfo{});
    (*w)->addTensorDumps({stats(0, "Functional.linear.0.forward", "input.0", 1, -1, 0.5, 2),
                          stats(0, "Functional.linear.0.forward", "output.0", 2, -1, 0.10, 4),
                          stats(0, "Functional.relu.0.forward", "output.0", 3, 0, 0.75, 3.5),
                          stats(0, "Functional.softmax.0.forward", "output.0", 1, 0, 0.25, 1)});
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader.isOk());
  auto res = compareRuns(**reader, a, **reader, b);
  ASSERT_TRUE(res.isOk()) << res.status().message();
  EXPECT_TRUE(res->statistics_only);
  ASSERT_EQ(res->rows.size(), 4u);
  EXPECT_EQ(res->rows[0].tensorName(), "Functional.linear.0.forward.input.0") << "step -1 pairs with step 0: in order";
  EXPECT_EQ(res->rows[0].verdict, Verdict::kPass) << res->rows[0].message;
  const CompareRow& out = res->rows[1];
  ASSERT_TRUE(out.has_summary);
  EXPECT_DOUBLE_EQ(out.summary.max_diff, 1.0);
  EXPECT_DOUBLE_EQ(out.summary.max_rel, 0.5);   // |1 / 2|
  EXPECT_DOUBLE_EQ(out.summary.mean_diff, 0.2);
  EXPECT_DOUBLE_EQ(out.summary.mean_rel, 2.0);  // |0.2 / 0.1|
  // max: 1 / 3 = 0.33 (within); mean: 0.2 / 0.3 = 0.67 > 0.5: warning.
  EXPECT_EQ(out.verdict, Verdict::kWarning) << out.message;
  EXPECT_NE(out.message.find("mean"), std::string::npos) << out.message;
  EXPECT_EQ(res->rows[2].verdict, Verdict::kError) << "a NaN the bench does not have";
  EXPECT_EQ(res->rows[2].message, "NPU has nan, bench has none");
  EXPECT_TRUE(res->rows[3].only_in_bench);
  EXPECT_EQ(res->rows[3].message, "missing in A");
  EXPECT_EQ(res->first_divergent_op, "Functional.relu.0.forward");
  const std::string csv = toCsv(*res);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Max diff,Min diff,"
            "Mean diff,L2norm diff,MaxRelativeErr,MinRelativeErr,MeanRelativeErr,NormRelativeErr,NPU max,NPU min,"
            "NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Result,Err_message");
  EXPECT_NE(csv.find("Functional.linear.0.forward.output.0,Functional.linear.0.forward.output.0,float32,float32,[4],[4],"
                     "1,0,0.2,0,50%,0%,200%,0%"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("N/A,Functional.softmax.0.forward.output.0"), std::string::npos) << "bench-only row, NPU side N/A";
}

}  // namespace npuscope::compare
