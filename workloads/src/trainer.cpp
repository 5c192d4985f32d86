#include "npuscope/workloads/trainer.h"

#include <atomic>
#include <csignal>

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "npuscope/amp/amp.h"
#include "npuscope/store/clock.h"
#include "npuscope/store/console.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dumper.h"
#include "npuscope/optim/fused_optimizers.h"
#include "npuscope/profiler/session.h"
#include "npuscope/workloads/fashion_mnist.h"
#include "npuscope/workloads/models.h"

namespace npuscope::workloads {
namespace {

StatusOr<c10::Device> parseDevice(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  ASSIGN_OR_RETURN(int index, npu::parse_device(text));
  return c10::Device(npu::kDeviceType, static_cast<c10::DeviceIndex>(index));
}

const std::vector<std::string>& optimizerNames() {
  static const std::vector<std::string> names = {"sgd",      "adam",    "adamw",     "adamp",
                                                 "lamb",     "adadelta", "rmsprop", "rmsprop_tf"};
  return names;
}

Status validate(const TrainOptions& o) {
  if (o.epochs < 1) return invalidArgument("--epochs " + std::to_string(o.epochs) + ": expected at least 1");
  if (o.batch_size < 1) return invalidArgument("--batch-size " + std::to_string(o.batch_size) + ": expected at least 1");
  if (!(o.lr > 0)) return invalidArgument("--lr " + std::to_string(o.lr) + ": expected a positive learning rate");
  if (o.weight_decay < 0) return invalidArgument("--weight-decay " + std::to_string(o.weight_decay) + ": expected >= 0");
  if (o.max_steps < 0) return invalidArgument("--steps " + std::to_string(o.max_steps) + ": expected 0 (all) or more");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return invalidArgument("rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size) +
                           ": expected 0 <= rank < world size");
  }
  if (o.batch_size % o.world_size != 0) {
    return invalidArgument("--batch-size " + std::to_string(o.batch_size) + ": expected a multiple of --nproc " +
                           std::to_string(o.world_size) + " (each rank takes an equal share of the batch)");
  }
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic") {
    return invalidArgument("--dataset '" + o.dataset + "': expected fashion-mnist or synthetic");
  }
  bool known = false;
  std::string list;
  for (const auto& n : optimizerNames()) {
    known |= n == o.optimizer;
    list += (list.empty() ? "" : ", ") + n;
  }
  if (!known) return invalidArgument("--optimizer '" + o.optimizer + "': expected one of " + list);
  return Status::ok();
}

// The first line of a c10::Error, without libtorch's C++ backtrace.
std::string errorLine(const c10::Error& e) {
  std::string s = e.what_without_backtrace();
  return s.substr(0, s.find('\n'));
}

// One NpuFused* optimizer with the run's lr and weight decay (and momentum where it has one);
// every other hyper-parameter keeps torch_npu's default.
template <class Optimizer, class OptimizerOptions>
std::shared_ptr<optim::NpuFusedOptimizer> makeFused(OptimizerOptions opt, const TrainOptions& o,
                                                    const std::vector<at::Tensor>& params,
                                                    const optim::FusedOptimizerConfig& config) {
  opt.lr = o.lr;
  opt.weightDecay = o.weight_decay;
  if constexpr (std::is_same_v<OptimizerOptions, optim::NpuFusedSGDOptions> ||
                std::is_same_v<OptimizerOptions, optim::NpuFusedRMSpropOptions> ||
                std::is_same_v<OptimizerOptions, optim::NpuFusedRMSpropTFOptions>) {
    opt.momentum = o.momentum;
  }
  return std::make_shared<Optimizer>(params, opt, config);
}

