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
  for (const char* c : {"Type", "Duration(us)", "Input Shapes", "Output Shapes", "Input Data Types", "Accelerator Core"}) {
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
  // The bounds docs/device.md states: the costed kernels' total within 2x of the real one, the
  // per-kernel geometric mean too, and each Cube kernel type's.
  ASSERT_GE(c.costed, 100);
  EXPECT_GT(c.model_us / c.real_us, 0.5);
  EXPECT_LT(c.model_us / c.real_us, 2.0);
  EXPECT_GT(c.geomean, 0.5);
  EXPECT_LT(c.geomean, 2.0);
  for (const char* cube : {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MatMulV2"}) {
    ASSERT_TRUE(by_type.count(cube)) << cube;
    EXPECT_GT(by_type[cube].geomean, 0.5) << cube;
    EXPECT_LT(by_type[cube].geomean, 2.0) << cube;
  }
}

}  // namespace
}  // namespace npuscope
