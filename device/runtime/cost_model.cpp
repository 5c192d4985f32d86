#include "npuscope/device/cost_model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "npuscope/device/runtime.h"

namespace npuscope::npu {

const char* vectorKindName(VectorKind k) {
  static const char* const kNames[] = {"elementwise", "transcendental", "cast", "copy", "strided copy", "fill",
                                       "transpose", "pool", "pool backward", "softmax", "norm", "norm backward",
                                       "swiglu", "swiglu backward", "rotary", "adam", "foreach", "scatter",
                                       "reduce (all)", "reduce (partial)", "format (activation)", "format (weight)",
                                       "format (matrix)"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(VectorKind::kCount));
  const auto i = static_cast<size_t>(k);
  return i < static_cast<size_t>(VectorKind::kCount) ? kNames[i] : "?";
}

int64_t modeled_duration_ns(const OpWork& work, const CostModelParams& p) {
  if (work.host_fallback) {
    const double s = work.bytes / p.pcie_bytes_per_s + work.flops / p.host_flops_per_s;
    return p.launch_ns + p.host_fallback_sync_ns + static_cast<int64_t>(s * 1e9 + 0.5);
  }
  double s = 0;
  if (work.unit == ComputeUnit::kCube) {
    const double rate = (work.low_precision ? p.cube_fp16_flops_per_s : p.cube_fp32_flops_per_s) *
                        std::clamp(work.efficiency, 1e-3, 1.0);
    const double out = std::clamp(work.out_bytes, 0.0, work.bytes);
    s = std::max(work.flops / rate, (work.bytes - out) / p.cube_read_bytes_per_s + out / p.cube_write_bytes_per_s);
  } else {
    const VectorCost& c = p.cost(work.kind);
    s = c.setup_us * 1e-6 + work.bytes / c.bytes_per_s;
  }
  const VectorCost& act = p.cost(VectorKind::kFormatActivation);
  const VectorCost& weight = p.cost(VectorKind::kFormatWeight);
  if (work.format_act_tasks > 0) s += work.format_act_tasks * act.setup_us * 1e-6 + work.format_act_bytes / act.bytes_per_s;
  if (work.format_weight_tasks > 0)
    s += work.format_weight_tasks * weight.setup_us * 1e-6 + work.format_weight_bytes / weight.bytes_per_s;
  const int64_t tasks = 1 + std::max(0, work.format_act_tasks) + std::max(0, work.format_weight_tasks);
  return tasks * p.launch_ns + static_cast<int64_t>(s * 1e9 + 0.5);
}

StreamSlot StreamModel::submit(int64_t submit_ns, int64_t dur_ns) {
  const int64_t ready = submit_ns + (task_queue_ ? 0 : delay_ns_);
  const int64_t start = prev_end_ns_ == INT64_MIN ? ready : std::max(ready, prev_end_ns_);
  const int64_t end = start + dur_ns;
  if (!task_queue_) delay_ns_ += end - ready;  // the host waited until the op finished
  prev_end_ns_ = end;
  return {start, end};
}

void StreamModel::reset() {
  prev_end_ns_ = INT64_MIN;
  delay_ns_ = 0;
}

bool task_queue_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TASK_QUEUE_ENABLE");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

namespace {
struct DeviceStream {
  std::mutex mu;  // the model without a task queue: its host delay and its end move together
  StreamModel model{task_queue_enabled()};
  // With a task queue the stream is its last end alone, moved by compare-and-swap: every recorded
  // device op submits here, and a lock per op showed in the recorder's profile.
  std::atomic<int64_t> end{INT64_MIN};
};
std::array<DeviceStream, kMaxDevices>& streams() {
  static auto* s = new std::array<DeviceStream, kMaxDevices>();
  return *s;
}
}  // namespace

StreamSlot submit_to_stream(int device, int64_t submit_ns, int64_t dur_ns) {
  auto& s = streams()[static_cast<size_t>(std::clamp(device, 0, kMaxDevices - 1))];
  if (s.model.task_queue()) {  // StreamModel::submit's rule with a queue: start at max(submit, end)
    int64_t prev = s.end.load(std::memory_order_relaxed);
    int64_t start = 0;
    do {
      start = std::max(submit_ns, prev);
    } while (!s.end.compare_exchange_weak(prev, start + dur_ns, std::memory_order_relaxed));
    return {start, start + dur_ns};
  }
  std::lock_guard<std::mutex> lock(s.mu);
  return s.model.submit(submit_ns, dur_ns);
}

void reset_streams() {
  for (auto& s : streams()) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.model.reset();
    s.end.store(INT64_MIN, std::memory_order_relaxed);
  }
}

}  // namespace npuscope::npu
