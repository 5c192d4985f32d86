// TimelineData: the in-memory timeline agrees with the reader it was loaded from.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "npuscope/gui/timeline_data.h"
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
  // A modeled leaf has a device-lane copy with the same id.
  SliceRef dev = data.deviceCopyOf(f);
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(data.slice(dev).id, data.slice(f).id);
  EXPECT_EQ(data.slice(dev).start_ns, data.slice(f).device_start_ns);
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

TEST(TimelineDataErrors, MissingFileAndRunAreErrors) {
  EXPECT_FALSE(TimelineData::load("/nonexistent/trace.db", 1).isOk());
}

}  // namespace
}  // namespace npuscope::gui
