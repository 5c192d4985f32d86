// `npuscope train`: a built-in model on the npu (or cpu) under AMP and a fused optimizer, recorded
// into a trace file; `--nproc N` runs N data-parallel ranks through the hccl backend.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

#include "cli/commands.h"
#include "cli/launch.h"
#include "npuscope/analysis/cluster.h"
#include "cli/progress.h"
#include "npuscope/amp/amp.h"
#include "npuscope/device/npu.h"
#include "npuscope/distributed/data_parallel.h"
#include "npuscope/dumper/dumper.h"
#include "npuscope/store/format.h"
#include "npuscope/workloads/trainer.h"

namespace npuscope::cli {
namespace {

struct TrainArgs {
  workloads::TrainOptions t;
  bool no_db = false;
  int nproc = 1, master_port = 0;
  dumper::DumpRequest dump;
};

int runTrain(TrainArgs& a, int argc, char** argv) {
  workloads::TrainOptions& t = a.t;
  if (a.nproc < 1 || a.nproc > 64) return fail("--nproc " + std::to_string(a.nproc) + ": expected 1 to 64 ranks");
  if (a.nproc > 1) {
    if (t.world_size > 1) return fail("--nproc: not with --world-size (the launcher sets it)");
    if (t.batch_size % a.nproc != 0) {
      return fail("--batch-size " + std::to_string(t.batch_size) + ": expected a multiple of --nproc " +
                  std::to_string(a.nproc) + " (each rank takes an equal share of the batch)");
    }
    return launchRanks(argc, argv, a.nproc);
  }
  if (a.no_db) t.db.clear();
  std::unique_ptr<distributed::DataParallel> dp;
  if (t.world_size > 1) {  // one rank of a --nproc job
    if (!t.db.empty()) t.db = cluster::rankFilePath(t.db, t.rank);
    auto joined = distributed::DataParallel::join("127.0.0.1", a.master_port, t.rank, t.world_size,
                                                            std::chrono::seconds(300));
    if (!joined.isOk()) return fail(joined.status().message());
    dp = std::move(joined).value();
    distributed::DataParallel* d = dp.get();
    t.average_gradients = [d](const std::vector<at::Tensor>& grads) { d->averageGradients(grads); };
    amp::setOverflowReducer([d](bool local) { return d->anyOverflow(local); });
  }
  auto dumping = dumper::configureDumper(a.dump);
  if (!dumping.isOk()) return fail(dumping.status().message());
  t.dump = *dumping;
  Progress progress;
  stopOnSignals();
  std::fprintf(stderr, "training %s on %s (%s, %s, %s lr %g, batch %lld)\n", t.model.c_str(), t.device.c_str(),
               t.dataset.c_str(), t.amp.opt_level.c_str(), t.optimizer.c_str(), t.lr,
               static_cast<long long>(t.batch_size));
  // Ranks after the first train quietly: one progress line for the job.
  auto r = workloads::train(
      t, t.rank > 0 ? workloads::ProgressFn() : workloads::ProgressFn(std::ref(progress)));
  if (!r.isOk()) return loopFailed(r.status());
  const auto mem = npu::memory_stats(0);
  std::printf("model            %s\n", t.model.c_str());
  std::printf("device           %s\n", t.device.c_str());
  if (t.world_size > 1) {
    std::printf("rank             %d of %d (job %s, batch share %lld)\n", t.rank, t.world_size, t.job.c_str(),
                static_cast<long long>(t.batch_size / t.world_size));
  }
  std::printf("amp              %s, %s\n", r->opt_level.c_str(), r->optimizer.c_str());
  std::printf("steps            %lld", static_cast<long long>(r->steps));
  if (r->first_step > 0) std::printf(" (resumed after step %lld)", static_cast<long long>(r->first_step));
  std::printf("\nskipped steps    %lld\n", static_cast<long long>(r->skipped_steps));
  std::printf("final loss       %.4f\n", r->final_loss);
  std::printf("final loss scale %g\n", r->final_loss_scale);
  std::printf("test accuracy    %.4f (top-5 %.4f, %lld samples)\n", r->test_accuracy, r->test_top5,
              static_cast<long long>(r->test_samples));
  std::printf("throughput       %.0f samples/s (%.1f s)\n", r->samples_per_second, r->seconds);
  std::printf("npu:0 peak mem   %.1f MiB\n", static_cast<double>(mem.peak_allocated) / (1 << 20));
  if (!t.save.empty()) std::printf("checkpoint       %s\n", t.save.c_str());
  if (r->run_id >= 0 && !r->recording_error.empty()) {
    std::printf("recorded         run %lld in %s: failed (the error below)\n",
                static_cast<long long>(r->run_id), t.db.c_str());
  } else if (r->run_id >= 0) {
    std::printf("recorded         run %lld in %s (%llu ops", static_cast<long long>(r->run_id), t.db.c_str(),
                static_cast<unsigned long long>(r->recorded_ops));
    if (r->dropped_records > 0) std::printf(", %llu dropped", static_cast<unsigned long long>(r->dropped_records));
    std::printf("); see: npuscope report %s\n", t.db.c_str());
  }
  if (t.dump) {
    std::printf("dumped           %llu tensors (%s", static_cast<unsigned long long>(r->dumped_tensors),
                formatBytes(r->dumped_bytes).c_str());
    if (r->dumped_shared_bytes > 0) {
      std::printf("; %s of it repeat a tensor earlier in their step and share its stored bytes",
                  formatBytes(r->dumped_shared_bytes).c_str());
    }
    std::printf(") into %s", t.db.c_str());
    if (!r->dump_directory.empty()) std::printf(" and %s", r->dump_directory.c_str());
    std::printf("; see: npuscope dump list %s\n", t.db.c_str());
    if (!r->dump_error.empty()) {  // after the summary's lines, also when they go to a pipe
      std::fflush(stdout);
      std::fprintf(stderr, "npuscope: warning: dumping stopped: %s\n", r->dump_error.c_str());
    }
  }
  return recordingFailed(r->recording_error);
}

}  // namespace

void addTrainCommand(Commands& cli) {
  auto o = std::make_shared<TrainArgs>();
  workloads::TrainOptions& t = o->t;
  auto* train = cli.app().add_subcommand(kTrainCommand.name, kTrainCommand.description);
  train->add_option("--model", t.model, "Built-in model: mlp, cnn, resnet or transformer")->capture_default_str();
  train->add_option("--device", t.device, "npu:N or cpu")->capture_default_str();
  train->add_option("--dataset", t.dataset, "fashion-mnist or synthetic")->capture_default_str();
  train->add_option("--data", t.data_dir, "Directory with the Fashion-MNIST .gz files (default: Debian's package)");
  train->add_option("--epochs", t.epochs, "Passes over the training set")->capture_default_str();
  train->add_option("--steps", t.max_steps, "Stop after this many steps (0: all)")->capture_default_str();
  train->add_option("--batch-size", t.batch_size, "Samples per step")->capture_default_str();
  train->add_option("--optimizer", t.optimizer,
                    "Fused optimizer: sgd, adam, adamw, adamp, lamb, adadelta, rmsprop or rmsprop_tf")
      ->capture_default_str();
  train->add_option("--lr", t.lr, "Learning rate")->capture_default_str();
  train->add_option("--momentum", t.momentum, "Momentum (sgd, rmsprop, rmsprop_tf)")->capture_default_str();
  train->add_option("--weight-decay", t.weight_decay, "Weight decay")->capture_default_str();
  train->add_option("--seed", t.seed, "Seed of initial weights and data order")->capture_default_str();
  // AMP (apex's names; unset knobs take the opt level's preset).
  auto& a = t.amp;
  train->add_option("--opt-level", a.opt_level, "AMP opt level O0, O1, O2 or O3")->capture_default_str();
  train->add_option("--loss-scale", a.loss_scale, "\"dynamic\" or a static scale (default: the level's)");
  train->add_option("--dynamic-init-scale", a.dynamic_init_scale, "First dynamic loss scale (2^16)");
  train->add_option("--scale-growth-factor", a.scale_growth_factor, "Dynamic scale growth factor (2)");
  train->add_option("--scale-backoff-factor", a.scale_backoff_factor, "Dynamic scale backoff factor (0.5)");
  train->add_option("--scale-window", a.scale_window, "Clean steps before the scale grows (2000)");
  train->add_option("--min-loss-scale", a.min_loss_scale, "Floor of the dynamic scale");
  train->add_option("--max-loss-scale", a.max_loss_scale, "Cap of the dynamic scale (2^24)");
  train->add_option("--keep-batchnorm-fp32", a.keep_batchnorm_fp32, "true/false (O2/O3)");
  train->add_option("--master-weights", a.master_weights, "true/false: fp32 master weights (O2)");
  train->add_option("--combine-grad", a.combine_grad, "true/false: one flat gradient buffer per dtype");
  train->add_option("--low-precision", a.low_precision, "float16 or bfloat16")->capture_default_str();
  train->add_option("--overflow-check-by", a.overflow_check, "auto, float_status or non_finite")->capture_default_str();
  train->add_option("--amp-verbosity", a.verbosity, "0 silent, 1 summaries, 2 every skipped step")->capture_default_str();
  train->add_option("--save", t.save, "Write a checkpoint (model, optimizer, amp, step) at the end");
  train->add_option("--resume", t.resume, "Continue from a checkpoint of the same configuration");
  t.db = "npuscope.db";
  train->add_option("--db", t.db, "Trace file the run is recorded into (a file holds many runs)")->capture_default_str();
  train->add_flag("--no-db", o->no_db, "Do not record the run");
  train->add_option("--schedule", t.schedule,
                    "Profiler schedule: skip_first=N,wait=N,warmup=N,active=N,repeat=N (default: every step)");

  train->add_option("--nproc", o->nproc,
                    "Data parallel: run N ranks on this machine, each on its share of the batch, gradients "
                    "averaged through the hccl backend; rank R records into DB with .rankR before its extension")
      ->capture_default_str();
  // A rank's place in the job, set by the --nproc launcher (hidden).
  train->add_option("--rank", t.rank)->group("");
  train->add_option("--world-size", t.world_size)->group("");
  train->add_option("--master-port", o->master_port)->group("");
  train->add_option("--job", t.job)->group("");

  dumper::DumpRequest& d = o->dump;
  train->add_option("--dump-config", d.dump_config, "Dump ops as configured in this acl.json (as ACL_DUMP_DATA=1)");
  train->add_option("--overflow-check", d.overflow_check,
                    "Overflow check mode: dump the first N overflowing ops with their inputs and outputs");
  train->add_flag("--dump-force", d.force,
                  "Dump even when the free space cannot hold the requested steps (as \"force\": true)");
  cli.onParsed(train, [o, &cli] { return runTrain(*o, cli.argc(), cli.argv()); });
}

}  // namespace npuscope::cli