amp::OptimizerFactory optimizerFactory(const TrainOptions& o) {
  return [o](const std::vector<at::Tensor>& p,
             const optim::FusedOptimizerConfig& c) -> std::shared_ptr<optim::NpuFusedOptimizer> {
    const std::string& n = o.optimizer;
    if (n == "sgd") return makeFused<optim::NpuFusedSGD>(optim::NpuFusedSGDOptions(o.lr), o, p, c);
    if (n == "adam") return makeFused<optim::NpuFusedAdam>(optim::NpuFusedAdamOptions{}, o, p, c);
    if (n == "adamw") return makeFused<optim::NpuFusedAdamW>(optim::NpuFusedAdamWOptions{}, o, p, c);
    if (n == "adamp") return makeFused<optim::NpuFusedAdamP>(optim::NpuFusedAdamPOptions{}, o, p, c);
    if (n == "lamb") return makeFused<optim::NpuFusedLamb>(optim::NpuFusedLambOptions{}, o, p, c);
    if (n == "adadelta") return makeFused<optim::NpuFusedAdadelta>(optim::NpuFusedAdadeltaOptions{}, o, p, c);
    if (n == "rmsprop") return makeFused<optim::NpuFusedRMSprop>(optim::NpuFusedRMSpropOptions{}, o, p, c);
    return makeFused<optim::NpuFusedRMSpropTF>(optim::NpuFusedRMSpropTFOptions{}, o, p, c);  // validated name
  };
}

StatusOr<amp::Options> ampOptions(const AmpFlags& f) {
  amp::Options a;
  ASSIGN_OR_RETURN(a.opt_level, amp::parseOptLevel(f.opt_level));
  if (!f.loss_scale.empty()) {
    auto ls = amp::parseLossScale(f.loss_scale);
    if (!ls.isOk()) return invalidArgument("--loss-scale: " + ls.status().message());
    a.loss_scale = *ls;
  }
  a.dynamic_init_scale = f.dynamic_init_scale;
  a.scale_growth_factor = f.scale_growth_factor;
  a.scale_backoff_factor = f.scale_backoff_factor;
  a.scale_window = f.scale_window;
  a.min_loss_scale = f.min_loss_scale;
  a.max_loss_scale = f.max_loss_scale;
  a.keep_batchnorm_fp32 = f.keep_batchnorm_fp32;
  a.master_weights = f.master_weights;
  a.combine_grad = f.combine_grad;
  a.verbosity = f.verbosity;
  if (f.low_precision == "float16") {
    a.low_precision = at::kHalf;
  } else if (f.low_precision == "bfloat16") {
    a.low_precision = at::kBFloat16;
  } else {
    return invalidArgument("--low-precision '" + f.low_precision + "': expected float16 or bfloat16");
  }
  auto check = amp::parseOverflowCheck(f.overflow_check);
  if (!check.isOk()) return invalidArgument("--overflow-check-by: " + check.status().message());
  a.overflow_check = *check;
  RETURN_IF_ERROR(amp::resolveOptions(a).status());
  return a;
}

// Top-1 and top-5 accuracy of `model` on `data` under the current Amp state.
struct Accuracy {
  double top1 = 0, top5 = 0;
  int64_t batches = 0;  // evaluated
  int stopped_by = 0;   // the signal that stopped the evaluation early (requestStop), 0: none
};

// What a run stopped by Ctrl-C / SIGTERM says, in its error line and in its run row.
std::string stopReason(int sig, const std::string& done) {
  return std::string(sig == SIGTERM ? "terminated (SIGTERM)" : "interrupted (SIGINT)") + " after " + done +
         "; the run is marked failed and keeps what was recorded";
}

// Ends a recording failed with `why`. When the recording had failed before (its trace file's disk
// filled), that failure comes first on the line: it says what the file lacks and where the rest
// is; `why` (a signal, an error) follows.
Status endRecordingFailed(profiler::RecordingSession* session, const Status& why) {
  if (session == nullptr) return why;
  const Status stopped = session->stop("failed", nlohmann::json{{"error", why.message()}}.dump());
  if (stopped.isOk()) return why;
  return Status(why.code(), stopped.message() + "; then " + why.message());
}

