// Renders every view of the workbench offscreen on a realistic generated run and saves PNGs into
// the build tree (tests/gui/screenshots/), for a person to look at. Each screenshot also checks
// that its view is not blank.
#include <gtest/gtest.h>

#include <cmath>

#include <QDir>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QSignalSpy>
#include <QTest>
#include <QTreeWidget>
#include <QTextBrowser>

#include "gui_test_support.h"
#include "npuscope/gui/cluster_view.h"
#include "npuscope/gui/compare_view.h"
#include "npuscope/gui/dumps_view.h"
#include "npuscope/gui/findings_view.h"
#include "npuscope/gui/main_window.h"
#include "npuscope/gui/memory_view.h"
#include "npuscope/gui/models.h"
#include "npuscope/gui/operators_view.h"
#include "npuscope/gui/record_dialog.h"
#include "npuscope/gui/timeline_panel.h"
#include "npuscope/gui/timeline_view.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/training_view.h"

#ifndef NPUSCOPE_SCREENSHOT_DIR
#define NPUSCOPE_SCREENSHOT_DIR "screenshots"
#endif

namespace npuscope::gui {
namespace {

// Distinct colours in a downscaled image: a blank or single-colour view has very few.
int colourCount(const QImage& img) {
  const QImage small = img.scaled(200, 120);
  QSet<QRgb> seen;
  for (int y = 0; y < small.height(); ++y) {
    for (int x = 0; x < small.width(); ++x) seen.insert(small.pixel(x, y));
  }
  return seen.size();
}

void save(QWidget* w, const QString& name) {
  QApplication::processEvents();
  QDir().mkpath(NPUSCOPE_SCREENSHOT_DIR);
  const QImage img = w->grab().toImage();
  const QString path = QString(NPUSCOPE_SCREENSHOT_DIR) + "/" + name + ".png";
  ASSERT_TRUE(img.save(path)) << path.toStdString();
  EXPECT_GT(colourCount(img), 12) << name.toStdString() << " looks blank";
}

// Runs the npuscope CLI with `args`; a failure fails the calling test.
void runCli(const QStringList& args) {
  QProcess cli;
  cli.start(NPUSCOPE_CLI, args);
  ASSERT_TRUE(cli.waitForFinished(120000));
  ASSERT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
}

// The main window at screenshot size, showing `db`.
void showFile(MainWindow& w, const std::string& db) {
  w.setSynchronous(true);
  w.resize(1600, 950);
  w.show();
  ASSERT_TRUE(w.openFile(QString::fromStdString(db), true));
  QTest::qWait(50);
}

TEST(Screenshots, EveryView) {
  npuscope::testing::ensureApp();
  const auto& f = npuscope::testing::twoRunFixture();
  MainWindow w;
  w.setSynchronous(true);
  w.resize(1600, 950);
  w.show();
  ASSERT_TRUE(w.openFile(QString::fromStdString(f.path), true));
  w.selectRuns({f.o1.run_id});
  ASSERT_EQ(w.document()->currentRun(), f.o1.run_id);
  QTest::qWait(50);

  // Timeline: whole run, then one step with a slice clicked and a range selected.
  w.tabs()->setCurrentWidget(w.timeline());
  TimelineView* v = w.timeline()->view();
  v->fitAll();
  save(&w, "01_timeline_run");
  v->fitStep(3);
  const TimelineData* d = w.document()->timeline();
  for (SliceRef r : d->search("aten::addmm")) {
    if (d->slice(r).step == 3) {
      v->selectSlice(r, false);
      break;
    }
  }
  const StepRow* s = d->stepByIndex(3);
  w.timeline()->summarizeRange(s->start_ns + s->dur_ns / 5, s->start_ns + s->dur_ns / 2);
  save(&w, "02_timeline_step_details_range");
  // Deep zoom (about 1 ms across) around the backward pass, with a search.
  w.timeline()->search("mm");
  w.timeline()->nextMatch();
  v->fitWindow(s->start_ns + s->dur_ns / 2, s->start_ns + s->dur_ns / 2 + 400'000);
  save(&w, "03_timeline_zoom_search");

  w.tabs()->setCurrentWidget(w.operators());
  w.operators()->setGroupByShapes(true);
  w.operators()->table()->selectRow(0);
  save(&w, "04_operators");

  w.tabs()->setCurrentWidget(w.training());
  w.training()->showStep(3);
  save(&w, "05_training");

  w.tabs()->setCurrentWidget(w.dumps());
  for (int r = 0; r < w.dumps()->model()->rowCount(); ++r) {
    const TensorDumpInfo* t = w.dumps()->model()->dumpAt(r);
    if (t->nan_count.value_or(0) > 0) {
      w.dumps()->table()->selectRow(w.dumps()->proxy()->mapFromSource(w.dumps()->model()->index(r, 0)).row());
      break;
    }
  }
  save(&w, "06_dumps");

  w.selectRuns({f.o1.run_id, f.o2.run_id});
  w.tabs()->setCurrentWidget(w.compare());
  w.compare()->table()->selectRow(0);
  save(&w, "07_compare");

  RecordDialog dlg;
  dlg.setOutputPath("/tmp/run.db");
  dlg.show();
  save(&dlg, "08_record_dialog");

  // An error in the message bar.
  MainWindow bad;
  bad.resize(1200, 600);
  bad.show();
  const std::string text = npuscope::testing::tempPath("notatrace");
  {
    QFile file(QString::fromStdString(text));
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.write("hello\n");
  }
  EXPECT_FALSE(bad.openFile(QString::fromStdString(text), true));
  save(&bad, "09_error_message");
  QFile::remove(QString::fromStdString(text));
}


// A torch_npu trace of a real Ascend device, imported by the CLI, in the timeline, operators and
// training views (imported_*.png): its host threads, its ProfilerStep and its op table.
// A run too large to hold (the O1 fixture with the limit lowered to 1000 ops): the whole run
// shows op density and step bands, a zoomed-in view asks for its window, whose ops then draw;
// the range summary beyond the window comes from the file.
// Each step's band carries the device's busy share: the green part of its foot bar is the sum
// of the step's modeled device durations over the step's time (summed here from the ops).
TEST(Screenshots, StepBandsShowTheDeviceBusyShare) {
  npuscope::testing::ensureApp();
  const auto& f = npuscope::testing::twoRunFixture();
  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, f.path));
  QTest::qWait(100);  // the latest run's step times arrive
  QSignalSpy loaded(w.document(), &TraceDocument::stepTimesLoaded);
  w.selectRuns({f.o1.run_id});
  w.tabs()->setCurrentWidget(w.timeline());
  ASSERT_TRUE(loaded.count() > 0 || loaded.wait(10000));
  ASSERT_EQ(w.document()->currentRun(), f.o1.run_id);
  QApplication::processEvents();
  TimelineView* v = w.timeline()->view();
  const TimelineData* d = w.document()->timeline();
  const int64_t step = 5;
  const StepRow* st = d->stepByIndex(step);
  ASSERT_NE(st, nullptr);
  // An npu run's bar is the device's busy share of the step predicted on a real npu: its
  // kernels on the predicted npu lane over the predicted step time.
  const PredictedStep* ps = d->predictedStep(step);
  ASSERT_NE(ps, nullptr);
  int64_t busy = 0;
  for (const Lane& l : d->lanes()) {
    if (l.kind != LaneKind::kDevice || l.device < 0) continue;
    for (const Slice& s : l.slices) busy += s.step == step ? s.dur_ns : 0;
  }
  const double share = static_cast<double>(busy) / static_cast<double>(ps->step_ns);
  ASSERT_GT(share, 0.02);
  ASSERT_LT(share, 0.98);
  v->fitWindow(st->start_ns, st->start_ns + st->dur_ns);
  const QImage img = v->grab().toImage();
  const int y = TimelineView::kRuler + TimelineView::kStepBand - 3;  // inside the 3-px foot bar
  const int x0 = static_cast<int>(std::ceil(v->xAt(st->start_ns))) + 1;
  const int x1 = static_cast<int>(std::floor(v->xAt(st->start_ns + st->dur_ns))) - 2;
  ASSERT_GT(x1 - x0, 200);
  int green = 0;
  for (int x = x0; x < x1; ++x) green += img.pixelColor(x, y) == QColor(0x2e, 0x8b, 0x57);
  EXPECT_NEAR(static_cast<double>(green) / (x1 - x0), share, 0.02) << "busy " << busy << " of " << ps->step_ns;
  v->fitAll();
  save(&w, "steps_device_share");
  // Zoomed to the predicted step: the predicted host lane and the npu stream it feeds.
  v->fitWindow(st->start_ns, st->start_ns + ps->step_ns);
  save(&w, "steps_predicted_zoom");
}

// Rank 1 of a 2-rank DDP job recorded by npuscope.profile (the fuzz seed ddp_rank1_cluster.db):
// its all-reduces are drawn on the npu's predicted communication lane, each as long as the HCCS
// mesh model makes a 780-byte all-reduce of 2 ranks, apart from the kernels' lane.
TEST(Screenshots, CollectivesOnThePredictedCommunicationLane) {
  npuscope::testing::ensureApp();
  const std::string db = (QDir::tempPath() + "/npuscope_gui_ddp_rank1.db").toStdString();
  QFile::remove(QString::fromStdString(db));
  ASSERT_TRUE(QFile::copy(NPUSCOPE_DDP_RANK_DB, QString::fromStdString(db)));
  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, db));
  w.tabs()->setCurrentWidget(w.timeline());
  QApplication::processEvents();
  const TimelineData* d = w.document()->timeline();
  ASSERT_NE(d, nullptr);
  HostModelParams two;
  two.comm_ranks = 2;
  const int64_t expected = collectiveDurationNs("hcom_allReduce_", 780, two);  // 2 x (60 us + 21 ns)
  int comm_lanes = 0, all_reduces = 0;
  for (const Lane& l : d->lanes()) {
    const bool comm = l.title == "npu:0 comm (predicted)";
    comm_lanes += comm;
    for (const Slice& s : l.slices) {
      const bool collective = d->str(s.name).rfind("hcom_", 0) == 0;
      if (l.kind == LaneKind::kDevice && l.device >= 0) {
        EXPECT_EQ(collective, comm) << l.title;
      }
      if (comm && d->str(s.name) == "hcom_allReduce_") {
        EXPECT_EQ(s.dur_ns, expected);
        ++all_reduces;
      }
    }
  }
  EXPECT_EQ(comm_lanes, 1);
  EXPECT_EQ(all_reduces, 4);  // one gradient bucket per step
  const StepRow* st = d->stepByIndex(2);
  ASSERT_NE(st, nullptr);
  const PredictedStep* ps = d->predictedStep(2);
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->collectives, 1);
  TimelineView* v = w.timeline()->view();
  v->fitWindow(st->start_ns, st->start_ns + ps->step_ns);
  for (SliceRef r : d->search("hcom_allReduce_")) {
    if (d->slice(r).step == 2 && d->lanes()[static_cast<size_t>(r.lane)].kind == LaneKind::kThread) {
      v->selectSlice(r, false);
      break;
    }
  }
  save(&w, "ddp_rank_collectives_predicted");
}

