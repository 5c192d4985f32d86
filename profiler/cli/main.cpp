// npuscope: the headless command-line workbench. Subcommands grow with the project; this file
// only parses and prints, the work lives in the libraries.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/fail.h"
#include "cli/import_command.h"
#include "cli/launch.h"
#include "cli/ops_command.h"
#include "cli/report.h"
#include "cli/run_command.h"
#include "dump_commands.h"
#include "npuscope/core/format.h"
#include "npuscope/amp/amp.h"
#include "npuscope/device/npu.h"
#include "npuscope/distributed/data_parallel.h"
#include "workloads/models.h"
#include "workloads/trainer.h"

namespace {

using npuscope::cli::fail;

// A progress bar with rate and ETA on a terminal, a plain line every 10% otherwise.
class Progress {
 public:
  Progress() : tty_(isatty(fileno(stderr)) != 0) {}
  void operator()(int64_t step, int64_t total, double loss, double rate) {
    const double eta = rate > 0 ? static_cast<double>(total - step) / rate : 0;
    if (tty_) {
      const int width = 30, filled = static_cast<int>(width * step / std::max<int64_t>(total, 1));
      std::fprintf(stderr, "\r[%.*s%*s] %lld/%lld loss %.4f  %.1f steps/s  ETA %.0fs", filled,
                   "##############################", width - filled, "", static_cast<long long>(step),
                   static_cast<long long>(total), loss, rate, eta);
      if (step == total) std::fprintf(stderr, "\n");
    } else if (step == total || step % std::max<int64_t>(total / 10, 1) == 0) {
      std::fprintf(stderr, "step %lld/%lld loss %.4f %.1f steps/s ETA %.0fs\n", static_cast<long long>(step),
                   static_cast<long long>(total), loss, rate, eta);
    }
  }

 private:
  bool tty_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"npuscope: profile and debug mixed-precision training on an (emulated) Ascend NPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "npuscope 0.1 (trace schema 4, libtorch 1.13)");

  npuscope::workloads::TrainOptions t;
  auto* train = app.add_subcommand("train", "Train a built-in model on the npu and print its result");
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
  bool no_db = false;
  train->add_flag("--no-db", no_db, "Do not record the run");
  train->add_option("--schedule", t.schedule,
                    "Profiler schedule: skip_first=N,wait=N,warmup=N,active=N,repeat=N (default: every step)");

  int nproc = 1, master_port = 0;
  train->add_option("--nproc", nproc,
                    "Data parallel: run N ranks on this machine, each on its share of the batch, gradients "
                    "averaged through the hccl backend; rank R records into DB with .rankR before its extension")
      ->capture_default_str();
  // A rank's place in the job, set by the --nproc launcher (hidden).
  train->add_option("--rank", t.rank)->group("");
  train->add_option("--world-size", t.world_size)->group("");
  train->add_option("--master-port", master_port)->group("");
  train->add_option("--job", t.job)->group("");

  npuscope::dumper::DumpCliOptions dump_opts;
  npuscope::dumper::addTrainDumpOptions(*train, dump_opts);

  npuscope::workloads::InferOptions inf;
  auto* infer = app.add_subcommand("infer", "Evaluate a checkpoint: top-1 / top-5 accuracy and throughput");
  infer->add_option("checkpoint", inf.checkpoint, "Checkpoint written by train --save")->required();
  infer->add_option("--device", inf.device, "npu:N or cpu")->capture_default_str();
  infer->add_option("--dataset", inf.dataset, "fashion-mnist or synthetic")->capture_default_str();
  infer->add_option("--data", inf.data_dir, "Directory with the Fashion-MNIST .gz files");
  infer->add_option("--batch-size", inf.batch_size, "Samples per batch")->capture_default_str();
  infer->add_option("--opt-level", inf.opt_level, "Evaluate at this AMP level (default: the checkpoint's)");
  infer->add_option("--db", inf.db, "Record the evaluation into this trace file");

  npuscope::cli::ReportOptions rep;
  auto* report = app.add_subcommand("report", "Print a run's op table, step and loss-scale summary, overflows, memory");
  std::vector<std::string> rep_files;
  report->add_option("file", rep_files, "Trace file (with --cluster: the ranks' trace files or folders of them)")
      ->required();
  report->add_option("--run", rep.run, "Run id (default: the latest run)");
  bool rep_cluster = false;
  std::string rep_job;
  double rep_threshold = 0.05;
  report->add_flag("--cluster", rep_cluster,
                   "The ranks of a multi-rank job as one cluster: step time breakdown per rank, slow rank, collectives");
  report->add_option("--job", rep_job, "With --cluster: the job to report (default: the newest in the files)");
  report->add_option("--slow-threshold", rep_threshold,
                     "With --cluster: name a slow rank when (max - min) / mean of the ranks' own time exceeds this")
      ->capture_default_str();
  report->add_option("--sort", rep.sort, "Sort ops by self, total, count, avg, name or device")->capture_default_str();
  report->add_option("--top", rep.top, "Show this many ops (0: all)")->capture_default_str();
  report->add_flag("--group-by-shape", rep.group_by_shape, "One row per op name and input shapes");
  bool rep_csv = false, rep_json = false;
  report->add_flag("--csv", rep_csv, "The op table as CSV on stdout");
  report->add_flag("--json", rep_json, "The whole report as JSON on stdout");

