#include "workloads/trainer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "npuscope/core/clock.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dumper.h"
#include "npuscope/profiler/session.h"
#include "workloads/fashion_mnist.h"
#include "workloads/models.h"

namespace npuscope::workloads {
namespace {

StatusOr<c10::Device> parseDevice(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  ASSIGN_OR_RETURN(int index, npu::parse_device(text));
  return c10::Device(npu::kDeviceType, static_cast<c10::DeviceIndex>(index));
}

Status validate(const TrainOptions& o) {
  if (o.epochs < 1) return invalidArgument("--epochs " + std::to_string(o.epochs) + ": expected at least 1");
  if (o.batch_size < 1) return invalidArgument("--batch-size " + std::to_string(o.batch_size) + ": expected at least 1");
  if (!(o.lr > 0)) return invalidArgument("--lr " + std::to_string(o.lr) + ": expected a positive learning rate");
  if (o.max_steps < 0) return invalidArgument("--steps " + std::to_string(o.max_steps) + ": expected 0 (all) or more");
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic") {
    return invalidArgument("--dataset '" + o.dataset + "': expected fashion-mnist or synthetic");
  }
  return Status::ok();
}

double evaluate(Model& model, const Dataset& test, c10::Device device, int64_t batch) {
  torch::NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size(); i += batch) {
    const int64_t n = std::min(batch, test.size() - i);
    at::Tensor x = test.images.narrow(0, i, n).to(device);
    at::Tensor pred = model.forward(x).argmax(1).cpu();
    correct += pred.eq(test.labels.narrow(0, i, n)).sum().item<int64_t>();
  }
  model.train();
  return test.size() > 0 ? static_cast<double>(correct) / static_cast<double>(test.size()) : 0.0;
}

std::string configJson(const TrainOptions& o) {
  return nlohmann::json{{"model", o.model},          {"device", o.device},     {"dataset", o.dataset},
                        {"epochs", o.epochs},        {"steps", o.max_steps},   {"batch_size", o.batch_size},
                        {"lr", o.lr},                {"momentum", o.momentum}, {"seed", o.seed},
                        {"schedule", o.schedule}}
      .dump();
}

std::string resultsJson(const TrainResult& r) {
  return nlohmann::json{{"steps", r.steps},
                        {"final_loss", r.final_loss},
                        {"test_accuracy", r.test_accuracy},
                        {"test_samples", r.test_samples},
                        {"seconds", r.seconds},
                        {"samples_per_second", r.samples_per_second}}
      .dump();
}

}  // namespace

StatusOr<TrainResult> train(const TrainOptions& o, const ProgressFn& progress) {
  RETURN_IF_ERROR(validate(o));
  ASSIGN_OR_RETURN(c10::Device device, parseDevice(o.device));
  torch::manual_seed(o.seed);  // before the model: its initial weights come from this seed
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, makeModel(o.model));

  Dataset train_set, test_set;
  if (o.dataset == "synthetic") {
    train_set = syntheticDataset(o.synthetic_size, o.seed + 1);
    test_set = syntheticDataset(std::max<int64_t>(o.synthetic_size / 4, 1), o.seed + 2);
  } else {
    const std::string dir = o.data_dir.empty() ? kDefaultFashionMnistDir : o.data_dir;
    ASSIGN_OR_RETURN(train_set, loadFashionMnist(dir, true));
    ASSIGN_OR_RETURN(test_set, loadFashionMnist(dir, false));
  }

  // Recording: the file is opened (and refused when it is not a trace file) before any work.
  std::unique_ptr<profiler::RecordingSession> session;
  if (!o.db.empty()) {
    profiler::SessionOptions so;
    so.path = o.db;
    if (!o.schedule.empty()) {
      auto sch = profiler::Schedule::parse(o.schedule);
      if (!sch.isOk()) return invalidArgument("--schedule: " + sch.status().message());
      so.schedule = *sch;
    }
    so.run.command = "train";
    so.run.model = o.model;
    so.run.device = o.device;
    so.run.opt_level = "O0";
    so.run.optimizer = "sgd";
    so.run.config_json = configJson(o);
    ASSIGN_OR_RETURN(session, profiler::RecordingSession::start(so));
  }
  if (o.dump && !session) return invalidArgument("--no-db: op dumps are stored in the trace file; give --db");
  dumper::Dumper& dump = dumper::Dumper::instance();
  if (o.dump) {
    profiler::RecordingSession* s = session.get();
    dump.attach(s->writer(), [s] { return s->currentStep(); });
    RETURN_IF_ERROR(dump.start());
  }

  model->to(device);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);

  const int64_t per_epoch = (train_set.size() + o.batch_size - 1) / o.batch_size;
  int64_t total = per_epoch * o.epochs;
  if (o.max_steps > 0) total = std::min(total, o.max_steps);

  TrainResult r;
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < o.epochs && r.steps < total; ++epoch) {
    at::Tensor order = at::randperm(train_set.size(), gen, at::kLong);
    for (int64_t b = 0; b < per_epoch && r.steps < total; ++b) {
      const int64_t n = std::min(o.batch_size, train_set.size() - b * o.batch_size);
      at::Tensor idx = order.narrow(0, b * o.batch_size, n);
      at::Tensor x = train_set.images.index_select(0, idx).to(device);
      at::Tensor y = train_set.labels.index_select(0, idx).to(device);
      opt.zero_grad();
      at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      opt.step();
      ++r.steps;
      r.final_loss = loss.item<double>();
      if (session) {
        profiler::StepMetrics m;
        m.loss = r.final_loss;
        m.lr = o.lr;
        session->step(m);
      }
      if (progress) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        progress(r.steps, total, r.final_loss, s > 0 ? static_cast<double>(r.steps) / s : 0.0);
      }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.samples_per_second = r.seconds > 0 ? static_cast<double>(r.steps * o.batch_size) / r.seconds : 0;
  r.test_accuracy = evaluate(*model, test_set, device, 256);
  r.test_samples = test_set.size();
  if (o.dump) {
    const Status stopped = dump.stop();
    const dumper::DumperCounters c = dump.counters();
    r.dumped_tensors = c.tensors;
    r.dumped_bytes = c.payload_bytes;
    r.dump_directory = dump.dumpDirectory();
    if (!stopped.isOk()) r.dump_error = stopped.message();
    if (!dump.status().isOk()) r.dump_error = dump.status().message();
  }
  if (session) {
    r.run_id = session->runId();
    r.recorded_ops = session->recordedOps();
    r.dropped_records = session->droppedRecords();
    RETURN_IF_ERROR(session->stop("completed", resultsJson(r)));
  }
  return r;
}

}  // namespace npuscope::workloads
