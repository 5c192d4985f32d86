#include "npuscope/analysis/advisor.h"
#include "npuscope/analysis/first_nonfinite.h"
#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/analysis/predicted_timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "npuscope/store/format.h"
#include "npuscope/analysis/op_support.h"

namespace npuscope {

const char* severityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "info";
}

namespace {

std::string ms(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", static_cast<double>(ns) / 1e6);
  return b;
}

std::string pct(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f %%", 100.0 * share);
  return b;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::string gib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
  return b;
}

void notNative(const OpAggregateTable& ops, std::vector<Finding>* out) {
  Finding f;
  f.rule = "not_native_ops";
  int64_t calls = 0, time = 0;
  bool fails = false;
  std::string list;
  for (const OpAggregate& a : ops.rows) {
    const OpSupport s = opSupport(a.name);
    const bool fallback = s.level == OpSupportLevel::kFallback;
    const bool fail = s.level == OpSupportLevel::kUnsupported || s.level == OpSupportLevel::kNoKernel;
    if (!fallback && !fail) continue;
    fails |= fail;
    calls += a.calls;
    time += a.total_ns;
    f.ops.push_back(a.name);
    if (f.ops.size() <= 8) {
      list += (list.empty() ? "" : ", ") + a.name + " (" + opSupportLevelName(s.level) + ", " +
              std::to_string(a.calls) + " calls)";
    }
  }
  if (f.ops.empty()) return;
  f.severity = fails ? Severity::kCritical : Severity::kWarning;
  f.title = std::to_string(f.ops.size()) + " op(s) a real Ascend device would not run natively";
  f.evidence = list + (f.ops.size() > 8 ? ", ..." : "") + "; " + std::to_string(calls) + " calls, " + ms(time) +
               " of host time here (" + std::string(opSupportVersion()) + ")";
  f.suggestion = fails ? "ops marked unsupported / no_kernel fail on that torch_npu release: replace them, or move "
                         "them to the CPU explicitly; host-fallback ops copy their tensors to the host and back"
                       : "each host-fallback op synchronises the stream and copies its tensors over PCIe: replace it "
                         "with an equivalent the device runs, or keep that part of the model on the CPU";
  out->push_back(std::move(f));
}

// Steps in which an op takes an input shape it had not taken before. A model's per-parameter
// ops (copies and casts of each weight) take many shapes, but all of them in the first step or
// two (the first step that runs the optimizer); a dynamic-shape model brings new ones step after
// step. `per_step`: the by-shape op tables of the first steps, in step order.
void dynamicShapes(const std::vector<OpAggregateTable>& per_step, const AdvisorOptions& o, std::vector<Finding>* out) {
  std::map<std::string, std::set<std::string>> seen;
  std::map<std::string, int64_t> steps_with_new, new_shapes;
  for (size_t k = 0; k < per_step.size(); ++k) {
    std::set<std::string> fresh_here;
    for (const OpAggregate& a : per_step[k].rows) {
      if (a.input_shapes.empty() || !seen[a.name].insert(a.input_shapes).second || k == 0) continue;
      fresh_here.insert(a.name);
      ++new_shapes[a.name];
    }
    for (const std::string& n : fresh_here) ++steps_with_new[n];
  }
  std::vector<std::pair<int64_t, std::string>> many;
  for (const auto& [name, n] : steps_with_new) {
    if (n >= o.dynamic_shapes_min) many.push_back({n, name});
  }
  if (many.empty()) return;
  std::sort(many.rbegin(), many.rend());
  Finding f;
  f.rule = "dynamic_shapes";
  f.severity = Severity::kWarning;
  f.title = std::to_string(many.size()) + " op(s) keep taking new input shapes step after step";
  for (size_t i = 0; i < many.size(); ++i) {
    f.ops.push_back(many[i].second);
    if (i < 6) {
      f.evidence += (i ? ", " : "") + many[i].second + ": new shapes in " + std::to_string(many[i].first) +
                    " steps (" + std::to_string(new_shapes[many[i].second]) + " shapes)";
    }
  }
  if (many.size() > 6) f.evidence += ", ...";
  f.evidence += " of the first " + std::to_string(per_step.size()) + " steps";
  f.suggestion = "on Ascend each new input shape compiles a new operator (dynamic shapes stall every step that "
                 "brings one): pad or bucket inputs to a few fixed shapes";
  out->push_back(std::move(f));
}

void castOverhead(const OpAggregateTable& ops, const AdvisorOptions& o, std::vector<Finding>* out) {
  static const std::set<std::string> kCasts = {"aten::to", "aten::_to_copy", "aten::copy_", "aten::_copy_from",
                                               "aten::type_as", "aten::npu_format_cast", "npu::npu_format_cast",
                                               "aten::contiguous", "aten::clone"};
  int64_t self = 0, calls = 0;
  Finding f;
  for (const OpAggregate& a : ops.rows) {
    if (!kCasts.count(a.name)) continue;
    self += a.self_ns;
    calls += a.calls;
    f.ops.push_back(a.name);
  }
  if (ops.self_sum_ns <= 0) return;
  const double share = static_cast<double>(self) / static_cast<double>(ops.self_sum_ns);
  if (share < o.cast_share_min) return;
  f.rule = "cast_overhead";
  f.severity = share >= 2 * o.cast_share_min ? Severity::kWarning : Severity::kInfo;
  f.title = "dtype conversions and copies take " + pct(share) + " of the op time";
  f.evidence = std::to_string(calls) + " calls, " + ms(self) + " self time of " + ms(ops.self_sum_ns) +
               " (threshold " + pct(o.cast_share_min) + ")";
  f.suggestion = "cast once, not per use: keep weights in the compute dtype (apex O2 master weights), move "
                 "inputs to the device already in their dtype, avoid .float()/.half() round trips inside the model";
  out->push_back(std::move(f));
}

void skippedSteps(const std::vector<StepRow>& steps, const AdvisorOptions& o, std::vector<Finding>* out) {
  int64_t total = 0, lost = 0;
  Finding f;
  for (const StepRow& s : steps) {
    total += s.dur_ns;
    if (!s.skipped) continue;
    lost += s.dur_ns;
    f.steps.push_back(s.step);
  }
  if (f.steps.empty() || total <= 0) return;
  const double share = static_cast<double>(lost) / static_cast<double>(total);
  f.rule = "skipped_steps";
  f.severity = share >= o.skipped_share_warn ? Severity::kWarning : Severity::kInfo;
  f.title = std::to_string(f.steps.size()) + " of " + std::to_string(steps.size()) +
            " steps skipped for overflow: " + pct(share) + " of the step time lost";
  f.evidence = ms(lost) + " in skipped steps of " + ms(total) + "; first skipped: step " + std::to_string(f.steps.front());
  f.suggestion = "the loss scale starts too high or grows too fast: lower --dynamic-init-scale (or the static "
                 "scale), raise the scale window; if overflows persist, find the first overflowing op "
                 "(--overflow-check) and keep it in fp32";
  out->push_back(std::move(f));
}

void lossScale(const std::vector<StepRow>& steps, const AdvisorOptions& o, std::vector<Finding>* out) {
  int64_t backoffs = 0, growths = 0;
  double last = 0, lowest = 0;
  bool any = false;
  Finding f;
  for (const StepRow& s : steps) {
    if (!s.loss_scale) continue;
    const double v = *s.loss_scale;
    if (any && v < last) {
      ++backoffs;
      f.steps.push_back(s.step);
    }
    if (any && v > last) ++growths;
    lowest = any ? std::min(lowest, v) : v;
    last = v;
    any = true;
  }
  if (!any) return;
  f.rule = "loss_scale";
  char b[160];
  if (lowest < 1.0) {
    f.severity = Severity::kCritical;
    std::snprintf(b, sizeof b, "the loss scale collapsed to %g", lowest);
    f.title = b;
    f.suggestion = "a scale below 1 means gradients overflow even unscaled: an op overflows in fp16 on its own "
                   "(find it with --overflow-check and keep it in fp32, or use bf16)";
  } else if (backoffs >= o.scale_backoffs_oscillating && growths >= 1) {
    f.severity = Severity::kWarning;
    std::snprintf(b, sizeof b, "the loss scale oscillates: %lld backoffs and %lld growths",
                  static_cast<long long>(backoffs), static_cast<long long>(growths));
    f.title = b;
    f.suggestion = "each backoff skips a step: raise the scale window (--scale-window) so the scale grows less "
                   "often, or start lower";
  } else {
    return;
  }
  std::snprintf(b, sizeof b, "lowest %g, final %g, %lld backoffs over %zu steps", lowest, last,
                static_cast<long long>(backoffs), steps.size());
  f.evidence = b;
  out->push_back(std::move(f));
}

void memoryCapacity(const std::vector<MemoryPeak>& peaks, const AdvisorOptions& o, std::vector<Finding>* out) {
  for (const MemoryPeak& p : peaks) {
    const double share = static_cast<double>(p.reserved) / static_cast<double>(o.device_capacity_bytes);
    if (share < o.memory_share_warn) continue;
    Finding f;
    f.rule = "memory_capacity";
    f.severity = share >= 0.98 ? Severity::kCritical : Severity::kWarning;
    f.title = "device " + std::to_string(p.device) + " reserved " + pct(share) + " of its memory";
    f.evidence = "peak reserved " + gib(p.reserved) + ", allocated " + gib(p.allocated) + " of " +
                 gib(o.device_capacity_bytes);
    f.suggestion = "near capacity the allocator fragments and the next larger batch fails: reduce the batch, use "
                   "O2 (fp16 activations), or recompute activations (checkpointing)";
    out->push_back(std::move(f));
  }
}

// Memory by owner (schema 10): what fills the peak, fragmentation, growth across steps.
void memoryOwners(const std::vector<DeviceMemory>& devices, const AdvisorOptions& o, std::vector<Finding>* out) {
  auto bytes = [](const LiveSet& l, MemoryCategory c) { return l.bytes[static_cast<int>(c)]; };
  for (const DeviceMemory& d : devices) {
    const LiveSet& l = d.at_peak;
    if (l.allocated <= 0) continue;
    const std::string dev = "npu:" + std::to_string(d.device);
    const double total = static_cast<double>(l.allocated);
    // A share of the peak above `min`: one finding, the categories as evidence.
    auto share = [&](const char* rule, const std::string& what, int64_t held, double min, const std::string& extra,
                     const char* suggestion) {
      if (static_cast<double>(held) / total < min) return;
      Finding f;
      f.rule = rule;
      f.severity = Severity::kInfo;
      f.title = dev + ": " + what + " hold " + pct(static_cast<double>(held) / total) + " of the peak";
      f.evidence = "at the peak (" + formatBytes(static_cast<uint64_t>(l.allocated)) + "): " + categorySummary(l, 4) + extra;
      f.suggestion = suggestion;
      if (d.peak_step >= 0) f.steps.push_back(d.peak_step);
      out->push_back(std::move(f));
    };
    share("memory_model_state", "master weights and optimizer state",
          bytes(l, MemoryCategory::kMasterWeight) + bytes(l, MemoryCategory::kOptimizerState), o.memory_state_share_min, "",
          "they scale with the parameter count, not the batch: a fused optimizer keeps its state in combined buffers, O1 "
          "needs no fp32 masters, and combine_grad keeps gradients in one flat buffer; a larger batch costs little more "
          "here");
    std::string largest_activation;
    for (const MemoryBlockRecord& b : l.blocks) {
      if (b.category == static_cast<uint8_t>(MemoryCategory::kActivation)) {
        largest_activation = "; largest " + formatBytes(static_cast<uint64_t>(b.size)) + " (op_events id " +
                             std::to_string(b.op_id) + ")";
        break;
      }
    }
    share("memory_activations", "activations kept for backward", bytes(l, MemoryCategory::kActivation),
          o.memory_activation_share_min, largest_activation,
          "activations grow with the batch: recompute them in backward (activation checkpointing), run fp16 activations "
          "(O1/O2), or take a smaller batch with gradient accumulation");
    if (d.reserved_at_peak > 0) {
      const int64_t gap = d.reserved_at_peak - d.peak_allocated;
      const double share = static_cast<double>(gap) / static_cast<double>(d.reserved_at_peak);
      if (share >= o.memory_fragmentation_share_min && gap >= o.memory_fragmentation_bytes_min) {
        Finding f;
        f.rule = "memory_fragmentation";
        f.severity = Severity::kWarning;
        f.title = dev + ": " + pct(share) + " of the reserved memory was free at the peak";
        f.evidence = "reserved " + formatBytes(static_cast<uint64_t>(d.reserved_at_peak)) + ", allocated " +
                     formatBytes(static_cast<uint64_t>(d.peak_allocated)) + ", largest free cached block " +
                     formatBytes(static_cast<uint64_t>(std::max<int64_t>(d.largest_cached, 0)));
        f.suggestion = "cached blocks of the wrong sizes: keep shapes fixed from step to step (pad variable lengths), "
                       "lower NPUSCOPE_NPU_CACHE_LIMIT, or empty the cache between phases (torch.npu.empty_cache())";
        out->push_back(std::move(f));
      }
    }
    // Growth across steps: allocated at each step's start rising step after step (the first
    // two steps create optimizer state and are left out).
    const auto& starts = d.step_start_allocated;
    if (starts.size() >= static_cast<size_t>(o.memory_leak_steps_min) + 2) {
      bool rising = true;
      for (size_t i = 3; i < starts.size() && rising; ++i) rising = starts[i].second > starts[i - 1].second;
      const int64_t first = starts[2].second, last = starts.back().second;
      if (rising && last - first >= o.memory_leak_bytes_min) {
        Finding f;
        f.rule = "memory_leak";
        f.severity = Severity::kWarning;
        f.title = dev + ": allocated memory at the start of a step grew in each of " + std::to_string(starts.size() - 3) +
                  " steps";
        f.evidence = "step " + std::to_string(starts[2].first) + " began with " + formatBytes(static_cast<uint64_t>(first)) +
                     ", step " + std::to_string(starts.back().first) + " with " + formatBytes(static_cast<uint64_t>(last));
        f.suggestion = "something keeps tensors from step to step: a loss or output kept with its graph (append "
                       "loss.item(), not loss), a growing list of tensors, a cache; `npuscope memory --step N` lists "
                       "the live blocks with their allocating ops";
        for (size_t i = 2; i < starts.size(); ++i) f.steps.push_back(starts[i].first);
        out->push_back(std::move(f));
      }
    }
  }
}

// The Cube's ops: matrix multiplies and convolutions.
bool isCubeOp(std::string_view name) {
  static const std::set<std::string_view> kCube = {
      "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
      "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
      "aten::convolution_overrideable", "aten::convolution_backward", "aten::convolution_backward_overrideable"};
  return kCube.count(name) > 0;
}

// Its floating inputs are all fp32 (dtypes recorded: "float, float, Scalar").
bool fp32Inputs(std::string_view dtypes) {
  if (dtypes.empty()) return false;
  bool any_float = false;
  size_t at = 0;
  while (at <= dtypes.size()) {
    size_t comma = dtypes.find(',', at);
    if (comma == std::string_view::npos) comma = dtypes.size();
    std::string_view t = dtypes.substr(at, comma - at);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (t == "float") any_float = true;
    if (t == "c10::Half" || t == "c10::BFloat16" || t == "double") return false;
    at = comma + 1;
  }
  return any_float;
}

void fp32Cube(const RunRow& run, const std::vector<OpSlice>& ops, const StepRow& step, const AdvisorOptions& o,
              std::vector<Finding>* out) {
  if (run.opt_level != "O1" && run.opt_level != "O2") return;
  // What ran on the Cube is the innermost matmul/convolution: an outer one (aten::conv2d) may
  // take fp32 and cast inside (amp's O1 casting a model's fp32 input) before its inner one runs.
  // Only ops on an npu count: the emulator's own CPU kernels beneath them compute in fp32.
  auto onCube = [](const OpSlice& s) { return s.device >= 0 && isCubeOp(s.name); };
  std::set<int64_t> has_cube_child;
  for (const OpSlice& s : ops) {
    if (onCube(s)) has_cube_child.insert(s.parent_id);
  }
  int64_t cube_ns = 0, fp32_ns = 0, fp32_calls = 0, cube_calls = 0;
  std::map<std::string, int64_t> names;  // fp32 calls by op name and shapes
  for (const OpSlice& s : ops) {
    if (!onCube(s) || has_cube_child.count(s.id)) continue;
    const int64_t t = s.device_dur_ns >= 0 ? s.device_dur_ns : s.dur_ns;
    cube_ns += t;
    ++cube_calls;
    if (!fp32Inputs(s.input_dtypes)) continue;
    fp32_ns += t;
    ++fp32_calls;
    ++names[std::string(s.name) + (s.input_shapes.empty() ? "" : " " + std::string(s.input_shapes))];
  }
  if (fp32_calls == 0 || cube_ns <= 0) return;
  const double share = static_cast<double>(fp32_ns) / static_cast<double>(cube_ns);
  if (share < o.fp32_cube_share_min) return;
  Finding f;
  f.rule = "fp32_cube";
  f.severity = share >= 0.5 ? Severity::kWarning : Severity::kInfo;
  f.title = std::to_string(fp32_calls) + " of " + std::to_string(cube_calls) + " matmuls/convolutions run in fp32 under " +
            run.opt_level + " (" + pct(share) + " of their time)";
  f.evidence = "step " + std::to_string(step.step) + ": " + ms(fp32_ns) + " of " + ms(cube_ns) + " in fp32:";
  int shown = 0;
  for (const auto& [name, calls] : names) {
    f.ops.push_back(name.substr(0, name.find(' ')));
    if (shown++ < 4) f.evidence += (shown > 1 ? "," : "") + std::string(" ") + name + " x" + std::to_string(calls);
  }
  if (names.size() > 4) f.evidence += ", ...";
  f.steps.push_back(step.step);
  f.suggestion = "Ascend's Cube computes fp16 natively and fp32 at a fraction of that rate: under " + run.opt_level +
                 " these should get fp16 inputs. Find why they escape the cast (a functional call amp does not "
                 "patch, a layer kept fp32, inputs cast back with .float()), or keep them fp32 on purpose";
  out->push_back(std::move(f));
}

// Per-parameter optimizer math: PyTorch marks an optimizer's step "Optimizer.step#Adam.step";
// many small ops under it are one kernel launch per parameter and tensor, where a fused optimizer
// on combined tensors (torch_npu's NpuFused*) launches a few.
void unfusedOptimizer(const std::vector<OpSlice>& ops, const StepRow& step, const AdvisorOptions& o,
                      std::vector<Finding>* out) {
  for (const OpSlice& s : ops) {
    if (s.name.rfind("Optimizer.step#", 0) != 0 || s.name.find("Fused") != std::string_view::npos) continue;
    int64_t inner = 0;
    for (const OpSlice& c : ops) {
      inner += c.thread_id == s.thread_id && c.depth > s.depth && c.start_ns >= s.start_ns &&
               c.start_ns < s.start_ns + s.dur_ns;
    }
    if (inner < o.unfused_optimizer_ops_min) continue;
    const std::string name(s.name);
    const std::string opt = name.substr(15, name.find('.', 15) - 15);
    Finding f;
    f.rule = "unfused_optimizer";
    f.severity = Severity::kWarning;
    f.title = name + " runs " + std::to_string(inner) + " ops per step (an unfused optimizer)";
    f.evidence = "step " + std::to_string(step.step) + ": " + std::to_string(inner) + " ops in " + ms(s.dur_ns) +
                 ", " + ms(s.dur_ns / std::max<int64_t>(inner, 1)) + " per op (threshold " +
                 std::to_string(o.unfused_optimizer_ops_min) + " ops)";
    f.ops.push_back(name);
    f.steps.push_back(step.step);
    f.suggestion = "use a fused optimizer on combined tensors: torch_npu's NpuFused" + opt +
                   " (apex.optimizers.NpuFused" + opt + ", with combine_grad), or npuscope's --optimizer " +
                   lower(opt) + ", which is fused";
    out->push_back(std::move(f));
    return;  // one finding per run
  }
}
// What the predicted timeline says of `ops` (one step) with the device's work scaled by `scale`
// and the task queue on or off.
PredictedStep predictWith(const std::vector<OpSlice>& ops, const RunRow& run, int64_t step, bool task_queue,
                          double scale) {
  std::vector<PredictedInput> in;
  in.reserve(ops.size());
  for (const OpSlice& op : ops) in.push_back(predictedInput(op));
  HostModelParams p = hostModelParamsFor(run);
  p.task_queue = task_queue;
  p.device_scale = scale;
  return predictStep(step, std::move(in), p);
}

void predictedHostBound(const std::vector<OpSlice>& ops, const RunRow& run, const StepRow& step, const AdvisorOptions& o,
                        std::vector<Finding>* out) {
  const PredictedStep s = predictWith(ops, run, step.step, true, 1);
  if (s.kernels == 0 || s.deviceIdleShare() < o.host_bound_idle_min) return;
  const PredictedStep no_queue = predictWith(ops, run, step.step, false, 1);
  const PredictedStep twice = predictWith(ops, run, step.step, true, 2);
  Finding f;
  f.rule = "host_bound";
  f.severity = s.deviceIdleShare() >= 0.8 ? Severity::kCritical : Severity::kWarning;
  f.title = "host-bound: a real npu would idle " + pct(s.deviceIdleShare()) + " of each step waiting for the host";
  f.evidence = "predicted step " + std::to_string(step.step) + ": " + describePredictedStep(s) + "; " +
               std::to_string(s.kernels) + " kernels average " + formatDuration(s.device_busy_ns / s.kernels) +
               " on the device against " + formatDuration(s.dispatch_ns / std::max<int64_t>(s.host_ops, 1)) +
               " of host work per op";
  char gain[64];
  std::snprintf(gain, sizeof gain, "%.2fx", 2.0 * static_cast<double>(s.step_ns) / static_cast<double>(twice.step_ns));
  f.suggestion = std::string("give the device more work per op: twice the batch is predicted at ") + formatDuration(twice.step_ns) +
                 " per step, " + gain + " the samples/s; keep TASK_QUEUE_ENABLE=1 (without the task queue the step is " +
                 formatDuration(no_queue.step_ns) + "); fewer, larger ops (fused optimizers, torch_npu's fused operators) and fewer" +
                 " host syncs (" + std::to_string(s.syncs) + " per step: .item(), copies to the host)";
  f.steps.push_back(step.step);
  out->push_back(std::move(f));
}

// An imported run: its real device tasks' busy time against its steps.
void realHostBound(const std::vector<StepRow>& steps, const std::vector<StepDeviceTime>& device,
                   const AdvisorOptions& o, std::vector<Finding>* out) {
  int64_t step_ns = 0, busy_ns = 0, counted = 0;
  size_t d = 0;
  for (const StepRow& r : steps) {
    while (d < device.size() && device[d].step < r.step) ++d;
    if (d >= device.size() || device[d].step != r.step || device[d].device_ops == 0) continue;
    step_ns += r.dur_ns;
    busy_ns += device[d].device_busy_ns;
    ++counted;
  }
  if (step_ns <= 0) return;
  const double idle = std::clamp(1 - static_cast<double>(busy_ns) / static_cast<double>(step_ns), 0.0, 1.0);
  if (idle < o.host_bound_idle_min) return;
  Finding f;
  f.rule = "host_bound";
  f.severity = idle >= 0.8 ? Severity::kCritical : Severity::kWarning;
  f.title = "host-bound: the device idles " + pct(idle) + " of the step time";
  f.evidence = std::to_string(counted) + " steps: device tasks busy " + ms(busy_ns) + " of " + ms(step_ns);
  f.suggestion = "give the device more work per op (a larger batch), keep TASK_QUEUE_ENABLE=1, fewer small ops and "
                 "fewer host syncs (.item(), copies to the host)";
  out->push_back(std::move(f));
}
}  // namespace

