// The subcommands that run torch (train on the emulated npu, evaluate, probe operator coverage,
// check the cost model). They live in a second executable, npuscope-torch: the `npuscope` that
// users start loads no libtorch, so report, import, export, compare and the others start in
// milliseconds; it hands these subcommands to npuscope-torch with its own command line
// (forward.cpp). Their names and descriptions are here once, for both executables' --help.
#pragma once

namespace npuscope::cli {

struct TorchCommand {
  const char* name;
  const char* description;
};

inline constexpr TorchCommand kTrainCommand{"train", "Train a built-in model on the npu and print its result"};
inline constexpr TorchCommand kInferCommand{"infer", "Evaluate a checkpoint: top-1 / top-5 accuracy and throughput"};
inline constexpr TorchCommand kOpsCommand{
    "ops",
    "Operator coverage on a real device: of a built-in model's training step, or of a recorded or imported "
    "run's ops (ops FILE: e.g. a GPU trace before porting)"};
inline constexpr TorchCommand kCalibrateCommand{
    "calibrate", "Check the cost model against a real card: a torch_npu export's kernels, predicted vs real"};

}  // namespace npuscope::cli
