// The op dumper: the device's op observer, capture of op arguments and results straight from
// npu memory (host memory), statistics, Ascend dump files and tensor_dumps rows.
#include "npuscope/dumper/dumper.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "npuscope/core/clock.h"
#include "npuscope/core/compare.h"
#include "npuscope/core/format.h"
#include "npuscope/core/trace_writer.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dump_file.h"

// libtorch's autograd engine sets the current graph task on a thread while it evaluates backward
// nodes there; declared here to avoid pulling the autograd headers into this TU.
namespace torch::autograd {
struct Node;
TORCH_API const std::unordered_set<Node*>* get_current_graph_task_nodes_in_graph();
}  // namespace torch::autograd

namespace npuscope::dumper {

const char* componentName() { return "dumper"; }

namespace {

using compare::DType;

DType dtypeOf(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return DType::kFloat32;
    case c10::kHalf: return DType::kFloat16;
    case c10::kBFloat16: return DType::kBFloat16;
    case c10::kDouble: return DType::kFloat64;
    case c10::kChar: return DType::kInt8;
    case c10::kByte: return DType::kUInt8;
    case c10::kShort: return DType::kInt16;
    case c10::kInt: return DType::kInt32;
    case c10::kLong: return DType::kInt64;
    case c10::kBool: return DType::kBool;
    default: return DType::kUnknown;
  }
}

// One captured tensor: metadata, statistics and (in tensor mode) its elements in logical order.
struct Captured {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  std::string format;
  compare::TensorStats stats;
  std::vector<uint8_t> data;
  size_t bytes = 0;  // payload size whether or not kept
};

// Copies a strided tensor's elements into logical (row-major) order, without torch ops.
void gather(const at::Tensor& t, uint8_t* out) {
  const size_t es = t.element_size();
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  const int64_t dim = t.dim();
  const auto* base = static_cast<const uint8_t*>(t.data_ptr());
  std::vector<int64_t> idx(dim, 0);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < dim; ++d) off += idx[d] * strides[d];
    std::memcpy(out + i * es, base + off * static_cast<int64_t>(es), es);
    for (int64_t d = dim - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

bool capture(const at::Tensor& t, bool with_data, Captured* c) {
  if (!t.defined()) return false;
  c->dtype = dtypeOf(t.scalar_type());
  if (c->dtype == DType::kUnknown) return false;
  c->shape.assign(t.sizes().begin(), t.sizes().end());
  c->format = t.dim() == 4 ? "NCHW" : "ND";
  const size_t n = static_cast<size_t>(t.numel());
  c->bytes = n * compare::dtypeSize(c->dtype);
  if (n == 0) {
    c->stats = compare::computeStats(nullptr, c->dtype, 0);
    return true;
  }
  const uint8_t* src = nullptr;
  std::vector<uint8_t> scratch;
  if (t.is_contiguous()) {
    src = static_cast<const uint8_t*>(t.data_ptr());
    if (with_data) c->data.assign(src, src + c->bytes);
  } else {
    auto& buf = with_data ? c->data : scratch;
    buf.resize(c->bytes);
    gather(t, buf.data());
    src = buf.data();
  }
  c->stats = compare::computeStats(with_data ? c->data.data() : src, c->dtype, n);
  return true;
}

template <typename Fn>
void forEachTensor(c10::ArrayRef<c10::IValue> values, Fn&& fn) {
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      fn(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) fn(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) fn(e.toTensor());
    }
  }
}

// Arguments whose old value the op ignores: `out=` tensors and the self of ops that overwrite it
// (fill_, zero_, random fills). Their "input" is uninitialised memory, never worth a dump (and
// it would make two identical runs differ).
bool ignoredInput(const c10::FunctionSchema& schema, size_t i) {
  const auto& formal = schema.arguments();
  if (i >= formal.size()) return false;
  if (formal[i].is_out()) return true;
  if (!formal[i].alias_info() || !formal[i].alias_info()->isWrite()) return false;
  static const std::unordered_set<std::string> kOverwrite = {
      "aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_", "aten::random_", "aten::bernoulli_",
      "aten::exponential_", "aten::geometric_", "aten::cauchy_", "aten::log_normal_", "aten::copy_"};
  return kOverwrite.count(schema.name()) > 0;
}

int deviceOf(c10::ArrayRef<c10::IValue> values) {
  int device = -1;
  forEachTensor(values, [&](const at::Tensor& t) {
    if (device < 0 && t.defined() && t.device().type() == npu::kDeviceType) device = t.device().index();
  });
  return device < 0 ? npu::current_device() : device;
}

std::string timestampDirName() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tm);
  return buf;
}