Accuracy evaluate(Model& model, const Dataset& data, c10::Device device, int64_t batch, const ProgressFn& progress) {
  torch::NoGradGuard no_grad;
  model.eval();
  int64_t correct1 = 0, correct5 = 0;
  const int64_t batches = (data.size() + batch - 1) / batch;
  const auto t0 = std::chrono::steady_clock::now();
  Accuracy acc;
  for (int64_t b = 0; b < batches; ++b) {
    if ((acc.stopped_by = stopRequested()) != 0) break;  // Ctrl-C: between batches
    acc.batches = b + 1;
    const int64_t i = b * batch, n = std::min(batch, data.size() - i);
    at::Tensor x = data.images.narrow(0, i, n).to(device);
    at::Tensor logits = amp::isInitialized()
                            ? amp::forward([&](const at::Tensor& in) { return model.forward(in); }, x)
                            : model.forward(x);
    at::Tensor top = std::get<1>(logits.to(at::kFloat).topk(std::min<int64_t>(5, logits.size(1)), 1)).cpu();
    at::Tensor labels = data.labels.narrow(0, i, n).unsqueeze(1);
    at::Tensor hits = top.eq(labels);
    correct1 += hits.select(1, 0).sum().item<int64_t>();
    correct5 += hits.any(1).sum().item<int64_t>();
    if (progress) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress(b + 1, batches, 0.0, s > 0 ? static_cast<double>(b + 1) / s : 0.0);
    }
  }
  model.train();
  const double n = static_cast<double>(std::max<int64_t>(data.size(), 1));
  acc.top1 = static_cast<double>(correct1) / n;
  acc.top5 = static_cast<double>(correct5) / n;
  return acc;
}

StatusOr<std::pair<Dataset, Dataset>> loadData(const std::string& dataset, const std::string& data_dir,
                                               int64_t synthetic_size, uint64_t seed) {
  if (dataset == "synthetic") {
    return std::make_pair(syntheticDataset(synthetic_size, seed + 1),
                          syntheticDataset(std::max<int64_t>(synthetic_size / 4, 1), seed + 2));
  }
  const std::string dir = data_dir.empty() ? kDefaultFashionMnistDir : data_dir;
  ASSIGN_OR_RETURN(Dataset train_set, loadFashionMnist(dir, true));
  ASSIGN_OR_RETURN(Dataset test_set, loadFashionMnist(dir, false));
  return std::make_pair(std::move(train_set), std::move(test_set));
}

nlohmann::json configJson(const TrainOptions& o) {
  nlohmann::json j{{"model", o.model},         {"device", o.device},
                   {"dataset", o.dataset},     {"epochs", o.epochs},
                   {"steps", o.max_steps},     {"batch_size", o.batch_size},
                   {"optimizer", o.optimizer}, {"lr", o.lr},
                   {"momentum", o.momentum},   {"weight_decay", o.weight_decay},
                   {"seed", o.seed},           {"schedule", o.schedule},
                   {"opt_level", o.amp.opt_level}, {"low_precision", o.amp.low_precision},
                   {"overflow_check", o.amp.overflow_check}};
  if (!o.amp.loss_scale.empty()) j["loss_scale"] = o.amp.loss_scale;
  auto put = [&](const char* key, const auto& v) {
    if (v) j[key] = *v;
  };
  put("dynamic_init_scale", o.amp.dynamic_init_scale);
  put("scale_growth_factor", o.amp.scale_growth_factor);
  put("scale_backoff_factor", o.amp.scale_backoff_factor);
  put("scale_window", o.amp.scale_window);
  put("min_loss_scale", o.amp.min_loss_scale);
  put("max_loss_scale", o.amp.max_loss_scale);
  put("keep_batchnorm_fp32", o.amp.keep_batchnorm_fp32);
  put("master_weights", o.amp.master_weights);
  put("combine_grad", o.amp.combine_grad);
  if (!o.resume.empty()) j["resume"] = o.resume;
  if (o.world_size > 1) j["nproc"] = o.world_size;
  return j;
}

