// The ATen operators a stretch of code asks of the npu (`npuscope ops`): each with its calls,
// its inputs' dtypes, the phases it ran in and whether an fp16/bf16 or fp64 tensor went in.
// Calls a CPU kernel makes inside the device's fallback (on CPU aliases of npu memory) are how
// the emulation computes, not ops the model asks for, and are left out; so are autograd nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace npuscope::profiler {

struct OpUsage {
  int64_t calls = 0;
  std::set<std::string> dtypes;  // c10's names: Float, Half, BFloat16, Long, ...
  std::set<int> phases;          // the phases (setPhase) it was called in
  bool low_precision = false;    // an fp16/bf16 tensor went in
  bool fp64 = false;             // an fp64 tensor went in
};

// Collects while it lives, through a global RecordFunction callback; one at a time.
class OpUsageCollector {
 public:
  OpUsageCollector();
  ~OpUsageCollector();
  OpUsageCollector(const OpUsageCollector&) = delete;
  OpUsageCollector& operator=(const OpUsageCollector&) = delete;

  // Calls from now on count in `phase` (the caller's numbering; 0 at the start).
  void setPhase(int phase) { phase_.store(phase); }
  // By qualified name ("aten::addmm"); read it after the collected code ran.
  const std::map<std::string, OpUsage>& ops() const { return ops_; }

 private:
  friend struct OpUsageCallback;
  std::mutex mu_;
  std::map<std::string, OpUsage> ops_;
  std::atomic<int> phase_{0};
  uint64_t handle_ = 0;
};

}  // namespace npuscope::profiler