// first_nonfinite: where the first NaN / infinity of the dumps appeared (first_nonfinite.h), over
// this run and the other ranks of its job in the same file (an imported msprobe job holds all).
Status firstNonFinite(TraceReader& reader, int64_t run_id, std::vector<Finding>* out) {
  ASSIGN_OR_RETURN(RunRow run, reader.run(run_id));
  std::vector<std::pair<int64_t, int64_t>> ranks;  // rank, run id
  if (run.rank >= 0) {
    ASSIGN_OR_RETURN(std::vector<RunRow> runs, reader.runs());
    std::map<int64_t, RunRow> newest;
    for (const RunRow& r : runs) {
      if (r.rank < 0 || r.job != run.job || r.source != run.source) continue;
      auto it = newest.find(r.rank);
      if (it == newest.end() || r.id > it->second.id) newest[r.rank] = r;
    }
    newest[run.rank] = run;
    for (const auto& [rank, r] : newest) ranks.push_back({rank, r.id});
  } else {
    ranks.push_back({0, run_id});
  }
  std::vector<nonfinite::RankEvent> events;
  std::vector<int64_t> ids;
  for (const auto& [rank, id] : ranks) {
    ASSIGN_OR_RETURN(std::vector<nonfinite::RankEvent> e, nonfinite::firstEvents(reader, id, rank));
    events.insert(events.end(), e.begin(), e.end());
    ids.push_back(rank);
  }
  const nonfinite::Finding f = nonfinite::locate(ids, events);
  if (!f.found) return Status::ok();
  Finding x;
  x.rule = "first_nonfinite";
  x.severity = Severity::kCritical;
  const bool job = ranks.size() > 1;
  x.title = "First NaN/inf of the dumps: " + std::string(job ? "rank " + std::to_string(f.origin.rank) + ", " : "") +
            "step " + std::to_string(f.origin.step) + ", " + f.origin.op;
  std::string evidence = nonfinite::describe(f);
  while (!evidence.empty() && evidence.back() == '\n') evidence.pop_back();
  for (char& c : evidence) c = c == '\n' ? ';' : c;
  x.evidence = evidence;
  x.suggestion = f.origin.kind == nonfinite::Kind::kInputs
                     ? "its inputs were non-finite already: check the data fed to it, or dump the calls before it"
                     : "start at " + f.origin.op + (job ? " on rank " + std::to_string(f.origin.rank) : "") +
                           ": compare its inputs and outputs with a CPU or GPU run (npuscope compare A B); values on other "
                           "ranks that arrived through a collective follow from it";
  x.ops = {f.origin.op};
  x.steps = {f.origin.step};
  out->push_back(std::move(x));
  return Status::ok();
}