// The trainer's side of a checkpoint: what the archive of amp::save_checkpoint cannot say.
std::string metaPath(const std::string& checkpoint) { return checkpoint + ".json"; }

StatusOr<nlohmann::json> readMeta(const std::string& checkpoint) {
  std::ifstream in(metaPath(checkpoint));
  if (!in) return notFound(metaPath(checkpoint) + ": cannot open (the checkpoint's description, written by --save)");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("model") || !j.contains("step")) {
    return invalidArgument(metaPath(checkpoint) + ": not a checkpoint description (expected JSON with model and step)");
  }
  return j;
}

// The part of a training step the dumper's sizing pass repeats: the batch to the device, the
// gradients zeroed, the forward under amp and the loss.
at::Tensor forwardLoss(Model& model, optim::NpuFusedOptimizer& opt, const at::Tensor& images, const at::Tensor& labels,
                       c10::Device device) {
  at::Tensor x = images.to(device);
  at::Tensor y = labels.to(device);
  opt.zeroGrad();
  at::Tensor out = amp::forward([&](const at::Tensor& in) { return model.forward(in); }, x);
  return torch::nn::functional::cross_entropy(out, y);
}

// The dumper's sizing pass: a step's forward and backward as the loop runs them, on a batch of
// the first step's shape, with the dumper counting (Dumper::beginSizing). Then undone, so the
// run is exactly the run without it: gradients, buffers (BatchNorm statistics), the CPU
// generator (dropout) and the float-status register are restored, and the session records
// nothing meanwhile. The optimizer and the loss scaler are not called (amp::scaled_loss_value).
StatusOr<dumper::DumpSizeEstimate> sizeDumpedStep(Model& model, optim::NpuFusedOptimizer& opt, const Dataset& data,
                                                  int64_t batch, c10::Device device,
                                                  profiler::RecordingSession* session) {
  profiler::RecordingSession::Paused paused(session);
  dumper::Dumper& dump = dumper::Dumper::instance();
  torch::NoGradGuard no_grad;
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  at::Tensor rng;
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    rng = cpu.get_state();
  }
  std::vector<at::Tensor> buffers, buffer_values, grads, grad_values;
  for (const at::Tensor& b : model.buffers()) {
    buffers.push_back(b);
    buffer_values.push_back(b.clone());
  }
  for (const at::Tensor& p : model.parameters()) {
    grads.push_back(p.grad());
    grad_values.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  }
  const int status_device = device.type() == npu::kDeviceType ? device.index() : -1;
  const bool status = status_device >= 0 && npu::get_float_status(status_device);
  auto restore = [&] {
    const auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() = grads[i];
      if (grads[i].defined()) grads[i].copy_(grad_values[i]);
    }
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffer_values[i]);
    {
      std::lock_guard<std::mutex> lock(cpu.mutex());
      cpu.set_state(rng);
    }
    if (status_device >= 0) {
      npu::clear_float_status(status_device);
      if (status) npu::raise_float_status(status_device);
    }
  };

  const int64_t n = std::min(batch, data.size());
  RETURN_IF_ERROR(dump.beginSizing());
  try {
    torch::AutoGradMode grad_mode(true);
    at::Tensor loss = forwardLoss(model, opt, data.images.narrow(0, 0, n), data.labels.narrow(0, 0, n), device);
    amp::scaled_loss_value(loss).backward();
  } catch (...) {
    dump.endSizing();
    restore();
    throw;
  }
  const dumper::DumpSizeEstimate size = dump.endSizing();
  restore();
  return size;
}

}  // namespace

namespace {
std::atomic<int> g_stop_signal{0};
}  // namespace

void requestStop(int signal_number) { g_stop_signal.store(signal_number); }
int stopRequested() { return g_stop_signal.load(); }

