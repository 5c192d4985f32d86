// The op dumper: the device's op observer, capture of op arguments and results straight from
// npu memory (host memory) and their statistics on the op thread; files and rows are written by
// the DumpWriter threads.
#include "npuscope/dumper/dumper.h"

#include <sys/stat.h>
#include <zlib.h>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "npuscope/store/clock.h"
#include "npuscope/store/console.h"
#include "npuscope/store/tensor_data.h"
#include "npuscope/store/format.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dump_file.h"
#include "dump_writer.h"

// libtorch's autograd engine sets the current graph task on a thread while it evaluates backward
// nodes there; declared here to avoid pulling the autograd headers into this TU.
namespace torch::autograd {
struct Node;
TORCH_API const std::unordered_set<Node*>* get_current_graph_task_nodes_in_graph();
}  // namespace torch::autograd

namespace npuscope::dumper {

const char* componentName() { return "dumper"; }

namespace {

using tensor::DType;

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

// Type, shape, format and payload size; false for tensors that are not dumped.
bool describe(const at::Tensor& t, CapturedTensor* c) {
  if (!t.defined()) return false;
  c->dtype = dtypeOf(t.scalar_type());
  if (c->dtype == DType::kUnknown) return false;
  c->shape.assign(t.sizes().begin(), t.sizes().end());
  c->format = t.dim() == 4 ? "NCHW" : "ND";
  c->bytes = static_cast<size_t>(t.numel()) * tensor::dtypeSize(c->dtype);
  return true;
}

// describe() plus, when `with_data`, the elements in logical order, and the statistics: now, or
// with `stats_later` (and data) left to the DumpWriter threads, so the op thread only copies.
// Data buffers come from `pool` when given.
bool capture(const at::Tensor& t, bool with_data, CapturedTensor* c, bool stats_later = false,
             PayloadPool* pool = nullptr) {
  if (!describe(t, c)) return false;
  const size_t n = static_cast<size_t>(t.numel());
  if (n == 0) {
    c->stats = tensor::computeStats(nullptr, c->dtype, 0);
    return true;
  }
  const uint8_t* src = nullptr;
  std::vector<uint8_t> scratch;
  if (with_data && pool) c->data = pool->take(c->bytes);
  if (t.is_contiguous()) {
    src = static_cast<const uint8_t*>(t.data_ptr());
    if (with_data) c->data.assign(src, src + c->bytes);
  } else {
    auto& buf = with_data ? c->data : scratch;
    buf.resize(c->bytes);
    gather(t, buf.data());
    src = buf.data();
  }
  c->stats_pending = with_data && stats_later;
  if (!c->stats_pending) c->stats = tensor::computeStats(with_data ? c->data.data() : src, c->dtype, n);
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

enum Phase { kForward, kBackward, kUpdate, kPhases };
const char* const kPhaseNames[kPhases] = {"forward", "backward", "update"};

constexpr int64_t kNoStep = std::numeric_limits<int64_t>::min();
constexpr int64_t kSizingStep = kNoStep + 1;  // the numbering "step" of a sizing pass
// A tensor_dumps row beyond its payload: ids, statistics, texts and SQLite's record overhead
// (about; the texts are added).
constexpr uint64_t kRowOverhead = 96;

}  // namespace

// The op in flight on this thread, between the observer's kBefore and kAfter calls. Outside the
// anonymous namespace: Dumper::Impl's lambdas capture it, and a member of internal linkage in
// them is what -Wsubobject-linkage warns about.
struct PendingOp {
  bool active = false;
  bool sizing = false;  // counted by a sizing pass, not dumped
  std::string op_name, op_type;
  int64_t step = -1;
  int64_t op_id = -1;
  int device = 0;
  std::vector<CapturedTensor> inputs;
  // Overflow mode: inputs are captured only when the op overflows; arguments the op writes are
  // snapshotted before it runs.
  std::vector<at::Tensor> input_refs;
  std::vector<std::optional<CapturedTensor>> input_snapshots;
  bool status_before = false;
};

namespace {

thread_local PendingOp t_pending;
thread_local bool t_in_dumper = false;  // recursion guard: the dumper's own work is never dumped
thread_local bool t_update = false;     // inside a Dumper::UpdatePhase

// One filesystem's share of a dump: a path on it and the bytes one step puts there.
struct SpaceNeed {
  std::string path;
  uint64_t per_step = 0;
};

// "3.5 MiB (3670016 bytes)": rounded for people, exact for scripts.
std::string bytesText(uint64_t n) {
  const std::string exact = std::to_string(n) + " bytes";
  return n < 1024 ? exact : formatBytes(n) + " (" + exact + ")";
}

// OK when every filesystem among `needs` (paths on the same device add up) has room for `steps`
// steps; otherwise an error naming its paths, the bytes per step, the steps, the total and the
// free bytes.
Status spaceShortfall(const std::vector<SpaceNeed>& needs, int64_t steps) {
  struct Fs {
    dev_t dev;
    bool known;
    std::vector<std::string> paths;
    uint64_t per_step;
  };
  std::vector<Fs> filesystems;
  for (const SpaceNeed& n : needs) {
    if (n.path.empty() || n.per_step == 0) continue;
    struct stat st {};
    const bool known = ::stat(n.path.c_str(), &st) == 0;
    auto same = std::find_if(filesystems.begin(), filesystems.end(),
                             [&](const Fs& f) { return known && f.known && f.dev == st.st_dev; });
    if (same == filesystems.end()) {
      filesystems.push_back({st.st_dev, known, {n.path}, n.per_step});
    } else {
      same->paths.push_back(n.path);
      same->per_step += n.per_step;
    }
  }
  for (const Fs& f : filesystems) {
    ASSIGN_OR_RETURN(uint64_t free, freeBytes(f.paths[0]));
    const uint64_t total = steps > 0 && f.per_step > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(steps)
                               ? std::numeric_limits<uint64_t>::max()
                               : f.per_step * static_cast<uint64_t>(std::max<int64_t>(steps, 0));
    if (total <= free) continue;
    std::string where;
    for (const auto& p : f.paths) where += (where.empty() ? "" : " and ") + p;
    const std::string need = std::to_string(steps) + (steps == 1 ? " dumped step needs " : " dumped steps need ");
    return failedPrecondition("dump.dump_path: not enough free space: " + where + " has " + bytesText(free) +
                              " free, but " + need + bytesText(total) + ", " + bytesText(f.per_step) +
                              " per step; set \"force\": true in the dump config (npuscope train: --dump-force) " +
                              "to dump anyway");
  }
  return Status::ok();
}

}  // namespace

StatusOr<uint64_t> freeBytes(const std::string& path) {
  if (const char* fake = std::getenv("NPUSCOPE_FAKE_FREE_BYTES")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(fake, &end, 10);
    if (end == fake || *end) return invalidArgument(std::string("NPUSCOPE_FAKE_FREE_BYTES: not a byte count: ") + fake);
    return static_cast<uint64_t>(v);
  }
  std::error_code ec;
  const auto space = std::filesystem::space(path, ec);
  if (ec) return ioError(path + ": cannot query the free space: " + ec.message());
  return static_cast<uint64_t>(space.available);
}

struct Dumper::Impl {
  mutable std::mutex mu;
  DumpConfig config;
  bool configured = false;
  TraceWriter* writer = nullptr;
  std::function<int64_t()> step_getter;
  std::atomic<OpIdSource> op_id_source{nullptr};
  std::atomic<int64_t> step{0};
  std::atomic<bool> started{false};
  std::atomic<bool> sizing{false};
  std::atomic<bool> halted{false};  // a write error stopped dumping
  Status error;
  DumperCounters counters;
  std::vector<OverflowHit> hits;
  std::atomic<int64_t> overflow_found{0};
  std::string run_dir;
  std::atomic<uint64_t> task_id{0};
  std::unique_ptr<DumpWriter> files;  // between start() and stop()
  // Payload buffers, kept across start() and stop(): a run dumping several steps, or a program
  // dumping in several windows, touches fresh memory only for its first step.
  std::unique_ptr<PayloadPool> pool = std::make_unique<PayloadPool>(size_t{64} << 20);
  bool restore_tracking = false;
  // Call numbering: per step, per phase and type.
  int64_t numbering_step = kNoStep;
  std::unordered_map<std::string, int64_t> calls[kPhases];
  uint64_t step_bytes = 0;      // payload of the step being dumped
  bool first_step_seen = false;  // the first dumped step's size was looked at
  std::optional<DumpSizeEstimate> estimate;  // what checkFreeSpace() was told before start()
  DumpSizeEstimate sized;        // the sizing pass's count