uint64_t unixMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// The op in flight on this thread, between the observer's kBefore and kAfter calls.
struct Pending {
  bool active = false;
  std::string op_name, op_type;
  int64_t step = -1;
  int device = 0;
  std::vector<Captured> inputs;
  // Overflow mode: inputs are captured only when the op overflows; arguments the op writes are
  // snapshotted before it runs.
  std::vector<at::Tensor> input_refs;
  std::vector<std::optional<Captured>> input_snapshots;
  bool status_before = false;
};

thread_local Pending t_pending;
thread_local bool t_in_dumper = false;  // recursion guard: the dumper's own work is never dumped

}  // namespace

struct Dumper::Impl {
  mutable std::mutex mu;
  DumpConfig config;
  bool configured = false;
  TraceWriter* writer = nullptr;
  std::function<int64_t()> step_getter;
  std::atomic<int64_t> step{0};
  std::atomic<bool> started{false};
  std::atomic<bool> halted{false};  // a write error stopped dumping
  Status error;
  DumperCounters counters;
  std::vector<OverflowHit> hits;
  std::atomic<int64_t> overflow_found{0};
  std::string run_dir;
  std::set<int> device_dirs;
  std::atomic<uint64_t> task_id{0};
  bool restore_tracking = false;
  bool tracking_before = false;
  // Call numbering: per step, per type and direction.
  int64_t numbering_step = std::numeric_limits<int64_t>::min();
  std::unordered_map<std::string, int64_t> calls_fwd, calls_bwd;
  uint64_t step_bytes = 0;
  bool size_reported = false;

  int64_t currentStep() const { return step_getter ? step_getter() : step.load(std::memory_order_relaxed); }

  void halt(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (halted.exchange(true)) return;
    error = s;
    std::fprintf(stderr, "npuscope: dump stopped: %s%s\n", s.message().c_str(),
                 config.stop_on_error ? "" : " (training goes on)");
  }

  // Called under mu at the first op of a new step: reports the size of the previous one and
  // refuses to go on when the remaining requested steps cannot fit on the disk.
  void checkSpace(int64_t finished_step) {
    if (size_reported || config.dump_path.empty() || step_bytes == 0) return;
    size_reported = true;
    int64_t remaining = 0;
    for (const auto& [a, b] : config.steps.ranges()) {
      if (b > finished_step) remaining += b - std::max(a, finished_step + 1) + 1;
    }
    std::error_code ec;
    const auto space = std::filesystem::space(config.dump_path, ec);
    std::fprintf(stderr, "npuscope: dump: %s per step (step %lld)%s\n", formatBytes(step_bytes).c_str(),
                 static_cast<long long>(finished_step),
                 config.steps.all() ? ", every step requested" : "");
    if (!ec && !config.force && remaining > 0 && step_bytes * static_cast<uint64_t>(remaining) > space.available) {
      halted = true;
      error = failedPrecondition("dump.dump_path: " + config.dump_path + " has " + formatBytes(space.available) +
                                 " free but " + std::to_string(remaining) + " more steps need about " +
                                 formatBytes(step_bytes * remaining) + " (set \"force\": true to dump anyway)");
      std::fprintf(stderr, "npuscope: dump stopped: %s\n", error.message().c_str());
    }
  }