namespace {

// The step to resume from: 0 without --resume; a checkpoint trained with another configuration
// is refused.
StatusOr<int64_t> resumeStep(const TrainOptions& o) {
  if (o.resume.empty()) return int64_t{0};
  ASSIGN_OR_RETURN(nlohmann::json meta, readMeta(o.resume));
  for (const char* key : {"model", "optimizer", "opt_level", "dataset", "batch_size", "seed"}) {
    const nlohmann::json now = configJson(o)[key];
    if (meta.contains(key) && meta[key] != now) {
      return invalidArgument("--resume " + o.resume + ": the checkpoint was trained with " + key + " " +
                             meta[key].dump() + ", this run has " + now.dump());
    }
  }
  return meta["step"].get<int64_t>();
}

// The recording session (none without --db): the file is opened, and refused when it is not a
// trace file, before any work.
StatusOr<std::unique_ptr<profiler::RecordingSession>> openRecording(const TrainOptions& o) {
  if (o.db.empty()) return std::unique_ptr<profiler::RecordingSession>();
  profiler::SessionOptions so;
  so.path = o.db;
  if (!o.schedule.empty()) {
    auto sch = profiler::Schedule::parse(o.schedule);
    if (!sch.isOk()) return invalidArgument("--schedule: " + sch.status().message());
    so.schedule = *sch;
  }
  so.run.command = o.resume.empty() ? "train" : "train --resume";
  so.run.model = o.model;
  so.run.device = o.device;
  so.run.opt_level = o.amp.opt_level;
  so.run.optimizer = o.optimizer;
  so.run.config_json = configJson(o).dump();
  if (o.world_size > 1) {
    so.run.rank = o.rank;
    so.run.world_size = o.world_size;
    so.run.job = o.job;
  }
  return profiler::RecordingSession::start(so);
}

// What one training run works with; train() sets it up, the phases below use it.
struct Training {
  const TrainOptions& o;
  c10::Device device;
  Model& model;
  const Dataset& train_set;
  profiler::RecordingSession* session;  // null: not recorded
  std::shared_ptr<optim::NpuFusedOptimizer> opt;
  int64_t first_step = 0;
  int64_t per_epoch = 0;
  int64_t total = 0;  // steps of the whole training, resumed ones included
};

// Op dumps attached to the session and started; refused before any step changes the model when
// the disk cannot hold them.
Status startDumping(Training& t) {
  dumper::Dumper& dump = dumper::Dumper::instance();
  profiler::RecordingSession* s = t.session;
  if (dump.config().data != dumper::DumpDataKind::kOverflow) {
    ASSIGN_OR_RETURN(dumper::DumpSizeEstimate size,
                     sizeDumpedStep(t.model, *t.opt, t.train_set, t.o.batch_size, t.device, s));
    RETURN_IF_ERROR(dump.checkFreeSpace(size, dump.config().steps.countIn(0, t.total - t.first_step), t.o.db));
  }
  dump.attach(s->writer(), [s] { return s->currentStep(); });
  return dump.start();
}

// One optimizer step on this rank's share of batch `b` (of the epoch's `order`): forward,
// scaled backward, gradient averaging across ranks, the amp step; recorded and dumped. An error
// ends the training.
Status trainStep(Training& t, const at::Tensor& order, int64_t b, TrainResult* r) {
  const TrainOptions& o = t.o;
  const int64_t n = std::min(o.batch_size, t.train_set.size() - b * o.batch_size);
  // This rank's share of the batch (all of it in one process); a last batch too small to share
  // evenly loses its remainder.
  const int64_t share = n / o.world_size;
  if (share == 0) return Status::ok();
  at::Tensor idx = order.narrow(0, b * o.batch_size + o.rank * share, share);
  at::Tensor loss = forwardLoss(t.model, *t.opt, t.train_set.images.index_select(0, idx),
                                t.train_set.labels.index_select(0, idx), t.device);
  amp::ScaledLoss scaled = amp::scale_loss(loss, *t.opt);
  scaled.backward();
  if (o.average_gradients) {  // data parallel: every rank ends the backward with the mean gradient
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : t.model.parameters()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    o.average_gradients(grads);
  }
  amp::StepInfo info;
  {
    dumper::Dumper::UpdatePhase update;  // neither forward nor backward (msprobe leaves it out)
    scaled.finish();
    info = amp::step(*t.opt);
    r->final_loss = loss.item<double>();
  }
  ++r->steps;
  r->skipped_steps += info.skipped;
  r->final_loss_scale = info.next_loss_scale;
  if (t.session) {
    profiler::StepMetrics m;
    m.loss = r->final_loss;
    m.loss_scale = info.loss_scale;
    m.overflow = info.overflow;
    m.skipped = info.skipped;
    m.lr = t.opt->lr(0);
    t.session->step(m);
  }
  dumper::Dumper& dump = dumper::Dumper::instance();
  if (o.dump && dump.config().stop_on_error && !dump.flush().isOk()) {
    const Status why = dump.status();
    (void)dump.stop();
    return Status(why.code(), why.message() + " (on_error: stop: training stopped)");
  }
  return Status::ok();
}

// The epochs up to the last step (a resumed run skips the steps done, drawing the same data
// order); stops at a signal.
Status trainSteps(Training& t, TrainResult* r, const ProgressFn& progress) {
  const TrainOptions& o = t.o;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  int64_t global = 0;  // steps since the start of training, resumed ones included
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < o.epochs && global < t.total; ++epoch) {
    at::Tensor order = at::randperm(t.train_set.size(), gen, at::kLong);  // drawn for resumed epochs too
    for (int64_t b = 0; b < t.per_epoch && global < t.total; ++b, ++global) {
      if (global < t.first_step) continue;
      if (const int sig = stopRequested(); sig != 0) {
        if (o.dump) (void)dumper::Dumper::instance().stop();
        return failedPrecondition(stopReason(sig, std::to_string(r->steps) + " steps"));
      }
      RETURN_IF_ERROR(trainStep(t, order, b, r));
      if (progress) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        progress(global + 1, t.total, r->final_loss, s > 0 ? static_cast<double>(r->steps) / s : 0.0);
      }
    }
  }
  r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r->samples_per_second = r->seconds > 0 ? static_cast<double>(r->steps * o.batch_size) / r->seconds : 0;
  return Status::ok();
}

