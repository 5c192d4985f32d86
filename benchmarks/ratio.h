// Ratios of two variants measured in the same run. Blocks of A and B alternate, in the order
// AB, BA, AB, ... so that neither variant always runs right after the other (a background
// thread's leftover work, a cache warmed by the previous block, a clock ramping up). Each pair
// of adjacent blocks gives one ratio, and the median of those ratios is reported: adjacent blocks
// share the machine's state of the moment, so a host that slows down or speeds up mid-run (this
// VM's speed changes in steps under load from outside) moves both sides of a pair together,
// where a ratio of two separately taken medians can pair a fast A with a slow B. Beside it,
// `<name>_of_medians` and `<name>_of_means` (total A time over total B time, which counts the
// rare slow call a median leaves out, e.g. a background thread's periodic burst).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace npuscope::bench {

struct RatioResult {
  double a_ns = 0;          // median time of one call of A
  double b_ns = 0;          // median time of one call of B
  double pair_ratio = 0;    // median over adjacent block pairs of A time / B time
  double pair_diff_ns = 0;  // median over adjacent block pairs of A time - B time, per call
  double mean_ratio = 0;    // total A time / total B time: what rare slow calls cost, too
  double ratio() const { return pair_ratio; }
};

inline double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs blocks of `reps` calls of `a` (after `setup_a`) and of `b` (after `setup_b`), one pair
// of blocks per benchmark iteration, the order swapping every iteration. Setups are not timed.
inline RatioResult alternateBlocks(benchmark::State& state, const std::function<void()>& setup_a,
                                   const std::function<void()>& a, const std::function<void()>& setup_b,
                                   const std::function<void()>& b, int reps) {
  using Clock = std::chrono::steady_clock;
  auto block = [&](const std::function<void()>& setup, const std::function<void()>& f) {
    setup();
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) f();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / reps;
  };
  for (int i = 0; i < 2; ++i) {  // warm-up: caches, allocator pools, lazy initialisation
    setup_a();
    a();
    setup_b();
    b();
  }
  std::vector<double> ta, tb, ratios, diffs;
  bool a_first = true;
  for (auto _ : state) {
    double x, y;
    if (a_first) {
      x = block(setup_a, a);
      y = block(setup_b, b);
    } else {
      y = block(setup_b, b);
      x = block(setup_a, a);
    }
    a_first = !a_first;
    ta.push_back(x);
    tb.push_back(y);
    if (y > 0) ratios.push_back(x / y);
    diffs.push_back(x - y);
  }
  double sa = 0, sb = 0;
  for (size_t i = 0; i < ta.size(); ++i) sa += ta[i], sb += tb[i];
  return {medianOf(ta), medianOf(tb), medianOf(ratios), medianOf(diffs), sb > 0 ? sa / sb : 0};
}

inline RatioResult measureRatio(benchmark::State& state, const std::function<void()>& a,
                                const std::function<void()>& b, int reps) {
  const std::function<void()> none = [] {};
  return alternateBlocks(state, none, a, none, b, reps);
}

inline void reportRatio(benchmark::State& state, const std::string& name, const RatioResult& r,
                        const std::string& a_label, const std::string& b_label) {
  state.counters[name] = r.ratio();
  state.counters[name + "_of_medians"] = r.b_ns > 0 ? r.a_ns / r.b_ns : 0;
  state.counters[name + "_of_means"] = r.mean_ratio;
  state.counters[a_label + "_us"] = r.a_ns / 1e3;
  state.counters[b_label + "_us"] = r.b_ns / 1e3;
}

}  // namespace npuscope::bench