  int64_t currentStep() const { return step_getter ? step_getter() : step.load(std::memory_order_relaxed); }

  void halt(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (halted.exchange(true)) return;
    error = s;
    consoleLine(stderr, "npuscope: dump stopped: " + s.message() + "; " + std::to_string(counters.tensors) +
                            " tensors (" + formatBytes(counters.payload_bytes) + ") of " +
                            std::to_string(counters.ops_dumped) + " ops were dumped before" +
                            (config.stop_on_error ? "" : " (training goes on)"));
  }

  void resetNumbering(int64_t step_value) {
    numbering_step = step_value;
    for (auto& c : calls) c.clear();
    step_bytes = 0;
  }

  // Called under mu at the first op of a new step. Without a size estimate (or when the step
  // outgrew it), reports the size of the first dumped step and stops dumping when the
  // remaining steps of a bounded dump_step cannot fit in dump_path.
  void checkFirstStep(int64_t finished_step) {
    if (first_step_seen || step_bytes == 0) return;
    first_step_seen = true;
    if (estimate && step_bytes <= estimate->payload_bytes) return;
    consoleLine(stderr, "npuscope: dump: " + formatBytes(step_bytes) + " of tensors per step (step " +
                            std::to_string(finished_step) + (estimate ? ", more than estimated" : "") + ")" +
                            (config.steps.all() ? ", every step requested" : ""));
    if (config.dump_path.empty() || config.steps.all() || config.force) return;
    const int64_t remaining = config.steps.countIn(finished_step + 1, std::numeric_limits<int64_t>::max());
    Status s = spaceShortfall({{config.dump_path, step_bytes}}, remaining);
    if (s.isOk()) return;
    halted = true;
    error = s;
    consoleLine(stderr, "npuscope: dump stopped: " + error.message());
  }

