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
  // A trace file instead of a built-in model: the ops a recorded or imported run (a GPU trace,
  // a user's script) called, each judged against torch_npu's list. `run`: -1 the latest.
  std::string file;
  int64_t run = -1;
};

int runOps(const OpsOptions& options);

}  // namespace npuscope::cli
