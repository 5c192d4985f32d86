// The cost model against a real card's kernels: each row of a torch_npu kernel_details.csv
// (its op type, input / output shapes and dtypes as CANN prints them, and the measured
// duration) is costed as the emulator costs the aten op it implements, and the predicted / real
// ratios are summarised per kernel type and overall — `npuscope calibrate`, and the check a user
// with a card runs of the model on their hardware. docs/device.md, "Calibration".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npuscope::npu {

// One kernel_details.csv row, cells as written ("32,3,224,224;64,3,11,11", "FLOAT16;FLOAT").
struct RealKernel {
  std::string type;           // Type: Conv2D, MatMulV2, ...
  std::string core;           // Accelerator Core
  double real_us = 0;         // Duration(us)
  std::string input_shapes, output_shapes, input_dtypes;
  std::string output_dtypes;                 // none: the first input's
  std::string input_formats, output_formats;  // NCHW, NC1HWC0, FRACTAL_Z, ND (TransData's kind)
};

// The model's duration of one kernel, -1 when the model does not cost its type (or its shapes
// are not what the type's kernel takes).
int64_t modeledKernelNs(const RealKernel& k);

struct CalibrationType {
  std::string type;
  int64_t calls = 0;
  double real_us = 0, model_us = 0;
  double geomean = 0, min = 0, max = 0;  // of predicted / real per kernel
};

struct Calibration {
  std::vector<CalibrationType> types;  // costed types, by real time (largest first)
  int64_t costed = 0;                  // kernels costed
  double real_us = 0, model_us = 0;    // over the costed kernels
  double geomean = 0, geometric_sd = 0;  // of predicted / real over every costed kernel (sd as a factor)
  double compute_us = 0;               // every compute kernel's real time (communication left out)
  std::vector<std::pair<std::string, double>> uncosted;  // type, real µs; largest first
  double uncostedShare() const;        // of compute_us
  // Types with at least `share` of compute_us whose geometric mean lies outside [low, high].
  std::vector<std::string> typesOutside(double share, double low, double high) const;
};

// The model's stated accuracy (docs/device.md): each kernel type with >= 1 % of the compute
// time within 0.77-1.3x on its geometric mean.
inline constexpr double kCalibrationShare = 0.01, kCalibrationLow = 0.77, kCalibrationHigh = 1.3;

// Communication kernels (hcom_*, COMMUNICATION / HCCL cores) are left out: not compute.
Calibration calibrate(const std::vector<RealKernel>& kernels);

}  // namespace npuscope::npu
