// Ratios of two variants measured in the same run: blocks of A and B alternate, so drift in
// clock speed or load hits both, and the ratio of the medians of per-block times is reported.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace npuscope::bench {

struct RatioResult {
  double a_ns = 0;  // median time of one call of A
  double b_ns = 0;
  double ratio() const { return b_ns > 0 ? a_ns / b_ns : 0; }
};

inline double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs `a` and `b` `reps` times per block, alternating blocks while the benchmark loop runs.
inline RatioResult measureRatio(benchmark::State& state, const std::function<void()>& a,
                                const std::function<void()>& b, int reps) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ta, tb;
  for (int i = 0; i < 2; ++i) {  // warm-up: caches, allocator pools, lazy initialisation
    a();
    b();
  }
  for (auto _ : state) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) a();
    auto t1 = Clock::now();
    for (int i = 0; i < reps; ++i) b();
    auto t2 = Clock::now();
    ta.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / reps);
    tb.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / reps);
  }
  return {medianOf(ta), medianOf(tb)};
}

inline void reportRatio(benchmark::State& state, const std::string& name, const RatioResult& r,
                        const std::string& a_label, const std::string& b_label) {
  state.counters[name] = r.ratio();
  state.counters[a_label + "_us"] = r.a_ns / 1e3;
  state.counters[b_label + "_us"] = r.b_ns / 1e3;
}

}  // namespace npuscope::bench
