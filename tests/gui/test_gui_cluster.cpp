// The cluster view on a two-rank job written here with hand-picked times: the ranks' clocks
// differ (other monotonic bases, other wall anchors), so only wall-clock alignment puts their
// steps and collectives on top of each other; clicking a collective selects it on every rank by
// (group, seq), and the tables give the worked-out waits and breakdowns.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QTabWidget>
#include <QTableWidget>
#include <QSignalSpy>
#include <QTest>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "gui_test_support.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/gui/cluster_view.h"
#include "npuscope/gui/main_window.h"
#include "npuscope/gui/timeline_panel.h"

namespace npuscope::gui {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kWall = 1700000000LL * 1000000000LL;  // rank 0's wall anchor
constexpr int64_t kBase0 = 5000 * kMs;                   // rank 0's monotonic start
constexpr int64_t kBase1 = 80000 * kMs;                  // rank 1's: another clock
// Rank 1 started 2 ms later on the wall clock, so its own t maps to kWall + 2 ms + (t - kBase1).

struct Op {
  const char* name;
  int64_t step, start, dur;  // start: ms after the rank's start
  bool device;
};
struct Coll {
  int64_t step, seq;
  const char* kind;
  int64_t start, end;  // ms after the rank's start; end -1: never completed
  int64_t group = 0;
};

class ClusterViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    npuscope::testing::ensureApp();
    dir_ = std::filesystem::temp_directory_path() / ("npuscope_gui_cluster_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    // Both ranks: step 0 and step 1 of 100 ms at wall +10 ms and +110 ms; 20 ms of npu compute
    // at each step's start. Step 0: rank 1 spends 30 ms more in "late" (host), so rank 0 waits
    // 30 ms in all-reduce #1 (enqueued at wall +30, rank 1 at +60, both done at +70). Step 1:
    // rank 0 enqueues all-reduce #2 20 ms after rank 1 (+150 vs +130; done at +170). Rank 0
    // also starts a broadcast #3 that never completes. A second group's all-gather #1 (inside
    // all-reduce #2) shares seq 1 with all-reduce #1: only the pair tells them apart.
    writeRank("r0.db", 0, kBase0, kWall, 10,
              {{"conv", 0, 10, 20, true}, {"conv", 1, 110, 20, true}},
              {{0, 1, "allreduce", 30, 70}, {1, 2, "allreduce", 150, 170}, {1, 1, "allgather", 155, 165, 1},
               {1, 3, "broadcast", 200, -1}});
    writeRank("r1.db", 1, kBase1, kWall + 2 * kMs, 8,
              {{"conv", 0, 8, 20, true}, {"late", 0, 28, 30, false}, {"conv", 1, 108, 20, true}},
              {{0, 1, "allreduce", 58, 68}, {1, 2, "allreduce", 128, 168}, {1, 1, "allgather", 133, 143, 1}});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `first_step`: ms after the start where step 0 begins.
  void writeRank(const std::string& file, int64_t rank, int64_t base, int64_t wall, int64_t first_step,
                 const std::vector<Op>& ops, const std::vector<Coll>& colls) {
    auto w = TraceWriter::open((dir_ / file).string());
    ASSERT_TRUE(w.isOk());
    RunInfo info;
    info.started_ns = base;
    info.wall_start_ns = wall;
    info.rank = rank;
    info.world_size = 2;
    info.job = "job-gui";
    info.command = "train";
    ASSERT_TRUE((*w)->beginRun(info).isOk());
    auto buf = (*w)->takeBuffer();
    int64_t id = 1;
    for (const Op& o : ops) {
      OpRecord r;
      r.id = id++;
      r.start_ns = base + o.start * kMs;
      r.dur_ns = o.dur * kMs;
      r.thread_id = 1;
      r.step = static_cast<int32_t>(o.step);
      r.name_id = StringTable::global().intern(o.name);
      if (o.device) {
        r.device = 0;
        r.device_dur_ns = r.dur_ns;
      }
      buf->records[buf->size++] = r;
    }
    (*w)->submit(buf);
    for (const Coll& c : colls) {
      CollectiveRecord r;
      r.step = c.step;
      r.seq = c.seq;
      r.group = c.group;
      r.kind = c.kind;
      r.bytes = 4096;
      r.dtype = "float";
      r.group_size = 2;
      r.start_ns = base + c.start * kMs;
      r.end_ns = c.end < 0 ? -1 : base + c.end * kMs;
      (*w)->addCollective(r);
    }
    for (int64_t s = 0; s < 2; ++s) {
      StepRecord st;
      st.step = s;
      st.start_ns = base + (first_step + 100 * s) * kMs;
      st.dur_ns = 100 * kMs;
      (*w)->addStep(st);
    }
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }

  // The view, shown at a fixed size, on the job in dir_.
  void open(ClusterView& v) {
    v.resize(1400, 800);
    v.show();
    ASSERT_TRUE(v.openJob({dir_.string()})) << v.summary()->text().toStdString();
    QApplication::processEvents();
  }

  static QString text(QTableWidget* t, int row, int col) {
    auto* it = t->item(row, col);
    return it ? it->text() : QString();
  }
  static int rowOf(QTableWidget* t, const QString& rank, const QString& step) {
    for (int r = 0; r < t->rowCount(); ++r) {
      if (text(t, r, 0) == rank && text(t, r, 1) == step) return r;
    }
    return -1;
  }

  std::filesystem::path dir_;
};

TEST_F(ClusterViewTest, RanksShareOneWallClockAxis) {
  ClusterView v;
  ASSERT_NO_FATAL_FAILURE(open(v));
  ClusterTimeline* t = v.timeline();
  ASSERT_EQ(v.report()->ranks.size(), 2u);
  // Step 0 starts at wall +10 ms on both ranks, 75 s apart on their own clocks.
  EXPECT_EQ(t->wallOf(0, kBase0 + 10 * kMs), kWall + 10 * kMs);
  EXPECT_EQ(t->wallOf(1, kBase1 + 8 * kMs), kWall + 10 * kMs);
  EXPECT_EQ(t->jobBegin(), kWall + 10 * kMs);
  EXPECT_EQ(t->jobEnd(), kWall + 210 * kMs);
  // All-reduce #1 completes at wall +70 on both: the slices end at the same x; rank 1's starts
  // 30 ms (of pixels) later.
  const QRectF a = t->collectiveRect({0, 0}), b = t->collectiveRect({1, 0});
  EXPECT_NEAR(a.right(), b.right(), 0.5);
  EXPECT_NEAR(b.left() - a.left(), 30 * kMs / t->nsPerPixel(), 0.5);
  // The groups stack: rank 1's lanes below rank 0's.
  EXPECT_GT(t->laneTop(1, ClusterTimeline::kStepsLane), t->laneTop(0, ClusterTimeline::kCommunicationLane));
}

TEST_F(ClusterViewTest, ClickingACollectiveSelectsItOnEveryRank) {
  ClusterView v;
  ASSERT_NO_FATAL_FAILURE(open(v));
  ClusterTimeline* t = v.timeline();
  // Rank 0's all-reduce #1, clicked.
  QTest::mouseClick(t, Qt::LeftButton, {}, t->collectiveRect({0, 0}).center().toPoint());
  ASSERT_TRUE(t->hasSelection());
  EXPECT_EQ(t->selection().group, 0);
  EXPECT_EQ(t->selection().seq, 1);
  const auto rows = t->selectedRows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].rank, 0);
  EXPECT_EQ(rows[1].rank, 1);
  EXPECT_EQ(t->lastArrival({0, 1}), std::make_pair(kWall + 60 * kMs, 1));
  // The table: rank 0 enqueued 20 ms after the job began and waited 30 ms; rank 1, the last to
  // arrive, waited none; both completed at +60 ms.
  QTableWidget* sel = v.collectiveTable();
  EXPECT_EQ(v.tables()->currentWidget(), sel);
  ASSERT_EQ(sel->rowCount(), 2);
  EXPECT_EQ(text(sel, 0, 3), "20.000");
  EXPECT_EQ(text(sel, 0, 4), "60.000");
  EXPECT_EQ(text(sel, 0, 6), "30.000");
  EXPECT_EQ(text(sel, 0, 7), "");
  EXPECT_EQ(text(sel, 1, 3), "50.000");
  EXPECT_EQ(text(sel, 1, 6), "0.000");
  EXPECT_EQ(text(sel, 1, 7), "last to arrive");
  // Drawn: rank 1's copy is outlined too (dark just above its top edge, not above the unselected
  // all-reduce #2), rank 0's slice pale while it waited and solid after rank 1 arrived.
  QApplication::processEvents();
  const QImage img = t->grab().toImage();
  auto dark = [&](QPointF p) { return qGray(img.pixel(p.toPoint())) < 60; };
  const QRectF r1 = t->collectiveRect({1, 0}), r1b = t->collectiveRect({1, 1});
  EXPECT_TRUE(dark({r1.center().x(), r1.top() - 1}));
  EXPECT_FALSE(dark({r1b.center().x(), r1b.top() - 1}));
  const int y0 = static_cast<int>(t->collectiveRect({0, 0}).center().y());
  EXPECT_EQ(QColor(img.pixel(static_cast<int>(t->xAt(kWall + 45 * kMs)), y0 + 3)), QColor(0xf6, 0xdc, 0xb0));
  EXPECT_EQ(QColor(img.pixel(static_cast<int>(t->xAt(kWall + 66 * kMs)), y0 + 3)), QColor(0xd9, 0x80, 0x1a));

  // Rank 1's all-reduce #2: now rank 0 is the last to arrive and rank 1 waited 20 ms.
  QTest::mouseClick(t, Qt::LeftButton, {}, t->collectiveRect({1, 1}).center().toPoint());
  EXPECT_EQ(t->selection().seq, 2);
  EXPECT_EQ(t->lastArrival({0, 2}).second, 0);
  ASSERT_EQ(sel->rowCount(), 2);
  EXPECT_EQ(text(sel, 0, 7), "last to arrive");
  EXPECT_EQ(text(sel, 1, 6), "20.000");
  // The other group's #1: the all-gathers, not all-reduce #1.
  ASSERT_TRUE(t->selectCollective({1, 1}));
  ASSERT_EQ(sel->rowCount(), 2);
  EXPECT_TRUE(text(sel, 0, 1).startsWith("allgather")) << text(sel, 0, 1).toStdString();
  EXPECT_TRUE(text(sel, 1, 1).startsWith("allgather"));
  // The broadcast only rank 0 began, never completed: one row.
  ASSERT_TRUE(t->selectCollective({0, 3}));
  ASSERT_EQ(sel->rowCount(), 1);
  EXPECT_EQ(text(sel, 0, 4), "never");
  EXPECT_FALSE(t->selectCollective({0, 99}));
  // A click on empty space clears the selection.
  QTest::mouseClick(t, Qt::LeftButton, {}, QPoint(t->width() - 5, t->height() - 2));
  EXPECT_FALSE(t->hasSelection());
  EXPECT_EQ(sel->rowCount(), 0);
}