  void before(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
    Pending& p = t_pending;
    p.active = false;
    if (halted.load(std::memory_order_relaxed)) return;
    const bool overflow_mode = config.data == DumpDataKind::kOverflow;
    if (overflow_mode && overflow_found.load() >= config.overflow_limit) return;
    const int64_t s = currentStep();
    if (!config.steps.contains(s)) return;
    const std::string& type = schema.name();
    const bool backward = torch::autograd::get_current_graph_task_nodes_in_graph() != nullptr;
    const std::string short_type = type.rfind("aten::", 0) == 0 ? type.substr(6) : type;
    int64_t call = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (s != numbering_step) {
        if (numbering_step != std::numeric_limits<int64_t>::min()) checkSpace(numbering_step);
        numbering_step = s;
        calls_fwd.clear();
        calls_bwd.clear();
        step_bytes = 0;
      }
      call = (backward ? calls_bwd : calls_fwd)[short_type]++;
      ++counters.ops_seen;
    }
    if (halted.load()) return;
    std::string name = short_type + "." + std::to_string(call) + (backward ? ".backward" : ".forward");
    if (!config.keepsOp(type, name)) return;
    p.active = true;
    p.op_name = std::move(name);
    p.op_type = type;
    p.step = s;
    p.device = deviceOf(args);
    p.inputs.clear();
    p.input_refs.clear();
    p.input_snapshots.clear();
    if (overflow_mode) {
      // Arguments the op writes lose their old values: snapshot those; keep references to the rest.
      const auto& formal = schema.arguments();
      for (size_t i = 0; i < args.size(); ++i) {
        if (ignoredInput(schema, i)) continue;
        const bool written = i < formal.size() && formal[i].alias_info() && formal[i].alias_info()->isWrite();
        forEachTensor(args.slice(i, 1), [&](const at::Tensor& t) {
          p.input_refs.push_back(t);
          std::optional<Captured> snap;
          if (written) {
            Captured c;
            if (capture(t, true, &c)) snap = std::move(c);
          }
          p.input_snapshots.push_back(std::move(snap));
        });
      }
      if (npu::overflow_mode() == npu::OverflowMode::kSaturation) {
        p.status_before = npu::get_float_status(p.device);
        npu::clear_float_status(p.device);
      }
      return;
    }
    if (config.mode == DumpMode::kOutput) return;
    const bool with_data = config.data == DumpDataKind::kTensor;
    for (size_t i = 0; i < args.size(); ++i) {
      if (ignoredInput(schema, i)) continue;
      forEachTensor(args.slice(i, 1), [&](const at::Tensor& t) {
        Captured c;
        if (capture(t, with_data, &c)) p.inputs.push_back(std::move(c));
      });
    }
  }

  void after(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> results) {
    Pending& p = t_pending;
    if (!p.active) return;
    p.active = false;
    if (halted.load(std::memory_order_relaxed)) return;
    std::vector<Captured> outputs;
    if (config.data == DumpDataKind::kOverflow) {
      std::string detail;
      if (npu::overflow_mode() == npu::OverflowMode::kSaturation) {
        if (npu::get_float_status(p.device)) detail = "float status register";
        if (p.status_before) npu::raise_float_status(p.device);
      }
      int out_idx = 0;
      forEachTensor(results, [&](const at::Tensor& t) {
        Captured c;
        if (capture(t, true, &c)) {
          if (compare::isFloating(c.dtype) && (c.stats.nan_count || c.stats.inf_count)) {
            if (!detail.empty()) detail += "; ";
            detail += "output " + std::to_string(out_idx) + ": " + std::to_string(c.stats.inf_count) + " inf, " +
                      std::to_string(c.stats.nan_count) + " NaN";
          }
          outputs.push_back(std::move(c));
        }
        ++out_idx;
      });
      if (detail.empty()) return;
      if (overflow_found.fetch_add(1) >= config.overflow_limit) return;
      for (size_t i = 0; i < p.input_refs.size(); ++i) {
        if (p.input_snapshots[i]) {
          p.inputs.push_back(std::move(*p.input_snapshots[i]));
        } else {
          Captured c;
          if (capture(p.input_refs[i], true, &c)) p.inputs.push_back(std::move(c));
        }
      }
      p.input_refs.clear();
      p.input_snapshots.clear();
      {
        std::lock_guard<std::mutex> lock(mu);
        hits.push_back({p.step, p.op_name, p.op_type, detail});
      }
      if (writer) writer->addOverflow({p.step, nowNs(), "dump_check", p.op_name, detail});
    } else if (config.mode != DumpMode::kInput) {
      const bool with_data = config.data == DumpDataKind::kTensor;
      forEachTensor(results, [&](const at::Tensor& t) {
        Captured c;
        if (capture(t, with_data, &c)) outputs.push_back(std::move(c));
      });
    }
    emit(p, outputs);
  }

  void emit(Pending& p, std::vector<Captured>& outputs) {
    if (p.inputs.empty() && outputs.empty()) return;
    const bool with_data = config.data != DumpDataKind::kStats;
    uint64_t bytes = 0;
    for (const auto* list : {&p.inputs, &outputs})
      for (const auto& c : *list) bytes += c.bytes;
    bool file_written = false;
    if (!config.dump_path.empty()) {
      const std::string dir = run_dir + "/" + std::to_string(p.device);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (device_dirs.insert(p.device).second) {
          std::error_code ec;
          std::filesystem::create_directories(dir, ec);
        }
      }
      auto files = [&](const std::vector<Captured>& list) {
        std::vector<DumpFileTensor> out;
        for (const auto& c : list) {
          DumpFileTensor f;
          f.dtype = c.dtype;
          f.shape = c.shape;
          f.format = c.format;
          f.data = c.data.data();
          f.size = with_data ? c.data.size() : 0;
          out.push_back(std::move(f));
        }
        return out;
      };
      const uint64_t ts = unixMicros();
      const std::string path = dir + "/" + dumpFileName(p.op_type, p.op_name, task_id.fetch_add(1), 0, ts);
      const Status s = writeDumpFile(path, p.op_name, ts, files(p.inputs), files(outputs));
      if (!s.isOk()) {
        halt(s);
        return;
      }
      file_written = true;
    }
    if (writer) {
      std::vector<TensorDumpRecord> rows;
      auto add = [&](std::vector<Captured>& list, const char* io) {
        for (size_t i = 0; i < list.size(); ++i) {
          Captured& c = list[i];
          TensorDumpRecord r;
          r.step = p.step;
          r.op_name = p.op_name;
          r.op_type = p.op_type;
          r.io = io;
          r.idx = static_cast<int64_t>(i);
          r.dtype = compare::dtypeName(c.dtype);
          r.shape = compare::formatShape(c.shape);
          r.format = c.format;
          r.has_stats = true;
          r.min = c.stats.min;
          r.max = c.stats.max;
          r.mean = c.stats.mean;
          r.l2norm = c.stats.l2norm;
          r.nan_count = c.stats.nan_count;
          r.inf_count = c.stats.inf_count;
          if (with_data) r.data = std::move(c.data);
          rows.push_back(std::move(r));
        }
      };
      add(p.inputs, "input");
      add(outputs, "output");
      writer->addTensorDumps(std::move(rows));
    }
    std::lock_guard<std::mutex> lock(mu);
    ++counters.ops_dumped;
    counters.tensors += p.inputs.size() + outputs.size();
    counters.payload_bytes += bytes;
    counters.files += file_written;
    step_bytes += bytes;
  }
};

