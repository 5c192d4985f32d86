// TimelineData: the in-memory timeline agrees with the reader it was loaded from.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include <set>
#include <sqlite3.h>

#include "npuscope/gui/timeline_data.h"
#include "npuscope/import/import.h"
#include "synthetic_trace.h"

namespace npuscope::gui {
namespace {

std::string tempTrace(const char* name) {
  auto p = std::filesystem::temp_directory_path() / (std::string("npuscope_gui_") + name + "_" +
                                                      std::to_string(::getpid()) + ".db");
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

class TimelineDataTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = tempTrace("data");
    testing::SyntheticRunOptions o;
    o.steps = 20;
    auto r = testing::writeSyntheticFile(path_, o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    info_ = r.value();
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  static std::string path_;
  static testing::SyntheticRunInfo info_;
};
std::string TimelineDataTest::path_;
testing::SyntheticRunInfo TimelineDataTest::info_;

TEST_F(TimelineDataTest, LoadsEveryOpIntoThreadAndDeviceLanes) {
  for (int workers : {1, 2, 3}) {
    auto d = TimelineData::load(path_, info_.run_id, workers);
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    const TimelineData& data = *d.value();
    EXPECT_EQ(data.opCount(), info_.ops);
    ASSERT_GE(data.lanes().size(), 3u);
    EXPECT_EQ(data.lanes()[0].kind, LaneKind::kThread);
    EXPECT_EQ(data.lanes()[1].backward_ops, static_cast<int64_t>(data.lanes()[1].slices.size()));
    EXPECT_EQ(data.lanes().back().kind, LaneKind::kDevice);
    EXPECT_EQ(data.steps().size(), 20u);
    // Each depth block is in start order and its slices do not overlap.
    for (const Lane& lane : data.lanes()) {
      for (int dd = 0; dd < lane.depthCount(); ++dd) {
        for (uint32_t i = lane.depth_begin[dd] + 1; i < lane.depth_begin[dd + 1]; ++i) {
          ASSERT_LE(lane.slices[i - 1].end(), lane.slices[i].start_ns) << lane.title << " depth " << dd;
        }
      }
    }
  }
}

void expectSameTable(const OpAggregateTable& a, const OpAggregateTable& b) {
  EXPECT_EQ(a.op_count, b.op_count);
  EXPECT_EQ(a.group_count, b.group_count);
  EXPECT_EQ(a.self_sum_ns, b.self_sum_ns);
  EXPECT_EQ(a.total_device_ns, b.total_device_ns);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    SCOPED_TRACE(a.rows[i].name + " " + a.rows[i].input_shapes);
    EXPECT_EQ(a.rows[i].name, b.rows[i].name);
    EXPECT_EQ(a.rows[i].input_shapes, b.rows[i].input_shapes);
    EXPECT_EQ(a.rows[i].calls, b.rows[i].calls);
    EXPECT_EQ(a.rows[i].total_ns, b.rows[i].total_ns);
    EXPECT_EQ(a.rows[i].self_ns, b.rows[i].self_ns);
    EXPECT_EQ(a.rows[i].min_ns, b.rows[i].min_ns);
    EXPECT_EQ(a.rows[i].max_ns, b.rows[i].max_ns);
    EXPECT_EQ(a.rows[i].device_ns, b.rows[i].device_ns);
    EXPECT_EQ(a.rows[i].device_calls, b.rows[i].device_calls);
    EXPECT_DOUBLE_EQ(a.rows[i].self_pct, b.rows[i].self_pct);
  }
}

TEST_F(TimelineDataTest, AggregateOfAWindowEqualsTheReaders) {
  auto d = TimelineData::load(path_, info_.run_id);
  ASSERT_TRUE(d.isOk());
  auto reader = TraceReader::open(path_);
  ASSERT_TRUE(reader.isOk());
  const TimelineData& data = *d.value();
  const int64_t span = data.endNs() - data.beginNs();
  std::vector<TimeWindow> windows = {TimeWindow(), {data.beginNs(), data.endNs()},
                                     {data.beginNs() + span / 3, data.beginNs() + span / 3 + span / 50},
                                     {data.beginNs() + span / 2 + 12345, data.beginNs() + span / 2 + 900000}};
  for (const StepRow& s : data.steps()) windows.push_back({s.start_ns, s.start_ns + s.dur_ns / 3});
  for (OpGroupBy g : {OpGroupBy::kName, OpGroupBy::kNameAndShapes}) {
    for (const TimeWindow& w : windows) {
      OpAggregateQuery q;
      q.run_id = info_.run_id;
      q.window = w;
      q.group_by = g;
      auto ref = reader.value()->opAggregates(q);
      ASSERT_TRUE(ref.isOk()) << ref.status().toString();
      expectSameTable(data.aggregate(w, g), ref.value());
    }
  }
}

TEST_F(TimelineDataTest, PartnersShareSequenceNumbersAcrossThreads) {
  auto d = TimelineData::load(path_, info_.run_id);
  ASSERT_TRUE(d.isOk());
  const TimelineData& data = *d.value();
  auto hits = data.search("AddmmBackward0");
  ASSERT_FALSE(hits.empty());
  // The first hit is the evaluate_function wrapper (outermost); its partner is a forward op.
  const Slice& b = data.slice(hits.front());
  EXPECT_TRUE(b.is_backward);
  SliceRef f = data.partner(hits.front());
  ASSERT_TRUE(f.valid());
  EXPECT_FALSE(data.slice(f).is_backward);
  EXPECT_EQ(data.slice(f).seq_nr, b.seq_nr);
  EXPECT_EQ(data.str(data.slice(f).name), "aten::addmm");
  SliceRef back = data.partner(f);
  ASSERT_TRUE(back.valid());
  EXPECT_EQ(data.slice(back).depth, 0);
  EXPECT_EQ(data.findById(data.slice(f).id), f);
  // A kernel has a predicted device-lane copy with the same id: the cost model's duration,
  // inside its step's predicted span (placed at the step's recorded start or later).
  SliceRef dev = data.deviceCopyOf(f);
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(data.slice(dev).id, data.slice(f).id);
  EXPECT_EQ(data.slice(dev).dur_ns, data.slice(f).device_dur_ns);
  const PredictedStep* ps = data.predictedStep(data.slice(f).step);
  ASSERT_NE(ps, nullptr);
  const StepRow* row = data.stepByIndex(data.slice(f).step);
  ASSERT_NE(row, nullptr);
  EXPECT_GE(data.slice(dev).start_ns, row->start_ns);
  EXPECT_LT(data.slice(dev).start_ns, row->start_ns + row->dur_ns + ps->step_ns);
  EXPECT_EQ(data.lanes()[static_cast<size_t>(dev.lane)].title, "npu:0 (predicted)");
}

TEST_F(TimelineDataTest, SearchIsCaseInsensitiveAndInStartOrder) {
  auto d = TimelineData::load(path_, info_.run_id);
  ASSERT_TRUE(d.isOk());
  auto hits = d.value()->search("CONV2D");
  EXPECT_EQ(hits.size(), 20u * 2u);  // two conv blocks per step
  for (size_t i = 1; i < hits.size(); ++i) {
    EXPECT_LE(d.value()->slice(hits[i - 1]).start_ns, d.value()->slice(hits[i]).start_ns);
  }
  EXPECT_TRUE(d.value()->search("no such op").empty());
}

// A run too large to hold (here: a limit of 100 ops) loads only its block summaries; a window
// then loads exactly the ops that start in it plus the ops enclosing its start, as a full load
// of the same file has them.
TEST_F(TimelineDataTest, PartialLoadHoldsTheWindowsOpsAndEstimatesTheRestFromBlocks) {
  auto full = TimelineData::load(path_, info_.run_id, 2);
  ASSERT_TRUE(full.isOk()) << full.status().toString();
  const TimelineData& f = *full.value();
  ASSERT_FALSE(f.partial());

  LoadOptions o;
  o.full_load_ops = 100;
  auto bare = TimelineData::load(path_, info_.run_id, o);
  ASSERT_TRUE(bare.isOk()) << bare.status().toString();
  EXPECT_TRUE(bare.value()->partial());
  EXPECT_EQ(bare.value()->opCount(), 0);
  EXPECT_EQ(bare.value()->totalOps(), info_.ops);
  EXPECT_EQ(bare.value()->estimateOps(f.beginNs(), f.endNs() + 1), info_.ops);
  EXPECT_EQ(bare.value()->beginNs(), f.beginNs());
  EXPECT_EQ(bare.value()->endNs(), f.endNs());
  EXPECT_EQ(bare.value()->steps().size(), f.steps().size());
  EXPECT_FALSE(bare.value()->covers(f.beginNs(), f.beginNs() + 1));

  // A window from the middle of step 5 to the middle of step 7.
  const StepRow* s5 = f.stepByIndex(5);
  const StepRow* s7 = f.stepByIndex(7);
  ASSERT_TRUE(s5 && s7);
  const TimeWindow w{s5->start_ns + s5->dur_ns / 2, s7->start_ns + s7->dur_ns / 2};
  std::set<int64_t> expected;
  int64_t in_window = 0;
  for (const Lane& lane : f.lanes()) {
    if (lane.kind != LaneKind::kThread) continue;
    for (const Slice& s : lane.slices) {
      if (w.contains(s.start_ns)) ++in_window;
      if (w.contains(s.start_ns) || (s.start_ns < w.begin_ns && s.end() > w.begin_ns)) expected.insert(s.id);
    }
  }
  ASSERT_GT(in_window, 100);
  ASSERT_GT(expected.size(), static_cast<size_t>(in_window)) << "the window cuts through enclosing ops";
  // The block estimate is close (blocks hold a few thousand ops; the run is small).
  const int64_t est = bare.value()->estimateOps(w.begin_ns, w.end_ns);
  EXPECT_GT(est, 0);
  EXPECT_LE(est, info_.ops);

  o.has_window = true;
  o.window = w;
  for (int workers : {1, 3}) {
    o.workers = workers;
    auto part = TimelineData::load(path_, info_.run_id, o);
    ASSERT_TRUE(part.isOk()) << part.status().toString();
    const TimelineData& p = *part.value();
    EXPECT_TRUE(p.partial());
    EXPECT_TRUE(p.covers(w.begin_ns, w.end_ns));
    EXPECT_FALSE(p.covers(w.begin_ns - 1, w.end_ns));
    std::set<int64_t> got;
    for (const Lane& lane : p.lanes()) {
      if (lane.kind != LaneKind::kThread) continue;
      for (int d = 0; d < lane.depthCount(); ++d) {
        for (uint32_t i = lane.depth_begin[d] + 1; i < lane.depth_begin[d + 1]; ++i) {
          ASSERT_LE(lane.slices[i - 1].start_ns, lane.slices[i].start_ns) << lane.title << " depth " << d;
        }
      }
      for (const Slice& s : lane.slices) EXPECT_TRUE(got.insert(s.id).second) << "op " << s.id << " twice";
    }
    EXPECT_EQ(got, expected);
    EXPECT_EQ(p.opCount(), static_cast<int64_t>(expected.size()));
    // What the window holds is what a full load aggregates there.
    expectSameTable(p.aggregate(w), f.aggregate(w));
    // Steps wholly in the window are predicted as in the full load; others are not.
    for (const PredictedStep& ps : p.predictedSteps()) {
      const PredictedStep* fs = f.predictedStep(ps.step);
      ASSERT_NE(fs, nullptr);
      EXPECT_EQ(ps.step_ns, fs->step_ns) << "step " << ps.step;
      const StepRow* row = f.stepByIndex(ps.step);
      ASSERT_NE(row, nullptr);
      EXPECT_TRUE(p.covers(row->start_ns, row->start_ns + row->dur_ns));
    }
  }
}

// An imported torch_npu trace: one lane per real device stream, every task in one, and the
// launch link from each linked task to its host op (and back).
TEST(TimelineDataImported, RealDeviceStreamsWithLaunchLinks) {
  const std::string db = tempTrace("imported");
  auto imp = import::importPath(std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt", db);
  ASSERT_TRUE(imp.isOk()) << imp.status().toString();
  // Independent figures: the SQLite file itself (distinct device/stream pairs) and the
  // sample's Python-counted tasks (539, of which 537 are linked to a launching op).
  int64_t streams = 0;
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT count(*) FROM (SELECT DISTINCT device, stream FROM device_tasks)", -1, &st,
                                 nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    streams = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
  }
  ASSERT_GT(streams, 1);
  auto d = TimelineData::load(db, imp.value().runs.at(0).run_id);
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  const TimelineData& data = *d.value();
  int64_t task_lanes = 0, tasks = 0, linked = 0, checked = 0;
  for (int li = 0; li < static_cast<int>(data.lanes().size()); ++li) {
    const Lane& lane = data.lanes()[static_cast<size_t>(li)];
    EXPECT_NE(lane.kind, LaneKind::kDevice) << "an imported run has no modeled lanes";
    if (lane.kind != LaneKind::kTasks) continue;
    ++task_lanes;
    tasks += static_cast<int64_t>(lane.slices.size());
    for (uint32_t i = 0; i < lane.slices.size(); ++i) {
      const SliceRef t{li, i};
      const SliceRef h = data.launchOf(t);
      if (!h.valid()) continue;
      ++linked;
      EXPECT_EQ(data.slice(h).id, lane.slices[i].parent_id);
      EXPECT_LE(data.slice(h).start_ns, lane.slices[i].start_ns) << "a task starts after its launch";
      const auto back = data.tasksOf(h);
      EXPECT_NE(std::find(back.begin(), back.end(), t), back.end());
      ++checked;
    }
  }
  EXPECT_EQ(task_lanes, streams);
  EXPECT_EQ(tasks, 539);
  EXPECT_EQ(linked, 537);
  EXPECT_EQ(checked, 537);
  std::filesystem::remove(db);
}

TEST(TimelineDataErrors, MissingFileAndRunAreErrors) {
  EXPECT_FALSE(TimelineData::load("/nonexistent/trace.db", 1).isOk());
}

}  // namespace
}  // namespace npuscope::gui