TEST_F(ClusterViewTest, StepsTableAndStepClick) {
  ClusterView v;
  ASSERT_NO_FATAL_FAILURE(open(v));
  QTableWidget* s = v.stepTable();
  ASSERT_EQ(s->rowCount(), 4);
  // Rank 0, step 0: 20 ms computing, 40 ms all-reduce not overlapped, no free time, stage 60.
  const int r00 = rowOf(s, "0", "0");
  ASSERT_GE(r00, 0);
  EXPECT_EQ(text(s, r00, 2), "100.000");
  EXPECT_EQ(text(s, r00, 3), "20.000");
  EXPECT_EQ(text(s, r00, 4), "40.000");
  EXPECT_EQ(text(s, r00, 7), "0.000");
  EXPECT_EQ(text(s, r00, 8), "60.000");
  // Rank 1, step 0: 20 computing, 10 communication, 30 free ("late" was on the host).
  const int r10 = rowOf(s, "1", "0");
  EXPECT_EQ(text(s, r10, 4), "10.000");
  EXPECT_EQ(text(s, r10, 7), "30.000");
  // Communication per rank: rank 0 has 2 all-reduces (40 + 20 ms) and a broadcast never completed.
  QTableWidget* c = v.communicationTable();
  bool bcast = false;
  for (int r = 0; r < c->rowCount(); ++r) {
    // All-reduce #1 waited 30 ms for rank 1, #2 none: 30 of the 60 ms waiting, 30 in transit.
    if (text(c, r, 0) == "0" && text(c, r, 1) == "allreduce") {
      EXPECT_EQ(text(c, r, 4), "60.000");
      EXPECT_EQ(text(c, r, 5), "30.000");
      EXPECT_EQ(text(c, r, 6), "30.000");
    }
    if (text(c, r, 0) == "0" && text(c, r, 1) == "broadcast") bcast = text(c, r, 9) == "1";
  }
  EXPECT_TRUE(bcast);
  // Clicking rank 1's step 1 fits step 1 (wall +110 to +210) on every rank.
  ClusterTimeline* t = v.timeline();
  const int y = t->laneTop(1, ClusterTimeline::kStepsLane) + ClusterTimeline::kLane / 2;
  QTest::mouseClick(t, Qt::LeftButton, {}, QPoint(static_cast<int>(t->xAt(kWall + 150 * kMs)), y));
  EXPECT_LE(t->viewBegin(), kWall + 110 * kMs);
  EXPECT_GT(t->viewBegin(), kWall + 100 * kMs);
  EXPECT_GE(t->wallAt(t->width()), kWall + 210 * kMs);
  EXPECT_LT(t->wallAt(t->width()), kWall + 220 * kMs);
}

