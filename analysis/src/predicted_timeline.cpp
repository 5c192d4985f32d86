#include "npuscope/analysis/predicted_timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "npuscope/analysis/op_support.h"
#include "npuscope/store/format.h"
#include "npuscope/store/saturating.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {
namespace {


// Ops that only describe a tensor differently: no device kernel on a real NPU, whatever the
// emulator's cost model charged them (it models every innermost npu op).
bool isViewOp(std::string_view name) {
  static const std::string_view kViews[] = {
      "aten::view",       "aten::_reshape_alias", "aten::reshape",   "aten::as_strided", "aten::as_strided_",
      "aten::t",          "aten::transpose",      "aten::permute",   "aten::expand",     "aten::expand_as",
      "aten::slice",      "aten::select",         "aten::narrow",    "aten::squeeze",    "aten::unsqueeze",
      "aten::squeeze_",   "aten::unsqueeze_",     "aten::flatten",   "aten::unflatten",  "aten::alias",
      "aten::detach",     "aten::detach_",        "aten::view_as",   "aten::unfold",     "aten::split",
      "aten::chunk",      "aten::unbind",         "aten::diagonal",  "aten::numpy_T",    "aten::lift_fresh",
      "aten::resolve_conj", "aten::resolve_neg",  "aten::empty",     "aten::empty_like", "aten::empty_strided",
      "aten::set_",       "aten::resize_",
  };
  for (std::string_view v : kViews)
    if (name == v) return true;
  return false;
}

// Device indexes above this are not an npu of a recorded run (a corrupt file): host ops.
constexpr int32_t kMaxDevice = 1023;

PredictedRole roleOf(const PredictedInput& op) {
  const std::string_view n = op.name;
  if (op.device > kMaxDevice) return PredictedRole::kHostOp;
  if (startsWith(n, "autograd::engine::evaluate_function")) return PredictedRole::kAutograd;
  if (startsWith(n, "hcom_") && op.device >= 0) return PredictedRole::kCollective;
  if (n.find("::") == std::string_view::npos || startsWith(n, "torch::autograd::")) return PredictedRole::kFree;
  if (op.device >= 0 && opSupport(n).level == OpSupportLevel::kFallback) return PredictedRole::kFallback;
  if (op.device >= 0 && op.device_dur_ns >= 0 && !isViewOp(n)) return PredictedRole::kKernel;
  return PredictedRole::kHostOp;
}

}  // namespace

bool hidesInnerOps(const OpSlice& op) {
  const PredictedRole r = roleOf(predictedInput(op));
  return r == PredictedRole::kKernel || r == PredictedRole::kFallback;
}

double PredictedStep::deviceIdleShare() const {
  if (step_ns <= 0) return 0;
  if (devices == 0) return 1;
  const double busy = static_cast<double>(device_busy_ns) / (static_cast<double>(devices) * static_cast<double>(step_ns));
  return std::clamp(1 - busy, 0.0, 1.0);
}

double PredictedStep::hostWaitShare() const {
  return step_ns > 0 ? std::clamp(static_cast<double>(host_wait_ns) / static_cast<double>(step_ns), 0.0, 1.0) : 0;
}

BoundBy boundBy(const PredictedStep& s) {
  if (s.deviceIdleShare() > 0.5) return BoundBy::kHost;
  const int64_t per_device = s.devices > 0 ? s.device_busy_ns / s.devices : 0;
  if (per_device > s.dispatch_ns) return BoundBy::kDevice;
  return BoundBy::kBalanced;
}

const char* boundByName(BoundBy b) {
  switch (b) {
    case BoundBy::kHost: return "host-bound";
    case BoundBy::kDevice: return "device-bound";
    case BoundBy::kBalanced: break;
  }
  return "balanced";
}

bool isHostSyncOpName(std::string_view name) {
  return name == "aten::_local_scalar_dense" || name == "npu::synchronize" || name == "npu::get_float_status";
}

