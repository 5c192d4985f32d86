// The chrome trace of a real recorded run: a CNN trained on npu for a few steps (the autograd
// engine's backward thread included), exported through core's exporter and checked as Perfetto
// would take it: valid JSON, every complete event fully described, slices on a thread nesting,
// and every backward op inside the slice of the step it belongs to.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include "npuscope/analysis/chrome_trace.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/device/npu.h"
#include "npuscope/profiler/session.h"
#include "support/chrome_trace_checks.h"
#include "support/recorded_cnn_run.h"
#include "npuscope/workloads/models.h"

namespace npuscope::profiler {
namespace {

using namespace npuscope::testing_support;  // ns, Slice, checkedSlices, recordCnnRun

TEST(ChromeTraceOfARealRun, LoadsNestsAndKeepsBackwardInItsStep) {
  const std::string db = testing::TempDir() + "/npuscope_chrome_real.db";
  const std::string out = testing::TempDir() + "/npuscope_chrome_real.json";
  constexpr int kSteps = 4;
  ASSERT_NO_FATAL_FAILURE(recordCnnRun(db, kSteps, "test_chrome_real_run"));
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  auto summary = exportChromeTrace(**reader, out);
  ASSERT_TRUE(summary.isOk()) << summary.status().message();
  ASSERT_EQ(summary->files.size(), 1u);
  EXPECT_EQ(summary->step_events, kSteps);

  std::ifstream in(out);
  nlohmann::json trace;
  ASSERT_NO_THROW(trace = nlohmann::json::parse(in)) << "not valid JSON";
  // Every X event fully described, and the slices of every thread (and device track) nest.
  const std::vector<nlohmann::json> xs = checkedSlices(trace);
  EXPECT_GT(xs.size(), 100u);

  std::map<int64_t, Slice> step_slices;
  std::vector<std::pair<int64_t, Slice>> backward_ops;  // (step, slice)
  for (const auto& e : xs) {
    const Slice s{ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]};
    if (s.name.rfind("ProfilerStep#", 0) == 0) step_slices[std::stoll(s.name.substr(13))] = s;
    if (e.contains("args") && e["args"].value("Backward", 0) == 1) {
      ASSERT_TRUE(e["args"].contains("Step")) << e.dump();
      backward_ops.emplace_back(e["args"]["Step"].get<int64_t>(), s);
    }
  }
  ASSERT_EQ(step_slices.size(), static_cast<size_t>(kSteps));
  EXPECT_GT(backward_ops.size(), 10u) << "the backward thread's ops are missing";
  for (const auto& [step, s] : backward_ops) {
    auto it = step_slices.find(step);
    ASSERT_NE(it, step_slices.end()) << s.name << " names step " << step << ", which has no slice";
    EXPECT_GE(s.ts, it->second.ts) << s.name << " starts before ProfilerStep#" << step;
    EXPECT_LE(s.end, it->second.end) << s.name << " ends after ProfilerStep#" << step;
  }
  for (const char* s : {"", "-wal", "-shm"}) std::remove((db + s).c_str());
  std::remove(out.c_str());
}

}  // namespace
}  // namespace npuscope::profiler