// The Findings tab on a run with overflow-skipped steps (the O1 fixture skips steps 3 and 8):
// the advisor's finding names them, and activating it opens the first on the timeline.
TEST(Screenshots, FindingsOfARunWithSkippedSteps) {
  npuscope::testing::ensureApp();
  const auto& f = npuscope::testing::twoRunFixture();
  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, f.path));
  w.selectRuns({f.o1.run_id});
  w.tabs()->setCurrentWidget(w.findings());
  const auto& findings = w.findings()->findings();
  int skipped = -1;
  for (size_t i = 0; i < findings.size(); ++i) {
    if (findings[i].rule == "skipped_steps") skipped = static_cast<int>(i);
  }
  ASSERT_GE(skipped, 0);
  EXPECT_EQ(findings[static_cast<size_t>(skipped)].steps, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(w.findings()->tree()->topLevelItemCount(), static_cast<int>(findings.size()));
  save(&w, "findings_01");
  w.findings()->activate(skipped);
  EXPECT_EQ(w.tabs()->currentWidget(), w.timeline());
  const StepRow* s3 = w.document()->timeline()->stepByIndex(3);
  ASSERT_NE(s3, nullptr);
  EXPECT_LE(w.timeline()->view()->viewBegin(), s3->start_ns);
  EXPECT_GE(w.timeline()->view()->viewEnd(), s3->start_ns + s3->dur_ns);
}