int64_t inputBytes(std::string_view shapes, std::string_view dtypes) {
  if (shapes.empty() || dtypes.empty()) return -1;
  std::vector<int64_t> sizes;  // element size per input, 0: not a tensor
  size_t begin = 0;
  for (;;) {
    const size_t comma = dtypes.find(',', begin);
    std::string_view t = dtypes.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    int64_t sz = 0;
    if (t == "float" || t == "int" || t == "unsigned int") sz = 4;
    else if (t == "c10::Half" || t == "c10::BFloat16" || t == "short") sz = 2;
    else if (t == "double" || t == "long int" || t == "long" || t == "c10::complex<float>") sz = 8;
    else if (t == "bool" || t == "signed char" || t == "unsigned char") sz = 1;
    sizes.push_back(sz);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  int64_t total = 0, product = 1, number = -1;
  int depth = 0;
  size_t input = 0;
  for (char c : shapes) {
    if (c == '[') {
      if (++depth == 2) product = 1, number = -1;
    } else if (c >= '0' && c <= '9') {
      number = (number < 0 ? 0 : number * 10) + (c - '0');
      if (number > (int64_t{1} << 40)) return -1;
    } else if (c == ',' || c == ']') {
      if (depth == 2 && number >= 0) {
        if (product > (int64_t{1} << 50) / std::max<int64_t>(1, number)) return -1;
        product *= number;
      }
      number = -1;
      if (c == ']') {
        if (depth == 2) {
          if (input < sizes.size()) total += product * sizes[input];
          ++input;
        }
        --depth;
      } else if (depth == 1) {
        // between inputs
      }
    }
  }
  return total;
}

int64_t collectiveDurationNs(std::string_view name, int64_t bytes, const HostModelParams& p) {
  const double n = std::max(1, p.comm_ranks);
  const double s = static_cast<double>(std::max<int64_t>(0, bytes));
  const double bw = p.link_bytes_per_s > 0 ? p.link_bytes_per_s : 1;
  const double phase = static_cast<double>(p.comm_phase_ns);
  double ns;
  if (n <= 1) {
    ns = phase;  // one rank: nothing to move
  } else if (startsWith(name, "hcom_allReduce")) {
    ns = 2 * (phase + s / (n * bw) * 1e9);  // reduce-scatter + all-gather
  } else if (startsWith(name, "hcom_reduceScatter") || startsWith(name, "hcom_alltoall")) {
    ns = phase + s / (n * bw) * 1e9;  // 1/n of the data to each peer, all links at once
  } else if (startsWith(name, "hcom_barrier")) {
    ns = phase;
  } else {
    ns = phase + s / bw * 1e9;  // broadcast, all-gather, reduce, gather, scatter, send, receive
  }
  return saturatingRound(ns);
}

HostModelParams hostModelParamsFor(const RunRow& run) {
  HostModelParams p;
  if (run.world_size > 1 && run.world_size < 100000) p.comm_ranks = static_cast<int32_t>(run.world_size);
  return p;
}

PredictedInput predictedInput(const OpSlice& op) {
  PredictedInput in;
  in.id = op.id;
  in.parent_id = op.parent_id;
  in.start_ns = op.start_ns;
  in.device = op.device;
  in.device_dur_ns = op.device_dur_ns;
  in.host_sync = op.host_sync;
  in.backward = op.is_backward;
  in.name = op.name;
  if (startsWith(op.name, "hcom_")) in.bytes = inputBytes(op.input_shapes, op.input_dtypes);
  return in;
}

namespace {

// A step's ops as a forest: host order (by measured start, a parent before its children: ids
// grow in start order), each op's children in start order, and the roots.
struct OpForest {
  std::vector<std::vector<size_t>> children;
  std::vector<size_t> roots;
};
OpForest buildForest(std::vector<PredictedInput>& ops) {
  std::sort(ops.begin(), ops.end(), [](const PredictedInput& a, const PredictedInput& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.id < b.id;
  });
  std::unordered_map<int64_t, size_t> index;
  index.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) index.emplace(ops[i].id, i);
  OpForest f;
  f.children.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    auto it = ops[i].parent_id >= 0 ? index.find(ops[i].parent_id) : index.end();
    if (it == index.end()) {
      f.roots.push_back(i);
    } else if (it->second != i) {
      f.children[it->second].push_back(i);  // in start order, as ops are
    }
  }
  return f;
}

// The host and device clocks of one predicted step: the host spends its costs, launches go to
// each device's compute and communication streams, syncs wait for the streams to drain.
class StepClock {
 public:
  StepClock(const HostModelParams& p, PredictedStep* s) : p_(p), s_(*s) {}

  int64_t host() const { return host_; }

  // The host's cost of entering an op of `role`.
  void enter(PredictedRole role) {
    switch (role) {
      case PredictedRole::kKernel:
      case PredictedRole::kCollective:
      case PredictedRole::kFallback: spend(p_.dispatch_ns), ++s_.host_ops; break;
      case PredictedRole::kHostOp: spend(p_.composite_ns), ++s_.host_ops; break;
      case PredictedRole::kAutograd: spend(p_.autograd_node_ns), ++s_.host_ops; break;
      case PredictedRole::kFree: break;
    }
  }

  // Leaving an op: its launch (kernel, collective), its host fallback, its sync; `o` (if any)
  // gets its device placement.
  void leave(const PredictedInput& op, PredictedRole role, PredictedOp* o) {
    if (role == PredictedRole::kKernel) {
      kernel(op, o);
    } else if (role == PredictedRole::kCollective) {
      collective(op, o);
    } else if (role == PredictedRole::kFallback) {
      waitForDevice();
      host_ = saturatingAdd(host_, std::max<int64_t>(0, op.device_dur_ns));
    }
    if ((op.host_sync || isHostSyncOpName(op.name)) && role != PredictedRole::kFallback) {
      waitForDevice();
      spend(p_.sync_ns);
    }
  }

