// The training and evaluation loops behind `npuscope train`: a built-in model on Fashion-MNIST
// (or synthetic data) on an npu or the CPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "npuscope/core/status.h"

namespace npuscope::workloads {

struct TrainOptions {
  std::string model = "cnn";
  std::string device = "npu:0";         // "npu:N" or "cpu"
  std::string dataset = "fashion-mnist";  // or "synthetic"
  std::string data_dir;                 // default: Debian's dataset-fashion-mnist
  int epochs = 1;
  int64_t max_steps = 0;                // 0: all steps of all epochs
  int64_t batch_size = 64;
  double lr = 0.01;
  double momentum = 0.9;
  uint64_t seed = 0;
  int64_t synthetic_size = 2048;
  std::string db;        // trace file to record into ("": no recording)
  std::string schedule;  // profiler schedule, e.g. "wait=1,warmup=1,active=3" ("": every step)
  bool dump = false;     // the dumper is configured (ACL_DUMP_DATA / --dump-config): capture ops
};

struct TrainResult {
  int64_t steps = 0;
  double final_loss = 0;
  double test_accuracy = 0;
  int64_t test_samples = 0;
  double seconds = 0;
  double samples_per_second = 0;
  int64_t run_id = -1;        // the run in `db`, when recorded
  uint64_t recorded_ops = 0;
  uint64_t dropped_records = 0;
  uint64_t dumped_tensors = 0;
  uint64_t dumped_bytes = 0;
  std::string dump_directory;  // Ascend dump files, when the config has a dump_path
  std::string dump_error;      // why dumping stopped early, if it did
};

// Progress callback: step (1-based), total steps, current loss, steps/s so far.
using ProgressFn = std::function<void(int64_t step, int64_t total, double loss, double steps_per_s)>;

// Checks the options (named errors for bad values), loads the data and trains.
StatusOr<TrainResult> train(const TrainOptions& options, const ProgressFn& progress);

}  // namespace npuscope::workloads
