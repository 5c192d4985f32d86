// The cost model against a real Ascend device: every kernel of the AlexNet training step in
// tests/data/traces/ascend_alexnet_rank0_ascend_pt (kernel_details.csv: type, shapes, dtypes and
// measured duration) is costed by the model from its shapes (npu::calibrate, what `npuscope
// calibrate` prints), and the predicted/real ratio is summarised per kernel type (geometric mean
// and spread). The figures are printed (they are in
// docs/device.md, "Calibration") and held within the bounds stated there, so a change to the
// model that moves them far shows here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "npuscope/device/calibration.h"
#include "text.h"  // import/src: torch_npu's CSV rows

namespace npuscope {
namespace {

TEST(CostCalibration, AlexNetKernelsOfARealAscendDevice) {
  std::ifstream f(std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv");
  ASSERT_TRUE(f) << "kernel_details.csv of the Ascend sample";
  std::stringstream text;
  text << f.rdbuf();
  import::CsvReader csv(text.str());
  auto header = csv.next();
  ASSERT_TRUE(header);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header->size(); ++i) col[(*header)[i]] = i;
  for (const char* c : {"Type", "Duration(us)", "Input Shapes", "Output Shapes", "Input Data Types", "Accelerator Core",
                        "Output Data Types", "Input Formats", "Output Formats"}) {
    ASSERT_TRUE(col.count(c)) << c;
  }
  std::vector<npu::RealKernel> kernels;
  double compute_us = 0;  // the sample's own sum, apart from the library: hcom_* rows are not compute
  while (auto row = csv.next()) {
    if (row->size() < header->size()) continue;
    npu::RealKernel k;
    k.type = (*row)[col["Type"]];
    k.core = (*row)[col["Accelerator Core"]];
    k.real_us = std::stod((*row)[col["Duration(us)"]]);
    k.input_shapes = (*row)[col["Input Shapes"]];
    k.output_shapes = (*row)[col["Output Shapes"]];
    k.input_dtypes = (*row)[col["Input Data Types"]];
    k.output_dtypes = (*row)[col["Output Data Types"]];
    k.input_formats = (*row)[col["Input Formats"]];
    k.output_formats = (*row)[col["Output Formats"]];
    if (k.type.rfind("hcom_", 0) != 0) compute_us += k.real_us;
    kernels.push_back(k);
  }
  const npu::Calibration c = npu::calibrate(kernels);
  std::printf("%-26s %6s %10s %10s %9s %9s %9s\n", "type", "calls", "real us", "model us", "geomean", "min", "max");
  std::map<std::string, npu::CalibrationType> by_type;
  for (const auto& t : c.types) {
    by_type[t.type] = t;
    std::printf("%-26s %6lld %10.1f %10.1f %9.3f %9.3f %9.3f\n", t.type.c_str(), static_cast<long long>(t.calls), t.real_us,
                t.model_us, t.geomean, t.min, t.max);
  }
  std::printf("all costed: %lld kernels, real %.1f us, model %.1f us (%.3f), geomean %.3f, geometric sd x%.2f\n",
              static_cast<long long>(c.costed), c.real_us, c.model_us, c.model_us / c.real_us, c.geomean, c.geometric_sd);
  for (const auto& [type, us] : c.uncosted) {
    std::printf("not costed: %-20s %8.1f us (%.1f %% of the step's compute kernels)\n", type.c_str(), us, 100 * us / c.compute_us);
  }
  EXPECT_NEAR(c.compute_us, compute_us, 1e-6);
  // The step's Computing column of step_trace_time.csv is the compute kernels' time.
  EXPECT_NEAR(c.compute_us, 8873.756, 0.05);  // (the CSV rounds each duration to the ns)
  // The accuracy docs/device.md states (issue 38's targets): every kernel type with >= 1 % of
  // the compute time within 0.77-1.3x on its geometric mean, the geometric sd over all kernels
  // at most x1.6, at most 5 % of the time in types the model does not cost, and the predicted
  // compute time within 25 % of the real one.
  ASSERT_GE(c.costed, 170);
  EXPECT_LE(c.uncostedShare(), 0.05);
  EXPECT_LE(c.geometric_sd, 1.6);
  EXPECT_GT(c.model_us / c.compute_us, 0.75);
  EXPECT_LT(c.model_us / c.compute_us, 1.25);
  for (const auto& [type, t] : by_type) {
    if (t.real_us / c.compute_us < npu::kCalibrationShare) continue;
    EXPECT_GE(t.geomean, npu::kCalibrationLow) << type;
    EXPECT_LE(t.geomean, npu::kCalibrationHigh) << type;
  }
  EXPECT_TRUE(c.typesOutside(npu::kCalibrationShare, npu::kCalibrationLow, npu::kCalibrationHigh).empty());
  for (const char* seen : {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MatMulV2", "TransData", "Transpose"}) {
    EXPECT_TRUE(by_type.count(seen)) << seen;
  }
}

}  // namespace
}  // namespace npuscope
