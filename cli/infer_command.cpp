// `npuscope infer`: a checkpoint evaluated (eval mode, no grad): top-1 / top-5 and throughput.
#include <cstdio>
#include <functional>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "npuscope/workloads/trainer.h"

namespace npuscope::cli {
namespace {

int runInfer(const workloads::InferOptions& inf) {
  Progress progress;
  stopOnSignals();
  auto r = workloads::infer(inf, std::ref(progress));
  if (!r.isOk()) return loopFailed(r.status());
  std::printf("model            %s (%s)\n", r->model.c_str(), r->opt_level.c_str());
  std::printf("device           %s\n", inf.device.c_str());
  std::printf("top-1 accuracy   %.4f\n", r->top1);
  std::printf("top-5 accuracy   %.4f (%lld samples)\n", r->top5, static_cast<long long>(r->samples));
  std::printf("throughput       %.0f samples/s (%.2f s)\n", r->samples_per_second, r->seconds);
  if (r->run_id >= 0) {
    std::printf("recorded         run %lld in %s%s\n", static_cast<long long>(r->run_id), inf.db.c_str(),
                r->recording_error.empty() ? "" : ": failed (the error below)");
  }
  return recordingFailed(r->recording_error);
}

}  // namespace

void addInferCommand(Commands& cli) {
  auto o = std::make_shared<workloads::InferOptions>();
  workloads::InferOptions& inf = *o;
  auto* infer = cli.app().add_subcommand(kInferCommand.name, kInferCommand.description);
  infer->add_option("checkpoint", inf.checkpoint, "Checkpoint written by train --save")->required();
  infer->add_option("--device", inf.device, "npu:N or cpu")->capture_default_str();
  infer->add_option("--dataset", inf.dataset, "fashion-mnist or synthetic")->capture_default_str();
  infer->add_option("--data", inf.data_dir, "Directory with the Fashion-MNIST .gz files");
  infer->add_option("--batch-size", inf.batch_size, "Samples per batch")->capture_default_str();
  infer->add_option("--opt-level", inf.opt_level, "Evaluate at this AMP level (default: the checkpoint's)");
  infer->add_option("--db", inf.db, "Record the evaluation into this trace file");
  cli.onParsed(infer, [o] { return runInfer(*o); });
}

}  // namespace npuscope::cli