  void before(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
    PendingOp& p = t_pending;
    p.active = false;
    if (halted.load(std::memory_order_relaxed)) return;
    const bool sizing_pass = sizing.load(std::memory_order_relaxed);
    const bool overflow_mode = config.data == DumpDataKind::kOverflow;
    if (overflow_mode && overflow_found.load() >= config.overflow_limit) return;
    const int64_t s = sizing_pass ? kSizingStep : currentStep();
    if (!sizing_pass && !config.steps.contains(s)) return;
    const Phase phase = torch::autograd::get_current_graph_task_nodes_in_graph() != nullptr ? kBackward
                        : t_update                                                         ? kUpdate
                                                                                           : kForward;
    if (phase == kUpdate && !config.dump_update) return;
    const std::string& type = schema.name();
    const std::string short_type = type.rfind("aten::", 0) == 0 ? type.substr(6) : type;
    int64_t call = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (s != numbering_step) {
        if (numbering_step != kNoStep) checkFirstStep(numbering_step);
        resetNumbering(s);
      }
      call = calls[phase][short_type]++;
      if (!sizing_pass) ++counters.ops_seen;
    }
    if (halted.load()) return;
    std::string name = short_type + "." + std::to_string(call) + "." + kPhaseNames[phase];
    if (!config.keepsOp(type, name)) return;
    p.active = true;
    p.sizing = sizing_pass;
    p.op_name = std::move(name);
    p.op_type = type;
    p.step = s;
    p.device = deviceOf(args);
    const OpIdSource op_id = op_id_source.load(std::memory_order_relaxed);
    p.op_id = op_id && !sizing_pass ? op_id() : -1;
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
          std::optional<CapturedTensor> snap;
          if (written) {
            CapturedTensor c;
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
    for (size_t i = 0; i < args.size(); ++i) {
      if (ignoredInput(schema, i)) continue;
      forEachTensor(args.slice(i, 1), [&](const at::Tensor& t) { take(p, t, &p.inputs); });
    }
  }

  // Captures `t` into `list` (only its description in a sizing pass).
  void take(const PendingOp& p, const at::Tensor& t, std::vector<CapturedTensor>* list) const {
    CapturedTensor c;
    const bool tensor_mode = config.data == DumpDataKind::kTensor;
    const bool kept =
        p.sizing ? describe(t, &c) : capture(t, tensor_mode, &c, /*stats_later=*/tensor_mode, pool.get());
    if (!kept) return;
    if (tensor_mode && !p.sizing && writer) hashPayload(c);  // rows may share it (DumpWriter::push)
    list->push_back(std::move(c));
  }