TEST(Screenshots, PartialRunOverviewAndWindow) {
  npuscope::testing::ensureApp();
  const auto& f = npuscope::testing::twoRunFixture();
  MainWindow w;
  w.document()->setFullLoadOps(1000);
  ASSERT_NO_FATAL_FAILURE(showFile(w, f.path));
  w.selectRuns({f.o1.run_id});
  w.tabs()->setCurrentWidget(w.timeline());
  TimelineView* v = w.timeline()->view();
  const TimelineData* d = w.document()->timeline();
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->partial());
  EXPECT_EQ(d->opCount(), 0);
  EXPECT_EQ(d->totalOps(), f.o1.ops);
  v->fitAll();
  save(&w, "partial_01_overview");
  // Whole run: more than the budget, nothing asked.
  v->setWindowBudget(2000);
  EXPECT_GE(v->wantedWindow().begin_ns, v->wantedWindow().end_ns);
  // One step: within it. The view asks once it settles, the panel has the document load it.
  QSignalSpy asked(v, &TimelineView::windowWanted);
  QSignalSpy loaded(w.document(), &TraceDocument::windowLoaded);
  ASSERT_TRUE(v->fitStep(5));
  const TimeWindow want = v->wantedWindow();
  ASSERT_LT(want.begin_ns, want.end_ns);
  ASSERT_TRUE(loaded.wait(10000)) << "the window is asked for and loaded";
  EXPECT_EQ(asked.count(), 1);
  QApplication::processEvents();
  d = w.document()->timeline();
  EXPECT_TRUE(d->covers(v->viewBegin(), v->viewEnd()));
  EXPECT_GT(d->opCount(), 0);
  EXPECT_LT(d->opCount(), d->totalOps());
  EXPECT_EQ(v->data(), d) << "the view shows the new window";
  save(&w, "partial_02_step_window");
  // A range beyond the window: summarised from the file.
  const StepRow* s1 = d->stepByIndex(1);
  const StepRow* s9 = d->stepByIndex(9);
  ASSERT_TRUE(s1 && s9);
  w.timeline()->summarizeRange(s1->start_ns, s9->start_ns);
  auto r = TraceReader::open(f.path);
  ASSERT_TRUE(r.isOk());
  OpAggregateQuery q;
  q.run_id = f.o1.run_id;
  q.window = {s1->start_ns, s9->start_ns};
  auto t = r.value()->opAggregates(q);
  ASSERT_TRUE(t.isOk());
  EXPECT_EQ(w.timeline()->rangeModel()->rowCount(), static_cast<int>(t->rows.size()));
}

