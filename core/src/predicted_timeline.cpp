#include "npuscope/core/predicted_timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "npuscope/core/format.h"
#include "npuscope/core/op_support.h"
#include "npuscope/core/trace_reader.h"

namespace npuscope {
namespace {

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

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
  if (n.find("::") == std::string_view::npos || startsWith(n, "torch::autograd::")) return PredictedRole::kFree;
  if (op.device >= 0 && opSupport(n).level == OpSupportLevel::kFallback) return PredictedRole::kFallback;
  if (op.device >= 0 && op.device_dur_ns >= 0 && !isViewOp(n)) return PredictedRole::kKernel;
  return PredictedRole::kHostOp;
}

}  // namespace

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

PredictedInput predictedInput(const OpSlice& op) {
  PredictedInput in;
  in.id = op.id;
  in.parent_id = op.parent_id;
  in.start_ns = op.start_ns;
  in.device = op.device;
  in.device_dur_ns = op.device_dur_ns;
  in.host_sync = op.host_sync;
  in.name = op.name;
  return in;
}

PredictedStep predictStep(int64_t step, std::vector<PredictedInput> ops, const HostModelParams& p,
                          std::vector<PredictedOp>* out) {
  PredictedStep s;
  s.step = step;
  if (out) out->clear();
  // Host order: by measured start, a parent before its children (ids grow in start order).
  std::sort(ops.begin(), ops.end(), [](const PredictedInput& a, const PredictedInput& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.id < b.id;
  });
  std::unordered_map<int64_t, size_t> index;
  index.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) index.emplace(ops[i].id, i);
  std::vector<std::vector<size_t>> children(ops.size());
  std::vector<size_t> roots;
  for (size_t i = 0; i < ops.size(); ++i) {
    auto it = ops[i].parent_id >= 0 ? index.find(ops[i].parent_id) : index.end();
    if (it == index.end()) {
      roots.push_back(i);
    } else if (it->second != i) {
      children[it->second].push_back(i);  // in start order, as ops are
    }
  }

  int64_t host = 0, launcher = 0;
  std::vector<int64_t> stream_end;   // per device: when its predicted stream drains
  std::vector<int64_t> first_start;  // per device: first kernel start
  auto drained = [&] {
    int64_t t = 0;
    for (int64_t e : stream_end) t = std::max(t, e);
    return t;
  };
  auto waitForDevice = [&] {
    const int64_t t = drained();
    if (t > host) s.host_wait_ns += t - host, host = t;
    ++s.syncs;
  };
  auto spend = [&](int64_t ns) {
    host += ns;
    s.dispatch_ns += ns;
  };

  // Explicit stack (op, role, next child, slot in `out`): inputs come from files, so their depth
  // is not trusted to the call stack.
  struct Frame {
    size_t op;
    PredictedRole role;
    size_t next_child;
    size_t out_slot;
  };
  std::vector<Frame> stack;
  for (size_t root : roots) {
    stack.push_back({root, roleOf(ops[root]), 0, SIZE_MAX});
    bool entered = false;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const PredictedInput& op = ops[f.op];
      if (!entered) {
        // Enter the op.
        if (out) {
          f.out_slot = out->size();
          PredictedOp o;
          o.id = op.id;
          o.role = f.role;
          o.device = op.device;
          o.host_start_ns = host;
          o.depth = static_cast<int32_t>(stack.size()) - 1;
          out->push_back(o);
        }
        switch (f.role) {
          case PredictedRole::kKernel:
          case PredictedRole::kFallback: spend(p.dispatch_ns), ++s.host_ops; break;
          case PredictedRole::kHostOp: spend(p.composite_ns), ++s.host_ops; break;
          case PredictedRole::kAutograd: spend(p.autograd_node_ns), ++s.host_ops; break;
          case PredictedRole::kFree: break;
        }
      }
      // Children of a kernel or a host fallback are the emulator's own work.
      const bool opaque = f.role == PredictedRole::kKernel || f.role == PredictedRole::kFallback;
      if (!opaque && f.next_child < children[f.op].size()) {
        const size_t c = children[f.op][f.next_child++];
        stack.push_back({c, roleOf(ops[c]), 0, SIZE_MAX});
        entered = false;
        continue;
      }
      // Leave the op.
      PredictedOp* o = out && f.out_slot != SIZE_MAX ? &(*out)[f.out_slot] : nullptr;
      if (f.role == PredictedRole::kKernel) {
        const int64_t dur = static_cast<int64_t>(static_cast<double>(op.device_dur_ns) * p.device_scale + 0.5);
        int64_t launched;
        if (p.task_queue) {
          spend(p.enqueue_ns);
          launcher = std::max(launcher, host) + p.launch_ns;
          launched = launcher;
        } else {
          spend(p.launch_ns);
          launched = host;
        }
        const size_t d = static_cast<size_t>(op.device);
        if (stream_end.size() <= d) stream_end.resize(d + 1, 0), first_start.resize(d + 1, -1);
        const int64_t start = std::max(launched, stream_end[d]);
        stream_end[d] = start + dur;
        if (first_start[d] < 0) first_start[d] = start;
        s.device_busy_ns += dur;
        ++s.kernels;
        if (o) o->device_start_ns = start, o->device_dur_ns = dur;
      } else if (f.role == PredictedRole::kFallback) {
        waitForDevice();
        host += std::max<int64_t>(0, op.device_dur_ns);
      }
      if ((op.host_sync || isHostSyncOpName(op.name)) && f.role != PredictedRole::kFallback) {
        waitForDevice();
        spend(p.sync_ns);
      }
      if (o) o->host_end_ns = host;
      stack.pop_back();
      entered = true;
    }
  }
  s.host_ns = host;
  s.step_ns = std::max(host, drained());
  int64_t first = INT64_MAX;
  for (size_t d = 0; d < first_start.size(); ++d) {
    if (first_start[d] < 0) continue;
    ++s.devices;
    first = std::min(first, first_start[d]);
  }
  if (s.devices) s.device_span_ns = drained() - first;
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
    sum.devices = std::max(sum.devices, s.devices);
  }
  if (!times.empty()) {
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    sum.median_step_ns = times[times.size() / 2];
  }
  return sum;
}

}  // namespace npuscope
