// torch_npu's *_ascend_pt folder written from a real recorded run (a CNN trained on the npu):
// the files and their header rows are those of the real 910B export in tests/data/traces, the
// trace view is torch_npu's bare array with string timestamps and one ProfilerStep#N per exported
// step, the kernels are the predicted timeline's (predictRun computes the same steps on its own),
// and the importer reads the folder back with the same steps, host ops and kernels.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "npuscope/analysis/ascend_pt_export.h"
#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/import/import.h"
#include "npuscope/profiler/session.h"
#include "npuscope/store/trace_reader.h"
#include "support/recorded_cnn_run.h"

namespace npuscope::profiler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSample = std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/";

// The lines of a file without their CRLF / LF ends.
std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    out.push_back(l);
  }
  return out;
}

std::string firstLineEnd(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string l;
  std::getline(in, l);
  return !l.empty() && l.back() == '\r' ? "CRLF" : "LF";
}

std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string f; std::getline(ss, f, sep);) out.push_back(f);
  return out;
}

TEST(AscendPtOfARealRun, LaidOutAsTorchNpuWritesItAndImportsBack) {
  const std::string db = testing::TempDir() + "/npuscope_ascend_pt_real.db";
  const std::string dir = testing::TempDir() + "/npuscope_ascend_pt_out";
  fs::remove_all(dir);
  ASSERT_NO_FATAL_FAILURE(testing_support::recordCnnRun(db, 5, "test_ascend_pt_real_run"));

  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  AscendPtOptions o;
  o.steps = StepRange{1, 3};
  o.worker_name = "host_42";
  auto written = exportAscendPt(**reader, dir, o);
  ASSERT_TRUE(written.isOk()) << written.status().message();
  const fs::path folder(written->folder);
  EXPECT_EQ(folder.parent_path(), fs::path(dir));
  const std::string name = folder.filename().string();
  EXPECT_EQ(name.rfind("host_42_", 0), 0u) << name;
  EXPECT_EQ(name.size(), std::string("host_42_").size() + 17 + std::string("_ascend_pt").size()) << name;
  EXPECT_EQ(written->steps, 3);
  EXPECT_GT(written->kernels, 30);

  // Every file of the real export, with the real export's header row (kernel_details: the
  // columns before the AI Core metrics, which a Level0 export without aic_metrics leaves out).
  const std::string out = (folder / "ASCEND_PROFILER_OUTPUT").string() + "/";
  for (const char* f : {"op_statistic.csv", "operator_details.csv", "api_statistic.csv", "step_trace_time.csv",
                        "memory_record.csv", "operator_memory.csv"}) {
    ASSERT_TRUE(fs::exists(out + f)) << f;
    EXPECT_EQ(lines(out + f).at(0), lines(kSample + f).at(0)) << f;
    EXPECT_EQ(firstLineEnd(out + f), firstLineEnd(kSample + f)) << f;
  }
  const std::vector<std::string> real_header = split(lines(kSample + "kernel_details.csv").at(0));
  const std::vector<std::string> our_header = split(lines(out + "kernel_details.csv").at(0));
  ASSERT_EQ(our_header.size(), 21u);
  EXPECT_EQ(our_header, std::vector<std::string>(real_header.begin(), real_header.begin() + 21));
  EXPECT_TRUE(fs::exists(folder / "profiler_info.json"));
  std::ifstream meta_in(folder / "profiler_metadata.json");
  const json meta = json::parse(meta_in);
  EXPECT_TRUE(meta.contains("ENV_VARIABLES"));
  EXPECT_NE(meta["npuscope"]["device_rows"].get<std::string>().find("predicted"), std::string::npos);

  // operator_memory.csv: one row per device block allocated in steps 1-3 (memory by owner),
  // named by the op that allocated it, sized in KB.
  {
    auto run = (*reader)->latestRun();
    ASSERT_TRUE(run.isOk());
    auto blocks = (*reader)->memoryBlocks(run->id);
    auto steps = (*reader)->steps(run->id, StepRange{1, 3});
    ASSERT_TRUE(blocks.isOk() && steps.isOk());
    std::multiset<std::pair<std::string, int64_t>> want;  // (op name, bytes)
    for (const MemoryBlockRecord& b : *blocks) {
      for (const StepRow& st : *steps) {
        if (b.alloc_ns < st.start_ns || b.alloc_ns >= st.start_ns + st.dur_ns) continue;
        auto op = (*reader)->opById(b.op_id);
        want.emplace(op.isOk() ? std::string(op->name) : b.owner.empty() ? "unknown" : b.owner, b.size);
      }
    }
    ASSERT_FALSE(want.empty());
    std::multiset<std::pair<std::string, int64_t>> got;
    const std::vector<std::string> om = lines(out + "operator_memory.csv");
    for (size_t i = 1; i < om.size(); ++i) {
      const std::vector<std::string> f = split(om[i]);
      got.emplace(f.at(0), std::llround(std::stod(f.at(1)) * 1024));
    }
    EXPECT_EQ(got, want);
  }

  // kernel_details: one row per predicted kernel of steps 1-3, tab-ended start times.
  const std::vector<std::string> kd = lines(out + "kernel_details.csv");
  ASSERT_EQ(static_cast<int64_t>(kd.size()) - 1, written->kernels);
  std::map<int64_t, int64_t> kernel_ns_by_step;
  for (size_t i = 1; i < kd.size(); ++i) {
    const size_t tab = kd[i].find('\t');
    ASSERT_NE(tab, std::string::npos) << kd[i];
    EXPECT_EQ(kd[i][tab + 1], ',');
    const std::vector<std::string> f = split(kd[i].substr(0, tab) + kd[i].substr(tab + 1));
    const int64_t step = std::stoll(f.at(0));
    EXPECT_TRUE(step >= 1 && step <= 3) << kd[i];
    kernel_ns_by_step[step] += std::llround(std::stod(f.at(9)) * 1000);
  }

  // The predicted timeline computed on its own: the same kernels' time and the same step times.
  auto run1 = (*reader)->latestRun();
  ASSERT_TRUE(run1.isOk());
  auto predicted = predictRun(**reader, run1->id, hostModelParamsFor(*run1), StepRange{1, 3});
  ASSERT_TRUE(predicted.isOk());
  ASSERT_EQ(predicted->size(), 3u);
  const std::vector<std::string> st = lines(out + "step_trace_time.csv");
  ASSERT_EQ(st.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    const PredictedStep& p = (*predicted)[i];
    EXPECT_EQ(kernel_ns_by_step[p.step], p.device_busy_ns) << "step " << p.step;
    const std::vector<std::string> row = split(st[i + 1]);
    EXPECT_EQ(std::stoll(row.at(0)), p.step);
    EXPECT_EQ(std::llround(std::stod(row.at(6)) * 1000), p.step_ns) << "Stage of step " << p.step;
  }

  // trace_view.json: a bare array, string ts, 3 ProfilerStep#, kernels on Ascend Hardware.
  std::ifstream tv_in(out + "trace_view.json");
  const json tv = json::parse(tv_in);
  ASSERT_TRUE(tv.is_array());
  std::map<int64_t, std::string> process;
  std::vector<std::string> steps;
  int64_t hardware_tasks = 0;
  for (const json& e : tv) {
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"].get<int64_t>()] = e["args"]["name"];
    if (e.contains("ts")) {
      EXPECT_TRUE(e["ts"].is_string()) << e.dump();
    }
    if (e["ph"] == "X" && e.value("name", "").rfind("ProfilerStep#", 0) == 0) {
      EXPECT_EQ(e["cat"], "cpu_op");
      steps.push_back(e["name"]);
    }
  }
  for (const json& e : tv) {
    if (e["ph"] == "X" && process[e["pid"].get<int64_t>()] == "Ascend Hardware") ++hardware_tasks;
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"}));
  EXPECT_EQ(hardware_tasks, written->kernels);

  // Read back by the importer: the same steps, host ops (+ the 3 ProfilerStep ops) and kernels.
  const std::string back = testing::TempDir() + "/npuscope_ascend_pt_back.db";
  for (const char* s : {"", "-wal", "-shm"}) std::remove((back + s).c_str());
  auto imported = import::importPath(written->folder, back);
  ASSERT_TRUE(imported.isOk()) << imported.status().message();
  auto r2 = TraceReader::open(back);
  ASSERT_TRUE(r2.isOk());
  auto run = (*r2)->latestRun();
  ASSERT_TRUE(run.isOk());
  auto back_steps = (*r2)->steps(run->id);
  ASSERT_TRUE(back_steps.isOk());
  ASSERT_EQ(back_steps->size(), 3u);
  EXPECT_EQ((*back_steps)[0].step, 1);
  auto tasks = (*r2)->deviceTaskCount(run->id);
  ASSERT_TRUE(tasks.isOk());
  EXPECT_EQ(*tasks, written->kernels);
  auto ops = (*r2)->stepOps(run->id, StepRange{});
  ASSERT_TRUE(ops.isOk());
  EXPECT_EQ(static_cast<int64_t>(ops->size()), written->host_ops + 3);
}

TEST(AscendPtOfARealRun, RefusesAStepRangeWithoutStepsAndAnImportedRun) {
  const std::string db = testing::TempDir() + "/npuscope_ascend_pt_refuse.db";
  ASSERT_NO_FATAL_FAILURE(testing_support::recordCnnRun(db, 5, "test_ascend_pt_real_run"));
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  AscendPtOptions o;
  o.steps = StepRange{7, 9};
  auto none = exportAscendPt(**reader, testing::TempDir() + "/x_ascend_pt", o);
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().message().find("no recorded step in 7..9"), std::string::npos) << none.status().message();

  const std::string back = testing::TempDir() + "/npuscope_ascend_pt_imported.db";
  for (const char* s : {"", "-wal", "-shm"}) std::remove((back + s).c_str());
  ASSERT_TRUE(import::importPath(std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt", back).isOk());
  auto r2 = TraceReader::open(back);
  ASSERT_TRUE(r2.isOk());
  auto refused = exportAscendPt(**r2, testing::TempDir() + "/y_ascend_pt");
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("was imported"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace npuscope::profiler