// A run too long to read before the first paint (more ops than setFirstPaintOps, within
// full_load_ops) is painted from its block summaries at once; every op follows unasked.
TEST(Screenshots, ALongRunIsPaintedFromItsSummariesThenEveryOpFollows) {
  npuscope::testing::ensureApp();
  const auto& f = npuscope::testing::twoRunFixture();
  MainWindow w;
  w.document()->setFirstPaintOps(1000);
  ASSERT_NO_FATAL_FAILURE(showFile(w, f.path));
  w.document()->waitForBackground();
  QSignalSpy every(w.document(), &TraceDocument::windowLoaded);
  w.selectRuns({f.o1.run_id});
  w.tabs()->setCurrentWidget(w.timeline());
  TimelineView* v = w.timeline()->view();
  const TimelineData* d = w.document()->timeline();
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->runId(), f.o1.run_id);
  // No event was processed since the load: what the first paint shows.
  ASSERT_TRUE(d->partial()) << "the first paint waited for every op";
  EXPECT_EQ(d->opCount(), 0);
  EXPECT_EQ(d->totalOps(), f.o1.ops);
  EXPECT_TRUE(w.document()->isCompleting());
  EXPECT_TRUE(w.statusText().contains("reading every op")) << w.statusText().toStdString();
  EXPECT_EQ(v->data(), d);
  EXPECT_FALSE(w.document()->loadWindow({d->beginNs(), d->endNs()})) << "no window is read twice";
  v->fitAll();
  const QString first = QString(NPUSCOPE_SCREENSHOT_DIR) + "/staged_01_first_paint.png";
  QDir().mkpath(NPUSCOPE_SCREENSHOT_DIR);
  ASSERT_TRUE(w.grab().toImage().save(first));
  ASSERT_TRUE(every.count() > 0 || every.wait(20000)) << "every op follows";
  d = w.document()->timeline();
  EXPECT_FALSE(d->partial());
  EXPECT_EQ(d->opCount(), f.o1.ops);
  EXPECT_EQ(v->data(), d) << "the view shows every op";
  EXPECT_FALSE(w.document()->isCompleting());
  EXPECT_FALSE(w.statusText().contains("reading every op")) << w.statusText().toStdString();
  EXPECT_FALSE(w.statusText().contains("too many to hold")) << w.statusText().toStdString();
  save(&w, "staged_02_every_op");
  // A refresh of the run on screen reads every op before it shows them: no flash of summaries.
  ASSERT_TRUE(w.document()->loadRun(f.o1.run_id, true));
  EXPECT_FALSE(w.document()->timeline()->partial());
  EXPECT_FALSE(w.document()->isCompleting());
}