  // The step's totals once every op has left.
  void finish() {
    s_.host_ns = host_;
    s_.step_ns = std::max(host_, drained());
    // Communication still running when the compute streams are done is exposed too.
    for (size_t d = 0; d < comm_end_.size(); ++d) {
      const int64_t done = std::max(host_, stream_end_[d]);
      if (comm_end_[d] > done) s_.comm_wait_ns = saturatingAdd(s_.comm_wait_ns, comm_end_[d] - done);
    }
    int64_t first = INT64_MAX;
    for (size_t d = 0; d < first_start_.size(); ++d) {
      if (first_start_[d] < 0) continue;
      ++s_.devices;
      first = std::min(first, first_start_[d]);
    }
    if (s_.devices) {
      int64_t last = 0;
      for (int64_t e : stream_end_) last = std::max(last, e);
      s_.device_span_ns = last - first;
    }
  }

 private:
  void kernel(const PredictedInput& op, PredictedOp* o) {
    const int64_t dur = saturatingRound(static_cast<double>(op.device_dur_ns) * p_.device_scale);
    const int64_t launched = launch();
    const size_t d = streams(op.device);
    int64_t start = std::max(launched, stream_end_[d]);
    if (!op.backward && comm_end_[d] > start) {  // outside backward: waits for the collectives
      s_.comm_wait_ns = saturatingAdd(s_.comm_wait_ns, comm_end_[d] - start);
      start = comm_end_[d];
    }
    stream_end_[d] = saturatingAdd(start, dur);
    if (first_start_[d] < 0) first_start_[d] = start;
    s_.device_busy_ns = saturatingAdd(s_.device_busy_ns, dur);
    ++s_.kernels;
    if (o) o->device_start_ns = start, o->device_dur_ns = dur;
  }

  void collective(const PredictedInput& op, PredictedOp* o) {
    const int64_t dur = collectiveDurationNs(op.name, op.bytes, p_);
    const int64_t launched = launch();
    const size_t d = streams(op.device);
    const int64_t start = std::max({launched, stream_end_[d], comm_end_[d]});
    comm_end_[d] = saturatingAdd(start, dur);
    s_.comm_ns = saturatingAdd(s_.comm_ns, dur);
    ++s_.collectives;
    if (o) o->device_start_ns = start, o->device_dur_ns = dur;
  }

  int64_t drained() const {
    int64_t t = 0;
    for (int64_t e : stream_end_) t = std::max(t, e);
    for (int64_t e : comm_end_) t = std::max(t, e);
    return t;
  }
  // The streams of `device`, created on first use; returns its index.
  size_t streams(int32_t device) {
    const size_t d = static_cast<size_t>(device);
    if (stream_end_.size() <= d) stream_end_.resize(d + 1, 0), first_start_.resize(d + 1, -1), comm_end_.resize(d + 1, 0);
    return d;
  }
  void waitForDevice() {
    const int64_t t = drained();
    if (t > host_) s_.host_wait_ns = saturatingAdd(s_.host_wait_ns, t - host_), host_ = t;
    ++s_.syncs;
  }
  void spend(int64_t ns) {
    host_ = saturatingAdd(host_, ns);
    s_.dispatch_ns = saturatingAdd(s_.dispatch_ns, ns);
  }
  // Launches one device task: the time it reaches the device.
  int64_t launch() {
    if (p_.task_queue) {
      spend(p_.enqueue_ns);
      launcher_ = saturatingAdd(std::max(launcher_, host_), p_.launch_ns);
      return launcher_;
    }
    spend(p_.launch_ns);
    return host_;
  }

  const HostModelParams& p_;
  PredictedStep& s_;
  int64_t host_ = 0, launcher_ = 0;
  std::vector<int64_t> stream_end_;   // per device: when its predicted stream drains
  std::vector<int64_t> first_start_;  // per device: first kernel start
  std::vector<int64_t> comm_end_;     // per device: when its communication stream drains
};

}  // namespace

