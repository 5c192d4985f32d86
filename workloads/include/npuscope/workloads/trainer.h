// The training and evaluation loops behind `npuscope train` and `npuscope infer`: a built-in
// model on Fashion-MNIST (or synthetic data) on an npu or the CPU, with apex-style AMP, a fused
// optimizer, optional recording into a trace file and checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "npuscope/store/status.h"

namespace at {
class Tensor;
}

namespace npuscope::workloads {

// AMP knobs as the CLI takes them; unset ones take the opt level's preset (amp.h).
struct AmpFlags {
  std::string opt_level = "O0";
  std::string loss_scale;  // "dynamic" or a number; "": preset
  std::optional<double> dynamic_init_scale, scale_growth_factor, scale_backoff_factor, min_loss_scale, max_loss_scale;
  std::optional<int64_t> scale_window;
  std::optional<bool> keep_batchnorm_fp32, master_weights, combine_grad;
  std::string low_precision = "float16";  // or bfloat16
  std::string overflow_check = "auto";    // auto | float_status | non_finite
  int verbosity = 1;
};

struct TrainOptions {
  std::string model = "cnn";
  std::string device = "npu:0";           // "npu:N" or "cpu"
  std::string dataset = "fashion-mnist";  // or "synthetic"
  std::string data_dir;                   // default: Debian's dataset-fashion-mnist
  int epochs = 1;
  int64_t max_steps = 0;                  // 0: all steps of all epochs
  int64_t batch_size = 64;
  std::string optimizer = "sgd";          // sgd adam adamw adamp lamb adadelta rmsprop rmsprop_tf (NpuFused*)
  double lr = 0.01;
  double momentum = 0.9;                  // sgd, rmsprop
  double weight_decay = 0;
  uint64_t seed = 0;
  int64_t synthetic_size = 2048;
  AmpFlags amp;
  std::string db;        // trace file to record into ("": no recording)
  std::string schedule;  // profiler schedule, e.g. "wait=1,warmup=1,active=3" ("": every step)
  bool dump = false;     // the dumper is configured (ACL_DUMP_DATA / --dump-config): capture ops
  std::string save;      // checkpoint written at the end (model, optimizer, amp, step)
  std::string resume;    // checkpoint to continue from (same model, optimizer, amp and data)
  // Data parallel (npuscope train --nproc N): this process is rank `rank` of `world_size`. Each
  // step it takes its 1/world_size share of the global batch (--batch-size), and after backward
  // `average_gradients` (e.g. distributed::DataParallel) averages the model's gradients over the
  // ranks; the caller also installs AMP's overflow reducer. The run records rank, size and job.
  int rank = 0;
  int world_size = 1;
  std::string job;
  std::function<void(const std::vector<at::Tensor>&)> average_gradients;
};

struct TrainResult {
  int64_t steps = 0;          // steps of this invocation
  int64_t first_step = 0;     // global index of its first step (> 0 when resumed)
  int64_t skipped_steps = 0;  // steps AMP skipped (overflow)
  double final_loss = 0;
  double final_loss_scale = 1;
  std::string opt_level, optimizer;
  double test_accuracy = 0;
  double test_top5 = 0;
  int64_t test_samples = 0;
  double seconds = 0;
  double samples_per_second = 0;
  int64_t run_id = -1;        // the run in `db`, when recorded
  uint64_t recorded_ops = 0;
  uint64_t dropped_records = 0;
  uint64_t dumped_tensors = 0;
  uint64_t dumped_bytes = 0;
  uint64_t dumped_shared_bytes = 0;  // of those, stored in the trace file once (same bytes earlier in the step)
  std::string dump_directory;  // Ascend dump files, when the config has a dump_path
  std::string dump_error;      // why dumping stopped early, if it did
  // The recording failed (its trace file's disk filled) while training went on to the end: what
  // the file lacks and where the rest is. The run is marked failed; the caller reports it.
  std::string recording_error;
};

// Progress callback: step (1-based), total steps, current loss, steps/s so far.
using ProgressFn = std::function<void(int64_t step, int64_t total, double loss, double steps_per_s)>;

// Checks the options (named errors for bad values), loads the data and trains.
StatusOr<TrainResult> train(const TrainOptions& options, const ProgressFn& progress);

// Asks a running train() to stop before its next step: the run ends "failed" with
// {"error": "interrupted (SIGINT)"} (or SIGTERM), everything recorded so far kept, and train()
// returns that error. Async-signal-safe (one atomic store): for the CLI's signal handlers.
void requestStop(int signal_number);
// The signal a stop was requested with (0: none).
int stopRequested();

struct InferOptions {
  std::string checkpoint;  // written by train --save
  std::string device = "npu:0";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t batch_size = 256;
  std::string opt_level;   // "" : the checkpoint's; O0..O3 to evaluate at another level
  std::string db;
  int64_t synthetic_size = 2048;
};

struct InferResult {
  std::string model, opt_level;
  double top1 = 0, top5 = 0;
  int64_t samples = 0;
  double seconds = 0, samples_per_second = 0;
  int64_t run_id = -1;
  std::string recording_error;  // as TrainResult's
};

// Evaluation as in the online-inference guide: load, eval(), no grad, top-1 / top-5.
StatusOr<InferResult> infer(const InferOptions& options, const ProgressFn& progress);

}  // namespace npuscope::workloads