TEST(Screenshots, ImportedTorchNpuTrace) {
  npuscope::testing::ensureApp();
  // In a folder of its own: the Cluster tab reads the rank files beside it.
  const QString dir = QDir::tempPath() + QString("/npuscope_gui_imported_%1").arg(::getpid());
  QDir(dir).removeRecursively();
  QDir().mkpath(dir);
  const std::string db = (dir + "/alexnet_rank0.db").toStdString();
  ASSERT_NO_FATAL_FAILURE(runCli({"import", "-q", QString(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt", "--db", QString::fromStdString(db)}));
  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, db));
  w.tabs()->setCurrentWidget(w.timeline());
  w.timeline()->view()->fitAll();
  save(&w, "imported_01_timeline");
  // The real device streams, and the launch links of a host op that queued several tasks.
  {
    TimelineView* v = w.timeline()->view();
    const TimelineData* d = v->data();
    ASSERT_NE(d, nullptr);
    int task_lanes = 0;
    for (const Lane& l : d->lanes()) task_lanes += l.kind == LaneKind::kTasks;
    EXPECT_GE(task_lanes, 2);
    SliceRef best;
    size_t most = 0;
    for (int li = 0; li < static_cast<int>(d->lanes().size()); ++li) {
      if (d->lanes()[static_cast<size_t>(li)].kind != LaneKind::kThread) continue;
      for (uint32_t i = 0; i < d->lanes()[static_cast<size_t>(li)].slices.size(); ++i) {
        const size_t n = d->tasksOf({li, i}).size();
        if (n > most && n < 12) {
          most = n;
          best = {li, i};
        }
      }
    }
    ASSERT_TRUE(best.valid());
    const auto tasks = d->tasksOf(best);
    const Slice& h = d->slice(best);
    const Slice& last = d->slice(tasks.back());
    const int64_t span = std::max<int64_t>(last.end() - h.start_ns, 1000);
    v->fitWindow(h.start_ns - span / 5, last.end() + span / 5);
    v->selectSlice(best, false);
    EXPECT_TRUE(w.timeline()->details()->toPlainText().contains("Device tasks (real)"));
    save(&w, "imported_04_launch_links");
    v->selectSlice(tasks.front(), false);
    EXPECT_TRUE(w.timeline()->details()->toPlainText().contains("Launched by"));
    save(&w, "imported_05_task_selected");
  }
  w.tabs()->setCurrentWidget(w.operators());
  ASSERT_GT(w.operators()->table()->model()->rowCount(), 100) << "the imported host ops are in the op table";
  w.operators()->table()->selectRow(0);
  save(&w, "imported_02_operators");
  w.tabs()->setCurrentWidget(w.training());
  save(&w, "imported_03_training");
  // The rank's job in the Cluster tab (the imported run knows its rank): torch_npu's own step
  // breakdown (step_trace_time.csv: Computing 8.874, Communication(Not Overlapped) 101.963,
  // Free 25.744 ms) and its HCCL tasks as the collectives.
  w.tabs()->setCurrentWidget(w.cluster());
  QApplication::processEvents();
  const cluster::Report* rep = w.cluster()->report();
  ASSERT_NE(rep, nullptr) << w.lastError().toStdString();
  ASSERT_EQ(rep->ranks.size(), 1u);
  QTableWidget* steps = w.cluster()->stepTable();
  ASSERT_EQ(steps->rowCount(), 1);
  EXPECT_EQ(steps->item(0, 3)->text(), "8.874");
  EXPECT_EQ(steps->item(0, 4)->text(), "101.963");
  EXPECT_EQ(steps->item(0, 7)->text(), "25.744");
  const auto& rows = rep->ranks[0].collective_rows;
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front().group, -1);
  EXPECT_EQ(rows.front().seq, 1);
  ClusterTimeline* t = w.cluster()->timeline();
  ASSERT_TRUE(t->selectCollective({rows.back().group, rows.back().seq}));
  save(&w, "imported_06_cluster");
  QDir(dir).removeRecursively();
}

// The same views on a run the real CLI recorded (AMP O2 with an overflowing first scale, so the
// training view has skipped steps and overflow events), saved as real_*.png.
TEST(Screenshots, RealRecordedRun) {
  npuscope::testing::ensureApp();
  const std::string db = npuscope::testing::tempPath("real_run.db");
  for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(QString::fromStdString(db + suffix));
  // Steps 1 and 6 are dumped (tensor mode) in an O0 run and an O2 run of the same seed and data,
  // so the dumps and compare views show real tensors too (step 1 of the O2 run overflows).
  const std::string acl = npuscope::testing::tempPath("real_acl.json");
  {
    QFile f(QString::fromStdString(acl));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(R"({"dump": {"dump_mode": "all", "dump_list": [], "dump_step": "1|6", "dump_data": "tensor"}})");
  }
  for (const char* level : {"O0", "O2"}) {
    QStringList args{"train", "--dataset", "synthetic", "--model", "cnn", "--steps", "12", "--opt-level", level,
                     "--optimizer", "adam", "--lr", "1e-3", "--dump-config", QString::fromStdString(acl),
                     "--db", QString::fromStdString(db)};
    // Overflows: skipped steps, each naming its first overflowing op (float-status tracking).
    if (QString(level) == "O2") args << "--dynamic-init-scale" << "16777216" << "--overflow-check-by" << "float_status";
    ASSERT_NO_FATAL_FAILURE(runCli(args));
  }

  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, db));
  w.tabs()->setCurrentWidget(w.timeline());
  w.timeline()->view()->fitAll();
  save(&w, "real_01_timeline_run");
  w.timeline()->view()->fitStep(6);
  save(&w, "real_02_timeline_step");
  w.tabs()->setCurrentWidget(w.operators());
  w.operators()->table()->selectRow(0);
  save(&w, "real_03_operators");
  w.tabs()->setCurrentWidget(w.training());
  w.training()->showStep(1);  // a skipped step with its first overflowing op
  save(&w, "real_04_training");
  // The step's first overflowing op opens on the timeline with its own dumped tensors linked;
  // following one opens it in the Dumps tab.
  {
    const OverflowEventRow* first = nullptr;
    for (const OverflowEventRow& e : w.document()->overflowEvents()) {
      if (e.step == 1 && e.source == "first_op") first = &e;
    }
    ASSERT_NE(first, nullptr);
    ASSERT_GE(first->op_id, 0);
    std::vector<int64_t> own;
    for (const TensorDumpInfo& t : w.document()->dumps()) {
      if (t.op_id == first->op_id) own.push_back(t.id);
    }
    ASSERT_FALSE(own.empty()) << "step 1 was dumped, its first overflowing op #" << first->op_id << " too";
    emit w.training()->opActivated(first->op_id);
    ASSERT_EQ(w.tabs()->currentWidget(), w.timeline());
    const QString html = w.timeline()->details()->toHtml();
    EXPECT_TRUE(html.contains("Dumped tensors")) << html.toStdString();
    for (int64_t id : own) EXPECT_TRUE(html.contains(QString("dump:%1").arg(id))) << id;
    save(&w, "real_04b_first_op_tensors");
    emit w.timeline()->details()->anchorClicked(QUrl(QString("dump:%1").arg(own.back())));
    ASSERT_EQ(w.tabs()->currentWidget(), w.dumps());
    const QModelIndex cur = w.dumps()->table()->currentIndex();
    ASSERT_TRUE(cur.isValid());
    const TensorDumpInfo* shown = w.dumps()->model()->dumpAt(w.dumps()->proxy()->mapToSource(cur).row());
    ASSERT_NE(shown, nullptr);
    EXPECT_EQ(shown->id, own.back());
    save(&w, "real_04c_first_op_tensor_in_dumps");
  }
  w.tabs()->setCurrentWidget(w.dumps());
  ASSERT_GT(w.dumps()->model()->rowCount(), 10) << "the O2 run's step 6 was dumped";
  w.dumps()->table()->selectRow(3);
  save(&w, "real_05_dumps");
  w.selectRuns({2, 1});  // the O2 run against the O0 run
  w.tabs()->setCurrentWidget(w.compare());
  w.compare()->table()->selectRow(0);
  save(&w, "real_06_compare");
}