TEST_F(ClusterViewTest, ReadsTheJobInTheBackgroundTheNewestRequestWinning) {
  ClusterView v;
  v.resize(1400, 800);
  v.show();
  QSignalSpy loaded(&v, &ClusterView::jobLoaded);
  QSignalSpy errors(&v, &ClusterView::errorOccurred);
  // A request for a folder with no rank files, then at once the job's: the first finishes and is
  // dropped, the second is shown.
  const std::string empty = (dir_ / "empty").string();
  std::filesystem::create_directories(empty);
  ASSERT_TRUE(v.openJob({empty}, "", false));
  EXPECT_TRUE(v.loading());
  EXPECT_TRUE(v.summary()->text().contains("Reading")) << v.summary()->text().toStdString();
  ASSERT_TRUE(v.openJob({dir_.string()}, "", false));
  ASSERT_TRUE(loaded.wait(20000));
  EXPECT_EQ(loaded.count(), 1);
  EXPECT_TRUE(loaded.at(0).at(0).toBool());
  EXPECT_EQ(errors.count(), 0);
  ASSERT_NE(v.report(), nullptr);
  EXPECT_EQ(v.report()->ranks.size(), 2u);
  EXPECT_FALSE(v.loading());
}

TEST_F(ClusterViewTest, SelectingARanksRunOpensItsJob) {
  MainWindow w;
  w.setSynchronous(true);
  w.resize(1400, 850);
  w.show();
  ASSERT_TRUE(w.openFile(QString::fromStdString((dir_ / "r1.db").string()), true));
  QApplication::processEvents();
  EXPECT_EQ(w.cluster()->report(), nullptr);  // read only when the tab is shown
  w.tabs()->setCurrentWidget(w.cluster());
  QApplication::processEvents();
  ASSERT_NE(w.cluster()->report(), nullptr);
  EXPECT_EQ(w.cluster()->report()->job, "job-gui");
  EXPECT_EQ(w.cluster()->report()->ranks.size(), 2u);
  EXPECT_TRUE(w.cluster()->summary()->text().contains("Slow rank 1")) << w.cluster()->summary()->text().toStdString();
  // A folder with no rank files: one line, in the view and the message bar.
  const QString empty = QString::fromStdString((dir_ / "empty").string());
  QDir().mkpath(empty);
  EXPECT_FALSE(w.openCluster({empty}));
  EXPECT_TRUE(w.lastError().contains("no trace files")) << w.lastError().toStdString();
  EXPECT_TRUE(w.cluster()->summary()->text().contains("no trace files"));
  EXPECT_EQ(w.cluster()->report(), nullptr);
  // What was opened stays when the tab is left and shown again (not replaced by the selected
  // rank's job).
  w.tabs()->setCurrentWidget(w.timeline());
  w.tabs()->setCurrentWidget(w.cluster());
  QApplication::processEvents();
  EXPECT_EQ(w.cluster()->report(), nullptr);
  // Selecting a rank's run again gives the tab that run's job.
  w.selectRuns({});
  w.selectRuns({1});
  QApplication::processEvents();
  ASSERT_NE(w.cluster()->report(), nullptr);
  EXPECT_EQ(w.cluster()->report()->job, "job-gui");
}

}  // namespace
}  // namespace npuscope::gui
