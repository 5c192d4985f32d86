// Checks of a chrome trace as Perfetto takes it, shared by the exporter's unit tests and the
// test of a real recorded run.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace npuscope::testing_support {

using json = nlohmann::json;

// Times in integer nanoseconds: the exporter writes microseconds with exactly three decimals, and
// comparing them as doubles would see abutting slices overlap by a rounding error.
inline int64_t ns(const json& v) { return std::llround(v.get<double>() * 1000.0); }

struct Slice {
  int64_t ts, end;
  std::string name;
};

// "" when the slices nest (no partial overlap), else the first offending pair.
inline std::string nestingError(std::vector<Slice> v) {
  std::sort(v.begin(), v.end(), [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
  std::vector<const Slice*> stack;
  for (const Slice& s : v) {
    while (!stack.empty() && stack.back()->end <= s.ts) stack.pop_back();
    if (!stack.empty() && s.end > stack.back()->end) {
      return s.name + " [" + std::to_string(s.ts) + ", " + std::to_string(s.end) + ") overlaps " + stack.back()->name +
             " [" + std::to_string(stack.back()->ts) + ", " + std::to_string(stack.back()->end) + ")";
    }
    stack.push_back(&s);
  }
  return "";
}

// Checks every X event's fields and the nesting of each (pid, tid) track; returns the X events.
inline std::vector<json> checkedSlices(const json& trace) {
  EXPECT_TRUE(trace.contains("traceEvents"));
  EXPECT_EQ(trace.value("displayTimeUnit", ""), "ms");
  std::vector<json> xs;
  std::map<std::pair<int64_t, int64_t>, std::vector<Slice>> tracks;
  for (const json& e : trace["traceEvents"]) {
    EXPECT_TRUE(e.contains("ph")) << e.dump();
    if (e["ph"] != "X") continue;
    for (const char* key : {"name", "ph", "ts", "dur", "pid", "tid"}) EXPECT_TRUE(e.contains(key)) << key << " in " << e.dump();
    EXPECT_TRUE(e["ts"].is_number());
    EXPECT_TRUE(e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(
        Slice{ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"].get<std::string>()});
    xs.push_back(e);
  }
  for (auto& [track, slices] : tracks) {
    EXPECT_EQ(nestingError(slices), "") << "track pid " << track.first << " tid " << track.second;
  }
  return xs;
}

}  // namespace npuscope::testing_support