// The Memory tab of a real O2 run of the CLI: the peak by category (fp16 parameters, fp32
// masters, gradients, Adam's state, the step's activations), the largest tensors, each step's
// peak; activating a tensor opens its allocating op on the timeline.
TEST(Screenshots, MemoryTabOfARealO2Run) {
  npuscope::testing::ensureApp();
  const std::string db = npuscope::testing::tempPath("real_memory.db");
  for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(QString::fromStdString(db + suffix));
  ASSERT_NO_FATAL_FAILURE(runCli({"train", "--dataset", "synthetic", "--model", "cnn", "--steps", "8", "--opt-level",
                                  "O2", "--optimizer", "adam", "--lr", "1e-3", "--db", QString::fromStdString(db)}));
  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, db));
  w.tabs()->setCurrentWidget(w.memory());
  MemoryView* m = w.memory();
  ASSERT_EQ(m->devices().size(), 1u);
  QStringList categories;
  for (int r = 0; r < m->categories()->rowCount(); ++r) categories << m->categories()->item(r, 0)->text();
  for (const char* c : {"parameter", "master_weight", "gradient", "optimizer_state"}) {
    EXPECT_TRUE(categories.contains(c)) << c << " missing from " << categories.join(", ").toStdString();
  }
  EXPECT_GE(m->steps()->rowCount(), 8);  // each step's peak
  EXPECT_FALSE(m->components()->isVisibleTo(m)) << "a recorded run has no npu_module_mem components";
  EXPECT_TRUE(m->summary()->text().contains("peak")) << m->summary()->text().toStdString();
  save(&w, "real_07_memory");
  // The timeline's memory track stacks the same categories; a click lists the live tensors.
  w.tabs()->setCurrentWidget(w.timeline());
  QTest::qWait(50);  // the categories load after the first paint
  w.timeline()->view()->fitStep(4);
  const StepRow* step = w.document()->timeline()->stepByIndex(4);
  ASSERT_NE(step, nullptr);
  emit w.timeline()->view()->memoryClicked(step->start_ns + step->dur_ns / 2);
  const QString live = w.timeline()->details()->toPlainText();
  EXPECT_TRUE(live.contains("live blocks")) << live.toStdString();
  EXPECT_TRUE(live.contains("master_weight")) << live.toStdString();
  save(&w, "real_07b_memory_lane");
  w.tabs()->setCurrentWidget(w.memory());
  // The largest tensor allocated by an op opens that op on the timeline.
  int row = -1;
  for (int r = 0; r < m->tensors()->rowCount() && row < 0; ++r) {
    if (m->tensors()->item(r, 0)->data(Qt::UserRole).toLongLong() >= 0) row = r;
  }
  ASSERT_GE(row, 0);
  const qint64 op_id = m->tensors()->item(row, 0)->data(Qt::UserRole).toLongLong();
  emit m->tensors()->cellActivated(row, 0);
  EXPECT_EQ(w.tabs()->currentWidget(), w.timeline());
  EXPECT_TRUE(w.timeline()->details()->toHtml().contains(QString::number(op_id)))
      << "the details show op #" << op_id;
}