StatusOr<std::vector<Finding>> advise(TraceReader& reader, int64_t run_id, const AdvisorOptions& o) {
  OpAggregateQuery q;
  q.run_id = run_id;
  ASSIGN_OR_RETURN(OpAggregateTable ops, reader.opAggregates(q));
  q.group_by = OpGroupBy::kNameAndShapes;
  ASSIGN_OR_RETURN(std::vector<StepRow> steps, reader.steps(run_id));
  ASSIGN_OR_RETURN(std::vector<MemoryPeak> peaks, reader.memoryPeaks(run_id));
  std::vector<Finding> out;
  notNative(ops, &out);
  {
    std::vector<OpAggregateTable> per_step;  // the first 64 steps, one by-shape table each
    for (size_t k = 0; k < steps.size() && k < 64; ++k) {
      q.steps = StepRange{steps[k].step, steps[k].step};
      ASSIGN_OR_RETURN(OpAggregateTable t, reader.opAggregates(q));
      per_step.push_back(std::move(t));
    }
    dynamicShapes(per_step, o, &out);
  }
  castOverhead(ops, o, &out);
  skippedSteps(steps, o, &out);
  lossScale(steps, o, &out);
  memoryCapacity(peaks, o, &out);
  {
    ASSIGN_OR_RETURN(std::vector<DeviceMemory> memory, memoryByDevice(reader, run_id));
    memoryOwners(memory, o, &out);
  }
  RETURN_IF_ERROR(firstNonFinite(reader, run_id, &out));
  if (!steps.empty()) {
    const StepRow& middle = steps[steps.size() / 2];
    ASSIGN_OR_RETURN(RunRow run, reader.run(run_id));
    // The steps' middle one: past the first step's warm-up.
    ASSIGN_OR_RETURN(std::vector<OpSlice> step_ops, reader.stepOps(run_id, StepRange{middle.step, middle.step}));
    fp32Cube(run, step_ops, middle, o, &out);
    unfusedOptimizer(step_ops, middle, o, &out);
    if (run.imported()) {
      ASSIGN_OR_RETURN(std::vector<StepDeviceTime> device, reader.stepDeviceTimes(run_id));
      realHostBound(steps, device, o, &out);
    } else {
      predictedHostBound(step_ops, run, middle, o, &out);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return static_cast<int>(a.severity) > static_cast<int>(b.severity); });
  return out;
}

}  // namespace npuscope