  npuscope::cli::ExportOptions exp;
  auto* exporter = app.add_subcommand("export", "Export a run as a chrome trace (Perfetto) or its op table as CSV");
  exporter->add_option("file", exp.file, "Trace file")->required();
  exporter->add_option("--run", exp.run, "Run id (default: the latest run)");
  exporter->add_option("--chrome", exp.chrome, "Write the chrome trace JSON here (split into OUT.1.json, ... when large)");
  exporter->add_option("--csv", exp.csv, "Write the op table as CSV here");
  exporter->add_option("--max-file-mb", exp.max_file_mb, "Largest chrome trace file before splitting")->capture_default_str();

  npuscope::cli::AdviseOptions adv;
  auto* advise_cmd = app.add_subcommand(
      "advise", "Findings over a run (recorded or imported): ops a real device would not run natively, dynamic "
                "shapes, cast overhead, skipped steps, loss-scale collapse or oscillation, memory near capacity");
  advise_cmd->add_option("file", adv.file, "Trace file")->required();
  advise_cmd->add_option("--run", adv.run, "Run id (default: the latest run)");
  advise_cmd->add_flag("--json", adv.json, "The findings as JSON on stdout");

  npuscope::cli::OpsOptions ops;
  auto* ops_cmd = app.add_subcommand(
      "ops", "Operator coverage on a real device: of a built-in model's training step, or of a recorded or imported "
             "run's ops (ops FILE: e.g. a GPU trace before porting)");
  ops_cmd->add_option("file", ops.file, "Trace file (recorded or imported); without it, a built-in model's step");
  ops_cmd->add_option("--run", ops.run, "Run id in the file (default: the latest run)");
  ops_cmd->add_option("--model", ops.model, "Built-in model")->capture_default_str();
  ops_cmd->add_option("--device", ops.device, "npu:N")->capture_default_str();
  ops_cmd->add_option("--dtype", ops.dtype, "float32, float16 or bfloat16")->capture_default_str();
  ops_cmd->add_option("--batch-size", ops.batch_size, "Samples in the step")->capture_default_str();
  bool ops_csv = false;
  ops_cmd->add_flag("--csv", ops_csv, "CSV on stdout");

  npuscope::cli::RunOptions run;
  auto* run_cmd = app.add_subcommand(
      "run", "Run your own Python training script on the npu under recording, then print its report");
  run_cmd->add_option("--db", run.db, "Trace file the run is recorded into")->capture_default_str();
  run_cmd->add_option("--dump-config", run.dump_config, "Dump op tensors as this acl.json says (else ACL_DUMP_DATA=1 "
                                                        "with ./acl.json)");
  run_cmd->add_flag("--transfer-to-npu", run.transfer_to_npu,
                    "Run an unmodified CUDA script: cuda devices, torch.cuda.* and torch.cuda.amp mean the npu");
  run_cmd->add_option("--schedule", run.schedule, "Profiler schedule: skip_first=N,wait=N,warmup=N,active=N,repeat=N");
  bool run_no_report = false;
  run_cmd->add_flag("--no-report", run_no_report, "Do not print the report after the script");
  run_cmd->add_option("script", run.script, "-- script.py [its arguments...]")->required();
  run_cmd->footer("Example: npuscope run --db run.db -- train.py --epochs 1\n"
                  "The script runs with /usr/bin/python3 (NPUSCOPE_PYTHON overrides) and keeps its exit status.");

  npuscope::cli::ImportOptions imp;
  auto* import_cmd = app.add_subcommand(
      "import", "Read a trace another profiler wrote (Kineto / torch.profiler JSON, torch_npu) into a trace file");
  import_cmd->add_option("path", imp.path,
                         "A *.json or *.json.gz trace, a torch_npu *_ascend_pt folder (or its ASCEND_PROFILER_OUTPUT), "
                         "or a folder of ranks")
      ->required();
  import_cmd->add_option("--db", imp.db, "Trace file to add the runs to (default: NAME.npuscope.db here)");
  import_cmd->add_flag("-q,--quiet", imp.quiet, "No progress");

  int exit_code = 0;  // set by the dump / compare callbacks
  npuscope::dumper::addDumpCommands(app, exit_code);

  CLI11_PARSE(app, argc, argv);

  if (import_cmd->parsed()) return npuscope::cli::runImport(imp);
  if (run_cmd->parsed()) {
    run.report = !run_no_report;
    return npuscope::cli::runScript(run);
  }
  if (ops_cmd->parsed()) {
    if (ops_csv) ops.format = "csv";
    return npuscope::cli::runOps(ops);
  }