// A real 2-rank job of the CLI (`npuscope train --nproc 2`) in the cluster view: both ranks on one
// wall-clock axis, every collective of one rank found on the other by (group, seq), one picked.
TEST(Screenshots, ClusterOfARealTwoRankJob) {
  npuscope::testing::ensureApp();
  const QString dir = QDir::tempPath() + QString("/npuscope_gui_cluster_job_%1").arg(::getpid());
  QDir(dir).removeRecursively();
  QDir().mkpath(dir);
  ASSERT_NO_FATAL_FAILURE(runCli({"train", "--nproc", "2", "--model", "mlp", "--steps", "6", "--batch-size", "64",
                                  "--db", dir + "/job.db"}));
  MainWindow w;
  w.setSynchronous(true);
  w.resize(1600, 950);
  w.show();
  ASSERT_TRUE(w.openCluster({dir})) << w.lastError().toStdString();
  const cluster::Report* rep = w.cluster()->report();
  ASSERT_NE(rep, nullptr);
  ASSERT_EQ(rep->ranks.size(), 2u);
  ClusterTimeline* t = w.cluster()->timeline();
  const auto& rows0 = rep->ranks[0].collective_rows;
  ASSERT_GE(rows0.size(), 6u);  // at least one gradient all-reduce a step
  for (const CollectiveRow& c : rows0) {
    ASSERT_TRUE(t->selectCollective({c.group, c.seq}));
    EXPECT_EQ(t->selectedRows().size(), 2u) << c.kind << " #" << c.seq << " on both ranks";
  }
  save(&w, "cluster_01_job");
  // Step 3 on both ranks, its last all-reduce picked.
  ASSERT_TRUE(t->fitStep(3));
  const CollectiveRow* pick = nullptr;
  for (const CollectiveRow& c : rows0) {
    if (c.step == 3) pick = &c;
  }
  ASSERT_NE(pick, nullptr);
  ASSERT_TRUE(t->selectCollective({pick->group, pick->seq}));
  EXPECT_EQ(w.cluster()->collectiveTable()->rowCount(), 2);
  save(&w, "cluster_02_step_collective");
  w.cluster()->tables()->setCurrentWidget(w.cluster()->communicationTable());
  EXPECT_EQ(w.cluster()->communicationTable()->rowCount(), 2);  // one all-reduce row per rank
  save(&w, "cluster_03_communication");
  QDir(dir).removeRecursively();
}