  void after(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> results) {
    PendingOp& p = t_pending;
    if (!p.active) return;
    p.active = false;
    if (halted.load(std::memory_order_relaxed)) return;
    std::vector<CapturedTensor> outputs;
    if (config.data == DumpDataKind::kOverflow) {
      std::string detail;
      if (npu::overflow_mode() == npu::OverflowMode::kSaturation) {
        if (npu::get_float_status(p.device)) detail = "float status register";
        if (p.status_before) npu::raise_float_status(p.device);
      }
      int out_idx = 0;
      forEachTensor(results, [&](const at::Tensor& t) {
        CapturedTensor c;
        if (capture(t, true, &c)) {
          if (tensor::isFloating(c.dtype) && (c.stats.nan_count || c.stats.inf_count)) {
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
          CapturedTensor c;
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
      forEachTensor(results, [&](const at::Tensor& t) { take(p, t, &outputs); });
    }
    if (p.inputs.empty() && outputs.empty()) return;
    if (p.sizing) {
      count(p, outputs);
    } else {
      emit(p, outputs);
    }
  }

  // A sizing pass: what this op would put in its file and its rows.
  void count(const PendingOp& p, const std::vector<CapturedTensor>& outputs) {
    const bool with_data = config.data != DumpDataKind::kStats;
    DumpSizeEstimate e;
    e.ops = 1;
    for (const auto* list : {&p.inputs, &outputs}) {
      for (const auto& c : *list) {
        ++e.tensors;
        e.payload_bytes += c.bytes;
        e.trace_bytes += kRowOverhead + p.op_name.size() + p.op_type.size() + (with_data ? c.bytes : 0);
      }
    }
    if (!config.dump_path.empty()) {
      e.file_bytes =
          dumpFileSize(p.op_name, unixMicros(), fileTensors(p.inputs, with_data), fileTensors(outputs, with_data));
    }
    std::lock_guard<std::mutex> lock(mu);
    sized.ops += e.ops;
    sized.tensors += e.tensors;
    sized.payload_bytes += e.payload_bytes;
    sized.file_bytes += e.file_bytes;
    sized.trace_bytes += e.trace_bytes;
  }

  // Hands the op to the DumpWriter threads (its file, then its rows).
  void emit(PendingOp& p, std::vector<CapturedTensor>& outputs) {
    DumpedOp op;
    op.with_data = config.data != DumpDataKind::kStats;
    if (!run_dir.empty()) {
      op.dir = run_dir + "/" + std::to_string(p.device);
      op.dump_time_us = unixMicros();
      op.file = dumpFileName(p.op_type, p.op_name, task_id.fetch_add(1), 0, op.dump_time_us);
    }
    op.op_name = p.op_name;
    op.op_type = p.op_type;
    op.step = p.step;
    op.op_id = p.op_id;
    uint64_t bytes = 0;
    for (const auto* list : {&p.inputs, &outputs})
      for (const auto& c : *list) bytes += c.bytes;
    op.inputs = std::move(p.inputs);
    op.outputs = std::move(outputs);
    p.inputs.clear();
    {
      std::lock_guard<std::mutex> lock(mu);
      step_bytes += bytes;
    }
    files->push(std::move(op));
  }

  // A DumpWriter thread wrote `op` (called in push order).
  void written(const DumpedOp& op) {
    std::lock_guard<std::mutex> lock(mu);
    ++counters.ops_dumped;
    counters.files += !op.dir.empty();
    for (const auto* list : {&op.inputs, &op.outputs}) {
      counters.tensors += list->size();
      for (const auto& c : *list) {
        counters.payload_bytes += c.bytes;
        if (c.same_as != 0) counters.shared_payload_bytes += c.bytes;
      }
    }
  }
};

bool tensorPayload(const at::Tensor& t, std::vector<uint8_t>* bytes) {
  CapturedTensor c;
  if (!describe(t, &c)) return false;
  bytes->resize(c.bytes);
  if (c.bytes == 0) return true;
  if (t.is_contiguous()) {
    std::memcpy(bytes->data(), t.data_ptr(), c.bytes);
  } else {
    gather(t, bytes->data());
  }
  return true;
}

MsprobeStats msprobeStats(const at::Tensor& t, bool with_crc32) {
  MsprobeStats out;
  CapturedTensor c;
  if (!describe(t, &c)) return out;
  out.dumpable = true;
  const size_t n = static_cast<size_t>(t.numel());
  if (n == 0) return out;
  std::vector<uint8_t> scratch;
  const uint8_t* src = nullptr;
  if (t.is_contiguous()) {
    src = static_cast<const uint8_t*>(t.data_ptr());
  } else {
    scratch.resize(c.bytes);
    gather(t, scratch.data());
    src = scratch.data();
  }
  // Large tensors in chunks on the intra-op threads (the step's own ops use them the same way),
  // combined: min / max, the sums behind mean and norm, the counts.
  tensor::TensorStats s;
  constexpr int64_t kChunk = int64_t{1} << 20;  // below ~8 MB one thread reads faster than two
  const size_t es = tensor::dtypeSize(c.dtype);
  if (static_cast<int64_t>(n) <= 2 * kChunk) {
    s = tensor::computeStats(src, c.dtype, n);
  } else {
    const int64_t chunks = (static_cast<int64_t>(n) + kChunk - 1) / kChunk;
    std::vector<tensor::TensorStats> parts(static_cast<size_t>(chunks));
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const size_t first = static_cast<size_t>(k * kChunk);
        const size_t count = std::min<size_t>(static_cast<size_t>(kChunk), n - first);
        parts[static_cast<size_t>(k)] = tensor::computeStats(src + first * es, c.dtype, count);
      }
    });
    double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
    int64_t finite_or_inf = 0;
    for (const tensor::TensorStats& p : parts) {
      s.nan_count += p.nan_count;
      s.inf_count += p.inf_count;
      const int64_t m = p.count - p.nan_count;
      if (m == 0) continue;
      finite_or_inf += m;
      sum += p.mean * static_cast<double>(m);
      sq += p.l2norm * p.l2norm;
      mn = std::min(mn, p.min);
      mx = std::max(mx, p.max);
    }
    s.count = static_cast<int64_t>(n);
    s.min = mn;
    s.max = mx;
    s.mean = finite_or_inf ? sum / static_cast<double>(finite_or_inf) : NAN;
    s.l2norm = std::sqrt(sq);
  }
  out.has_minmax = true;
  out.has_mean = c.dtype != DType::kBool;
  if (s.nan_count > 0) {
    out.max = out.min = out.mean = out.norm = std::numeric_limits<double>::quiet_NaN();
  } else {
    out.max = s.max;
    out.min = s.min;
    out.mean = s.mean;
    out.norm = s.l2norm;
  }
  if (with_crc32) out.crc32 = static_cast<uint32_t>(::crc32(0L, src, static_cast<uInt>(c.bytes)));
  return out;
}

Dumper::Dumper() : impl_(std::make_unique<Impl>()) {}
Dumper::~Dumper() = default;

Dumper& Dumper::instance() {
  static Dumper* d = new Dumper();  // never destroyed: the observer may run during exit
  return *d;
}

namespace {
Dumper::Impl* g_impl = nullptr;
// Observer calls in progress, and whether new ones may start: stop() and endSizing() wait for
// the calls that saw the observer before it was removed.
std::atomic<int> g_in_flight{0};
std::atomic<bool> g_accepting{false};

void observeOp(npu::OpPhase phase, const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> values) {
  if (t_in_dumper || !g_impl) return;
  g_in_flight.fetch_add(1);
  if (!g_accepting.load()) {
    g_in_flight.fetch_sub(1);
    return;
  }
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
  g_in_flight.fetch_sub(1);
}

void installObserver(Dumper::Impl* impl) {
  g_impl = impl;
  g_accepting.store(true);
  npu::set_op_observer(&observeOp);
}

void removeObserver() {
  g_accepting.store(false);
  npu::set_op_observer(nullptr);
  while (g_in_flight.load() != 0) std::this_thread::yield();
}
}  // namespace

Dumper::UpdatePhase::UpdatePhase() : outer_(t_update) { t_update = true; }
Dumper::UpdatePhase::~UpdatePhase() { t_update = outer_; }

Status Dumper::configure(const DumpConfig& config) {
  if (started() || impl_->sizing) return failedPrecondition("dumper: configure() while dumping; stop() first");
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

void Dumper::setOpIdSource(OpIdSource source) { impl_->op_id_source.store(source); }

Status Dumper::beginSizing() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.configured) return failedPrecondition("dumper: beginSizing() before configure()");
    if (m.started || m.sizing) return failedPrecondition("dumper: beginSizing() while dumping or sizing");
    if (m.config.data == DumpDataKind::kOverflow) {
      return failedPrecondition("dumper: overflow mode dumps at most overflow_limit ops; nothing to size");
    }
    m.sized = DumpSizeEstimate();
    m.halted = false;
    m.error = Status::ok();
    m.resetNumbering(kSizingStep);
    m.sizing = true;
  }
  installObserver(&m);
  return Status::ok();
}

DumpSizeEstimate Dumper::endSizing() {
  Impl& m = *impl_;
  if (!m.sizing) return DumpSizeEstimate();
  removeObserver();
  std::lock_guard<std::mutex> lock(m.mu);
  m.sizing = false;
  m.resetNumbering(kNoStep);
  return m.sized;
}

Status Dumper::checkFreeSpace(const DumpSizeEstimate& per_step, int64_t steps, const std::string& trace_path) {
  Impl& m = *impl_;
  DumpConfig c;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.estimate = per_step;
    c = m.config;
  }
  std::vector<SpaceNeed> needs;
  if (!c.dump_path.empty()) needs.push_back({c.dump_path, per_step.file_bytes});
  if (!trace_path.empty()) {
    const std::string dir = std::filesystem::path(trace_path).parent_path().string();
    needs.push_back({dir.empty() ? "." : dir, per_step.trace_bytes});
  }
  uint64_t bytes = 0;
  for (const auto& n : needs) bytes += n.per_step;
  std::string where;
  for (const auto& n : needs) {
    if (n.per_step == 0) continue;
    auto free = freeBytes(n.path);
    where += std::string(where.empty() ? "" : "; ") + formatBytes(n.per_step) + " per step in " + n.path +
             (free.isOk() ? " (" + formatBytes(*free) + " free)" : "");
  }
  std::fprintf(stderr,
               "npuscope: dump: about %s per step (%llu ops, %llu tensors), %lld dumped step%s: %s in total; %s\n",
               formatBytes(bytes).c_str(), static_cast<unsigned long long>(per_step.ops),
               static_cast<unsigned long long>(per_step.tensors), static_cast<long long>(steps), steps == 1 ? "" : "s",
               formatBytes(bytes * static_cast<uint64_t>(std::max<int64_t>(steps, 0))).c_str(), where.c_str());
  Status s = spaceShortfall(needs, steps);
  if (s.isOk() || !c.force) return s;
  std::fprintf(stderr, "npuscope: dump: warning: dumping anyway (force): %s\n", s.message().c_str());
  return Status::ok();
}