  if (report->parsed()) {
    if (rep_csv && rep_json) return fail("report: --csv and --json exclude each other");
    rep.format = rep_csv ? "csv" : rep_json ? "json" : "text";
    if (rep_cluster) {
      if (rep_csv) return fail("report --cluster: --csv is not available (text or --json)");
      return npuscope::cli::runClusterReport(rep_files, rep_job, rep_threshold, rep_json);
    }
    if (!rep_job.empty()) return fail("report: --job needs --cluster");
    if (rep_files.size() != 1) {
      return fail("report: one trace file expected, got " + std::to_string(rep_files.size()) +
                  " (several only with --cluster)");
    }
    rep.file = rep_files.front();
    return npuscope::cli::runReport(rep);
  }
  if (exporter->parsed()) return npuscope::cli::runExport(exp);
  if (advise_cmd->parsed()) return npuscope::cli::runAdvise(adv);
  // Ctrl-C / SIGTERM of train and infer: the loop stops before its next step (batch) and ends the
  // run "failed"; a second one ends the process at once (the next writer to open the file ends
  // that run then).
  // Training (inference) went to its end but its recording failed (a full disk): after the
  // summary, the error line, exit 1.
  auto recordingFailed = [](const std::string& error) {
    if (error.empty()) return 0;
    std::fflush(stdout);
    return fail(error);
  };
  auto stopOnSignals = [] {
    for (int sig : {SIGINT, SIGTERM}) {
      std::signal(sig, [](int s) {
        if (npuscope::workloads::stopRequested() != 0) std::_Exit(128 + s);
        npuscope::workloads::requestStop(s);
      });
    }
  };
  if (infer->parsed()) {
    Progress progress;
    stopOnSignals();
    auto r = npuscope::workloads::infer(inf, std::ref(progress));
    if (!r.isOk()) {
      const int sig = npuscope::workloads::stopRequested();
      const int code = fail(r.status().message());
      return sig != 0 ? 128 + sig : code;
    }
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
  if (train->parsed()) {
    if (nproc < 1 || nproc > 64) return fail("--nproc " + std::to_string(nproc) + ": expected 1 to 64 ranks");
    if (nproc > 1) {
      if (t.world_size > 1) return fail("--nproc: not with --world-size (the launcher sets it)");
      if (t.batch_size % nproc != 0) {
        return fail("--batch-size " + std::to_string(t.batch_size) + ": expected a multiple of --nproc " +
                    std::to_string(nproc) + " (each rank takes an equal share of the batch)");
      }
      return npuscope::cli::launchRanks(argc, argv, nproc);
    }
    if (no_db) t.db.clear();
    std::unique_ptr<npuscope::distributed::DataParallel> dp;
    if (t.world_size > 1) {  // one rank of a --nproc job
      if (!t.db.empty()) t.db = npuscope::cli::rankDbPath(t.db, t.rank);
      auto joined = npuscope::distributed::DataParallel::join("127.0.0.1", master_port, t.rank, t.world_size,
                                                              std::chrono::seconds(300));
      if (!joined.isOk()) return fail(joined.status().message());
      dp = std::move(joined).value();
      npuscope::distributed::DataParallel* d = dp.get();
      t.average_gradients = [d](const std::vector<at::Tensor>& grads) { d->averageGradients(grads); };
      npuscope::amp::setOverflowReducer([d](bool local) { return d->anyOverflow(local); });
    }
    auto dumping = npuscope::dumper::configureDumperFromCli(dump_opts);
    if (!dumping.isOk()) return fail(dumping.status().message());
    t.dump = *dumping;
    Progress progress;
    stopOnSignals();
    std::fprintf(stderr, "training %s on %s (%s, %s, %s lr %g, batch %lld)\n", t.model.c_str(), t.device.c_str(),
                 t.dataset.c_str(), t.amp.opt_level.c_str(), t.optimizer.c_str(), t.lr,
                 static_cast<long long>(t.batch_size));
    // Ranks after the first train quietly: one progress line for the job.
    auto r = npuscope::workloads::train(
        t, t.rank > 0 ? npuscope::workloads::ProgressFn() : npuscope::workloads::ProgressFn(std::ref(progress)));
    if (!r.isOk()) {
      const int sig = npuscope::workloads::stopRequested();
      const int code = fail(r.status().message());
      return sig != 0 ? 128 + sig : code;
    }
    const auto mem = npuscope::npu::memory_stats(0);
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
                  npuscope::formatBytes(r->dumped_bytes).c_str());
      if (r->dumped_shared_bytes > 0) {
        std::printf("; %s of it repeat a tensor earlier in their step and share its stored bytes",
                    npuscope::formatBytes(r->dumped_shared_bytes).c_str());
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
  return exit_code;
}