// Dumping stopped, and what it wrote into the result (an error stops the dump, not the training).
void stopDumping(TrainResult* r) {
  dumper::Dumper& dump = dumper::Dumper::instance();
  const Status stopped = dump.stop();
  const dumper::DumperCounters c = dump.counters();
  r->dumped_tensors = c.tensors;
  r->dumped_bytes = c.payload_bytes;
  r->dumped_shared_bytes = c.shared_payload_bytes;
  r->dump_directory = dump.dumpDirectory();
  if (!stopped.isOk()) r->dump_error = stopped.message();
  if (!dump.status().isOk()) r->dump_error = dump.status().message();
}

// The model and optimizer state at --save, with the configuration beside them (for --resume and
// infer).
Status saveCheckpoint(const Training& t, const TrainResult& r) {
  amp::save_checkpoint(t.o.save, t.model, *t.opt);
  nlohmann::json meta = configJson(t.o);
  meta["step"] = t.first_step + r.steps;
  std::ofstream out(metaPath(t.o.save));
  out << meta.dump(2) << "\n";
  if (!out) return ioError(metaPath(t.o.save) + ": cannot write the checkpoint's description");
  return Status::ok();
}

// The run ended "completed" with its results (a recording that failed before, on a full disk,
// keeps them beside its reason).
void endRecording(profiler::RecordingSession& session, TrainResult* r) {
  r->run_id = session.runId();
  r->recorded_ops = session.recordedOps();
  r->dropped_records = session.droppedRecords();
  nlohmann::json results{{"steps", r->steps},
                         {"first_step", r->first_step},
                         {"skipped_steps", r->skipped_steps},
                         {"final_loss", r->final_loss},
                         {"final_loss_scale", r->final_loss_scale},
                         {"test_accuracy", r->test_accuracy},
                         {"test_top5", r->test_top5},
                         {"test_samples", r->test_samples},
                         {"seconds", r->seconds},
                         {"samples_per_second", r->samples_per_second}};
  if (!r->dump_error.empty()) results["dump_error"] = r->dump_error;  // dumping stopped, training did not
  const Status stopped = session.stop("completed", results.dump());
  if (!stopped.isOk()) r->recording_error = stopped.message();
}

}  // namespace

