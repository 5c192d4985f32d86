// `npuscope ops`: operator coverage analysis of a model's training step, as a porting engineer
// does it before moving a model to the NPU: every ATen op the step uses (forward, backward,
// optimizer), how often, with which dtypes, and how the emulated NPU runs it.
#pragma once

#include <cstdint>
#include <string>

namespace npuscope::cli {

struct OpsOptions {
  std::string model = "cnn";
  std::string device = "npu:0";
  std::string dtype = "float32";  // float32 | float16 | bfloat16: the model's parameters and inputs
  int64_t batch_size = 64;
  std::string format = "text";  // text | csv
};

int runOps(const OpsOptions& options);

}  // namespace npuscope::cli