PredictedStep predictStep(int64_t step, std::vector<PredictedInput> ops, const HostModelParams& p,
                          std::vector<PredictedOp>* out) {
  PredictedStep s;
  s.step = step;
  if (out) out->clear();
  const OpForest forest = buildForest(ops);
  StepClock clock(p, &s);

  // Depth first with an explicit stack (op, role, next child, slot in `out`): inputs come from
  // files, so their depth is not trusted to the call stack.
  struct Frame {
    size_t op;
    PredictedRole role;
    size_t next_child;
    size_t out_slot;
  };
  std::vector<Frame> stack;
  for (size_t root : forest.roots) {
    stack.push_back({root, roleOf(ops[root]), 0, SIZE_MAX});
    bool entered = false;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const PredictedInput& op = ops[f.op];
      if (!entered) {
        if (out) {
          f.out_slot = out->size();
          PredictedOp o;
          o.id = op.id;
          o.role = f.role;
          o.device = op.device;
          o.host_start_ns = clock.host();
          o.depth = static_cast<int32_t>(stack.size()) - 1;
          out->push_back(o);
        }
        clock.enter(f.role);
      }
      // Children of a kernel or a host fallback are the emulator's own work.
      const bool opaque = f.role == PredictedRole::kKernel || f.role == PredictedRole::kFallback ||
                          f.role == PredictedRole::kCollective;
      const std::vector<size_t>& children = forest.children[f.op];
      if (!opaque && f.next_child < children.size()) {
        const size_t c = children[f.next_child++];
        stack.push_back({c, roleOf(ops[c]), 0, SIZE_MAX});
        entered = false;
        continue;
      }
      PredictedOp* o = out && f.out_slot != SIZE_MAX ? &(*out)[f.out_slot] : nullptr;
      clock.leave(op, f.role, o);
      if (o) o->host_end_ns = clock.host();
      stack.pop_back();
      entered = true;
    }
  }
  clock.finish();
  return s;
}

StatusOr<std::vector<PredictedStep>> predictRun(TraceReader& reader, int64_t run_id, const HostModelParams& params,
                                                const std::optional<StepRange>& range) {
  ASSIGN_OR_RETURN(std::vector<StepRow> rows, reader.steps(run_id, range));
  std::vector<PredictedStep> out;
  constexpr size_t kStepsPerRead = 16;
  for (size_t at = 0; at < rows.size(); at += kStepsPerRead) {
    const size_t last = std::min(rows.size(), at + kStepsPerRead) - 1;
    ASSIGN_OR_RETURN(std::vector<OpSlice> ops, reader.stepOps(run_id, StepRange{rows[at].step, rows[last].step}));
    std::map<int64_t, std::vector<PredictedInput>> by_step;
    for (const OpSlice& op : ops) by_step[op.step].push_back(predictedInput(op));
    for (auto& [step, inputs] : by_step) out.push_back(predictStep(step, std::move(inputs), params));
  }
  return out;
}

PredictedStep PredictedSummary::total() const {
  PredictedStep s;
  s.step_ns = total_ns;
  s.device_busy_ns = device_busy_ns;
  s.host_wait_ns = host_wait_ns;
  s.dispatch_ns = dispatch_ns;
  s.kernels = kernels;
  s.host_ops = host_ops;
  s.syncs = syncs;
  s.collectives = collectives;
  s.comm_ns = comm_ns;
  s.comm_wait_ns = comm_wait_ns;
  s.devices = devices;
  return s;
}

std::string describePredictedStep(const PredictedStep& s) {
  char share[32];
  std::snprintf(share, sizeof share, "%.1f %%", 100 * (1 - s.deviceIdleShare()));
  std::string out = formatDuration(s.step_ns) + ": the host dispatches " + std::to_string(s.host_ops) + " ops in " +
                    formatDuration(s.dispatch_ns) + ", the device is busy " + formatDuration(s.device_busy_ns) + " (" +
                    share + (s.devices > 1 ? " per device" : "") + ")";
  if (s.syncs > 0) {
    out += ", the host waits " + formatDuration(s.host_wait_ns) + " at " + std::to_string(s.syncs) +
           (s.syncs == 1 ? " sync" : " syncs");
  }
  if (s.collectives > 0) {
    out += ", " + std::to_string(s.collectives) + (s.collectives == 1 ? " collective takes " : " collectives take ") +
           formatDuration(s.comm_ns) + " on the communication stream (" + formatDuration(s.comm_wait_ns) + " not overlapped)";
  }
  return out + ": " + boundByName(boundBy(s));
}

PredictedSummary summarizePrediction(const std::vector<PredictedStep>& steps) {
  PredictedSummary sum;
  std::vector<int64_t> times;
  for (const PredictedStep& s : steps) {
    ++sum.steps;
    times.push_back(s.step_ns);
    sum.total_ns += s.step_ns;
    sum.device_busy_ns += s.device_busy_ns;
    sum.host_wait_ns += s.host_wait_ns;
    sum.dispatch_ns += s.dispatch_ns;
    sum.kernels += s.kernels;
    sum.host_ops += s.host_ops;
    sum.syncs += s.syncs;
    sum.collectives += s.collectives;
    sum.comm_ns += s.comm_ns;
    sum.comm_wait_ns += s.comm_wait_ns;
    sum.devices = std::max(sum.devices, s.devices);
  }
  if (!times.empty()) {
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    sum.median_step_ns = times[times.size() / 2];
  }
  return sum;
}

}  // namespace npuscope
