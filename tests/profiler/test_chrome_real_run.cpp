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

#include "npuscope/core/chrome_trace.h"
#include "npuscope/core/trace_reader.h"
#include "npuscope/device/npu.h"
#include "npuscope/profiler/session.h"
#include "workloads/models.h"

namespace npuscope::profiler {
namespace {

// Times in integer nanoseconds: the exporter writes microseconds with exactly three decimals, and
// comparing them as doubles would see abutting slices overlap by a rounding error.
struct Slice {
  int64_t ts, end;
  std::string name;
};

int64_t ns(const nlohmann::json& micros) { return std::llround(micros.get<double>() * 1000.0); }

TEST(ChromeTraceOfARealRun, LoadsNestsAndKeepsBackwardInItsStep) {
  const std::string db = testing::TempDir() + "/npuscope_chrome_real.db";
  const std::string out = testing::TempDir() + "/npuscope_chrome_real.json";
  for (const char* s : {"", "-wal", "-shm"}) std::remove((db + s).c_str());
  constexpr int kSteps = 4;
  {
    SessionOptions o;
    o.path = db;
    o.run.command = "test_chrome_real_run";
    o.run.model = "cnn";
    auto session = RecordingSession::start(o);
    ASSERT_TRUE(session.isOk()) << session.status().message();
    torch::manual_seed(0);
    auto model = workloads::makeModel("cnn");
    ASSERT_TRUE(model.isOk());
    std::shared_ptr<workloads::Model> net = *model;
    net->to(npu::device(0));
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const at::Tensor x = at::randn({16, 1, 28, 28}).to(npu::device(0));
    const at::Tensor y = at::randint(0, 10, {16}, at::kLong).to(npu::device(0));
    for (int i = 0; i < kSteps; ++i) {
      opt.zero_grad();
      at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();
      opt.step();
      (*session)->step(StepMetrics{loss.item<double>(), 1.0});
    }
    ASSERT_TRUE((*session)->stop().isOk());
  }
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  auto summary = exportChromeTrace(**reader, out);
  ASSERT_TRUE(summary.isOk()) << summary.status().message();
  ASSERT_EQ(summary->files.size(), 1u);
  EXPECT_EQ(summary->step_events, kSteps);

  std::ifstream in(out);
  nlohmann::json trace;
  ASSERT_NO_THROW(trace = nlohmann::json::parse(in)) << "not valid JSON";
  ASSERT_TRUE(trace.contains("traceEvents"));

  std::map<std::pair<int64_t, int64_t>, std::vector<Slice>> tracks;
  std::map<int64_t, Slice> step_slices;
  std::vector<std::pair<int64_t, Slice>> backward_ops;  // (step, slice)
  int x_events = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    ++x_events;
    for (const char* key : {"name", "ph", "ts", "dur", "pid", "tid"}) {
      ASSERT_TRUE(e.contains(key)) << "an X event without \"" << key << "\": " << e.dump();
    }
    const Slice s{ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]};
    ASSERT_GE(s.end, s.ts) << e.dump();
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(s);
    const std::string name = e["name"];
    if (name.rfind("ProfilerStep#", 0) == 0) step_slices[std::stoll(name.substr(13))] = s;
    if (e.contains("args") && e["args"].value("Backward", 0) == 1) {
      ASSERT_TRUE(e["args"].contains("Step")) << e.dump();
      backward_ops.emplace_back(e["args"]["Step"].get<int64_t>(), s);
    }
  }
  EXPECT_GT(x_events, 100);
  ASSERT_EQ(step_slices.size(), static_cast<size_t>(kSteps));
  EXPECT_GT(backward_ops.size(), 10u) << "the backward thread's ops are missing";

  // Per track, sorted by start (longer first on ties), every slice ends inside the innermost
  // open slice that contains its start: no partial overlap.
  for (auto& [key, slices] : tracks) {
    std::sort(slices.begin(), slices.end(),
              [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
    std::vector<Slice> open;
    for (const Slice& s : slices) {
      while (!open.empty() && open.back().end <= s.ts) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.end, open.back().end)
            << s.name << " [" << s.ts << ", " << s.end << ") overlaps " << open.back().name << " ["
            << open.back().ts << ", " << open.back().end << ") on pid " << key.first << " tid " << key.second;
      }
      open.push_back(s);
    }
  }
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