Dumper::Dumper() : impl_(std::make_unique<Impl>()) {}
Dumper::~Dumper() = default;

Dumper& Dumper::instance() {
  static Dumper* d = new Dumper();  // never destroyed: the observer may run during exit
  return *d;
}

namespace {
Dumper::Impl* g_impl = nullptr;

void observeOp(npu::OpPhase phase, const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> values) {
  if (t_in_dumper || !g_impl) return;
  t_in_dumper = true;
  npu::InternalScope internal;
  try {
    if (phase == npu::OpPhase::kBefore) {
      g_impl->before(schema, values);
    } else {
      g_impl->after(schema, values);
    }
  } catch (const std::exception& e) {  // an observer must not throw into the op
    t_pending.active = false;
    g_impl->halt(internalError(std::string("capturing ") + schema.name() + ": " + e.what()));
  }
  t_in_dumper = false;
}
}  // namespace

Status Dumper::configure(const DumpConfig& config) {
  if (started()) return failedPrecondition("dumper: configure() while dumping; stop() first");
  RETURN_IF_ERROR(config.validate());
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->config = config;
  impl_->configured = true;
  return Status::ok();
}

StatusOr<bool> Dumper::configureFromEnvironment(const std::string& config_path) {
  ASSIGN_OR_RETURN(bool requested, dumpRequestedByEnvironment());
  if (!requested) return false;
  auto config = DumpConfig::fromFile(config_path);
  if (!config.isOk()) return Status(config.status().code(), "ACL_DUMP_DATA=1: " + config.status().message());
  RETURN_IF_ERROR(configure(*config));
  return true;
}

const DumpConfig& Dumper::config() const { return impl_->config; }

void Dumper::attach(TraceWriter* writer, std::function<int64_t()> step_getter) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->writer = writer;
  impl_->step_getter = std::move(step_getter);
}

void Dumper::setStep(int64_t step) { impl_->step.store(step); }

Status Dumper::start() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.configured) return failedPrecondition("dumper: start() before configure()");
    if (m.started) return failedPrecondition("dumper: already started");
    m.halted = false;
    m.error = Status::ok();
    m.counters = DumperCounters();
    m.hits.clear();
    m.overflow_found = 0;
    m.device_dirs.clear();
    m.numbering_step = std::numeric_limits<int64_t>::min();
    m.calls_fwd.clear();
    m.calls_bwd.clear();
    m.step_bytes = 0;
    m.size_reported = false;
    m.run_dir.clear();
    if (!m.config.dump_path.empty()) {
      m.run_dir = m.config.dump_path + "/" + timestampDirName();
      std::error_code ec;
      std::filesystem::create_directories(m.run_dir, ec);
      if (ec) return invalidArgument("dump.dump_path: cannot create " + m.run_dir + ": " + ec.message());
    }
    m.restore_tracking = false;
    if (m.config.data == DumpDataKind::kOverflow && npu::overflow_mode() == npu::OverflowMode::kSaturation &&
        !npu::float_status_tracking()) {
      m.restore_tracking = true;  // only the register sees saturated fp16 overflows
      npu::set_float_status_tracking(true);
    }
    m.started = true;
  }
  g_impl = impl_.get();
  npu::set_op_observer(&observeOp);
  return Status::ok();
}

Status Dumper::stop() {
  Impl& m = *impl_;
  if (!m.started) return Status::ok();
  npu::set_op_observer(nullptr);
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.restore_tracking) npu::set_float_status_tracking(false);
  m.started = false;
  return m.error;
}

bool Dumper::started() const { return impl_->started.load(); }

Status Dumper::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error;
}

DumperCounters Dumper::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

std::vector<OverflowHit> Dumper::overflows() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->hits;
}

std::string Dumper::dumpDirectory() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->run_dir.empty() ? "" : impl_->run_dir + "/0";
}

}  // namespace npuscope::dumper