StatusOr<TrainResult> train(const TrainOptions& o, const ProgressFn& progress) {
  RETURN_IF_ERROR(validate(o));
  ASSIGN_OR_RETURN(c10::Device device, parseDevice(o.device));
  ASSIGN_OR_RETURN(amp::Options amp_options, ampOptions(o.amp));
  ASSIGN_OR_RETURN(const int64_t first_step, resumeStep(o));
  torch::manual_seed(o.seed);  // before the model: its initial weights come from this seed
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, makeModel(o.model));
  ASSIGN_OR_RETURN(auto data, loadData(o.dataset, o.data_dir, o.synthetic_size, o.seed));
  ASSIGN_OR_RETURN(std::unique_ptr<profiler::RecordingSession> session, openRecording(o));
  if (o.dump && !session) return invalidArgument("--no-db: op dumps are stored in the trace file; give --db");

  const int64_t per_epoch = (data.first.size() + o.batch_size - 1) / o.batch_size;
  int64_t total = per_epoch * o.epochs;
  if (o.max_steps > 0) total = std::min(total, first_step + o.max_steps);
  Training t{o, device, *model, data.first, session.get(), nullptr, first_step, per_epoch, total};
  TrainResult r;
  r.first_step = first_step;
  r.opt_level = o.amp.opt_level;
  // A run that cannot go on: amp and the session wound up, the run ended "failed" with the reason.
  auto abandon = [&](const Status& why) {
    amp::setOverflowObserver(nullptr);
    amp::setLogSink(nullptr);
    amp::reset();
    return endRecordingFailed(session.get(), why);
  };
  try {
    model->to(device);
    t.opt = amp::initialize(model, optimizerFactory(o), amp_options).optimizer;
    r.optimizer = t.opt->name();
    if (!o.resume.empty()) amp::load_checkpoint(o.resume, *model, *t.opt);
    if (profiler::RecordingSession* s = session.get()) {
      amp::setOverflowObserver([s](const amp::OverflowEvent& e) { s->overflow(e.source, e.op_name, e.detail); });
    }
    amp::setLogSink([](const std::string& line) { consoleLine(stderr, "npuscope: amp: " + line); });
    if (o.dump) {
      const Status started = startDumping(t);
      if (!started.isOk()) return abandon(started);
    }
    const Status trained = trainSteps(t, &r, progress);
    if (!trained.isOk()) return abandon(trained);
    if (o.dump) stopDumping(&r);
    const Accuracy acc = evaluate(*model, data.second, device, 256, nullptr);
    if (acc.stopped_by != 0) {
      return abandon(failedPrecondition(stopReason(acc.stopped_by, std::to_string(r.steps) + " steps, in the test pass")));
    }
    r.test_accuracy = acc.top1;
    r.test_top5 = acc.top5;
    r.test_samples = data.second.size();
    if (!o.save.empty()) RETURN_IF_ERROR(saveCheckpoint(t, r));
    amp::setOverflowObserver(nullptr);
    amp::setLogSink(nullptr);
    amp::reset();
  } catch (const c10::Error& e) {
    // Stopped by a signal, a rank of a job may see its peers' collectives fail first (they
    // stopped too): the signal is the reason.
    if (const int sig = stopRequested()) {
      return abandon(failedPrecondition(stopReason(sig, std::to_string(r.steps) + " steps")));
    }
    return abandon(invalidArgument(errorLine(e)));
  }
  if (session) endRecording(*session, &r);
  return r;
}