Status Dumper::start() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.configured) return failedPrecondition("dumper: start() before configure()");
    if (m.started || m.sizing) return failedPrecondition("dumper: already started");
    m.halted = false;
    m.error = Status::ok();
    m.counters = DumperCounters();
    m.hits.clear();
    m.overflow_found = 0;
    m.resetNumbering(kNoStep);
    m.first_step_seen = false;
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
    DumpWriter::Options o;
    o.rows = m.writer;
    o.on_error = [&m](const Status& s) { m.halt(s); };
    o.on_written = [&m](const DumpedOp& op) { m.written(op); };
    o.trace_path = m.writer ? m.writer->path() : "";
    o.keep_reserve = true;
    o.pool = m.pool.get();
    m.files = std::make_unique<DumpWriter>(std::move(o));
    m.started = true;
  }
  installObserver(&m);
  return Status::ok();
}

Status Dumper::stop() {
  Impl& m = *impl_;
  if (!m.started) return Status::ok();
  removeObserver();
  m.files.reset();  // every captured op written and handed to the TraceWriter (or dropped)
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.restore_tracking) npu::set_float_status_tracking(false);
  m.started = false;
  m.estimate.reset();
  return m.error;
}

bool Dumper::started() const { return impl_->started.load(); }

Status Dumper::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error;
}

Status Dumper::flush() {
  if (impl_->files) impl_->files->drain();
  return status();
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
