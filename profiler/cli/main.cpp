// npuscope: the headless command-line workbench. Subcommands grow with the project; this file
// only parses and prints, the work lives in the libraries.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "npuscope/device/npu.h"
#include "workloads/models.h"
#include "workloads/trainer.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "npuscope: error: %s\n", message.c_str());
  return 1;
}

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

  npuscope::workloads::TrainOptions t;
  auto* train = app.add_subcommand("train", "Train a built-in model on the npu and print its result");
  train->add_option("--model", t.model, "Built-in model: mlp or cnn")->capture_default_str();
  train->add_option("--device", t.device, "npu:N or cpu")->capture_default_str();
  train->add_option("--dataset", t.dataset, "fashion-mnist or synthetic")->capture_default_str();
  train->add_option("--data", t.data_dir, "Directory with the Fashion-MNIST .gz files (default: Debian's package)");
  train->add_option("--epochs", t.epochs, "Passes over the training set")->capture_default_str();
  train->add_option("--steps", t.max_steps, "Stop after this many steps (0: all)")->capture_default_str();
  train->add_option("--batch-size", t.batch_size, "Samples per step")->capture_default_str();
  train->add_option("--lr", t.lr, "Learning rate (SGD with momentum)")->capture_default_str();
  train->add_option("--momentum", t.momentum, "SGD momentum")->capture_default_str();
  train->add_option("--seed", t.seed, "Seed of initial weights and data order")->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  if (train->parsed()) {
    Progress progress;
    std::fprintf(stderr, "training %s on %s (%s, batch %lld, lr %g)\n", t.model.c_str(), t.device.c_str(),
                 t.dataset.c_str(), static_cast<long long>(t.batch_size), t.lr);
    auto r = npuscope::workloads::train(t, std::ref(progress));
    if (!r.isOk()) return fail(r.status().message());
    const auto mem = npuscope::npu::memory_stats(0);
    std::printf("model            %s\n", t.model.c_str());
    std::printf("device           %s\n", t.device.c_str());
    std::printf("steps            %lld\n", static_cast<long long>(r->steps));
    std::printf("final loss       %.4f\n", r->final_loss);
    std::printf("test accuracy    %.4f (%lld samples)\n", r->test_accuracy, static_cast<long long>(r->test_samples));
    std::printf("throughput       %.0f samples/s (%.1f s)\n", r->samples_per_second, r->seconds);
    std::printf("npu:0 peak mem   %.1f MiB\n", static_cast<double>(mem.peak_allocated) / (1 << 20));
  }
  return 0;
}