StatusOr<InferResult> infer(const InferOptions& o, const ProgressFn& progress) {
  if (o.batch_size < 1) return invalidArgument("--batch-size " + std::to_string(o.batch_size) + ": expected at least 1");
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic") {
    return invalidArgument("--dataset '" + o.dataset + "': expected fashion-mnist or synthetic");
  }
  ASSIGN_OR_RETURN(nlohmann::json meta, readMeta(o.checkpoint));
  ASSIGN_OR_RETURN(c10::Device device, parseDevice(o.device));
  TrainOptions t;  // the training configuration the checkpoint was made with
  t.model = meta["model"].get<std::string>();
  t.optimizer = meta.value("optimizer", "sgd");
  t.lr = meta.value("lr", 0.01);
  t.amp.opt_level = o.opt_level.empty() ? meta.value("opt_level", "O0") : o.opt_level;
  t.amp.low_precision = meta.value("low_precision", "float16");
  ASSIGN_OR_RETURN(amp::Options amp_options, ampOptions(t.amp));
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, makeModel(t.model));
  ASSIGN_OR_RETURN(auto data, loadData(o.dataset, o.data_dir, o.synthetic_size, meta.value("seed", uint64_t{0})));

  std::unique_ptr<profiler::RecordingSession> session;
  if (!o.db.empty()) {
    profiler::SessionOptions so;
    so.path = o.db;
    so.run.command = "infer";
    so.run.model = t.model;
    so.run.device = o.device;
    so.run.opt_level = t.amp.opt_level;
    so.run.config_json = nlohmann::json{{"checkpoint", o.checkpoint}, {"batch_size", o.batch_size},
                                        {"dataset", o.dataset}, {"opt_level", t.amp.opt_level}}
                             .dump();
    ASSIGN_OR_RETURN(session, profiler::RecordingSession::start(so));
  }
  InferResult r;
  r.model = t.model;
  r.opt_level = t.amp.opt_level;
  try {
    model->to(device);
    // The checkpoint holds the optimizer too; load it into one of the kind it was saved with
    // (under the training opt level), then evaluate under the requested level.
    {
      TrainOptions saved = t;
      saved.amp.opt_level = meta.value("opt_level", "O0");
      ASSIGN_OR_RETURN(amp::Options saved_amp, ampOptions(saved.amp));
      amp::Initialized amped = amp::initialize(model, optimizerFactory(saved), saved_amp);
      amp::load_checkpoint(o.checkpoint, *model, *amped.optimizer);
      amp::reset();
    }
    // Back to fp32 weights when evaluating at another level, then cast as that level says.
    if (t.amp.opt_level != meta.value("opt_level", "O0")) model->to(at::kFloat);
    amp::initialize(model, optimizerFactory(t), amp_options);
    const auto t0 = std::chrono::steady_clock::now();
    const Accuracy acc = evaluate(*model, data.second, device, o.batch_size, progress);
    if (acc.stopped_by != 0) {
      amp::reset();
      const Status why = failedPrecondition(stopReason(acc.stopped_by, std::to_string(acc.batches) + " batches"));
      return endRecordingFailed(session.get(), why);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.top1 = acc.top1;
    r.top5 = acc.top5;
    r.samples = data.second.size();
    r.samples_per_second = r.seconds > 0 ? static_cast<double>(r.samples) / r.seconds : 0;
    amp::reset();
  } catch (const c10::Error& e) {
    amp::reset();
    return endRecordingFailed(session.get(), invalidArgument(errorLine(e)));
  }
  if (session) {
    r.run_id = session->runId();
    const Status stopped = session->stop("completed", nlohmann::json{{"top1", r.top1},
                                                                     {"top5", r.top5},
                                                                     {"samples", r.samples},
                                                                     {"seconds", r.seconds},
                                                                     {"samples_per_second", r.samples_per_second}}
                                                          .dump());
    if (!stopped.isOk()) r.recording_error = stopped.message();
  }
  return r;
}

}  // namespace npuscope::workloads