// A torch_npu folder without the timeline (the real Qwen3 910B export: kernels, step, memory and
// collectives, no host ops), imported by the CLI and opened: the timeline shows the device
// tasks alone, the step band over them.
TEST(Screenshots, CsvOnlyTorchNpuExportOfAnLlm) {
  npuscope::testing::ensureApp();
  const QString db = QDir::tempPath() + QString("/npuscope_gui_qwen3_%1.db").arg(::getpid());
  QFile::remove(db);
  ASSERT_NO_FATAL_FAILURE(runCli({"import", QString(NPUSCOPE_TRACES) + "/ascend_qwen3_rank0_ascend_pt", "--db", db}));
  MainWindow w;
  ASSERT_NO_FATAL_FAILURE(showFile(w, db.toStdString()));
  save(&w, "torch_npu_csv_only_qwen3");
  // Its Memory tab: the op allocations of operator_memory.csv (untagged: the file has no
  // categories) and what each component reserved (npu_module_mem.csv): APP 10372 MB, HCCL
  // 1241.7 MB, SLOG 158.65 MB, RUNTIME 58.25 MB.
  w.tabs()->setCurrentWidget(w.memory());
  MemoryView* m = w.memory();
  ASSERT_EQ(m->devices().size(), 1u);
  ASSERT_TRUE(m->components()->isVisibleTo(m));
  ASSERT_EQ(m->components()->rowCount(), 4);
  QStringList names;
  for (int r = 0; r < 4; ++r) names << m->components()->item(r, 0)->text();
  EXPECT_EQ(names.join(","), "APP,HCCL,SLOG,RUNTIME");
  EXPECT_EQ(m->components()->item(0, 2)->text(), "10.13 GiB");
  EXPECT_EQ(m->components()->item(1, 2)->text(), "1.21 GiB");
  save(&w, "torch_npu_qwen3_memory");
  QFile::remove(db);
}

}  // namespace
}  // namespace npuscope::gui
