// The workbench's widgets and models, headless (QT_QPA_PLATFORM=offscreen), on realistic traces
// written through core's TraceWriter: item models under QAbstractItemModelTester, timeline zoom
// arithmetic and hit testing, range summary == reader aggregate, bad files -> error signal,
// live refresh, search, training/dumps interaction, the Record dialog's child process.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QFile>
#include <QMouseEvent>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTest>
#include <QTextBrowser>
#include <QtCharts/QScatterSeries>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "gui_test_support.h"
#include "npuscope/store/database.h"
#include "npuscope/gui/compare_view.h"
#include "npuscope/gui/dumps_view.h"
#include "npuscope/gui/main_window.h"
#include "npuscope/gui/models.h"
#include "npuscope/gui/operators_view.h"
#include "npuscope/gui/record_dialog.h"
#include "npuscope/gui/timeline_panel.h"
#include "npuscope/gui/timeline_view.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/training_view.h"

namespace npuscope::gui {
namespace {

using npuscope::testing::ensureApp;
using npuscope::testing::twoRunFixture;

class GuiTest : public ::testing::Test {
 protected:
  void SetUp() override { ensureApp(); }
};

std::unique_ptr<TraceDocument> openRun(int64_t run_id) {
  auto doc = std::make_unique<TraceDocument>();
  EXPECT_TRUE(doc->open(QString::fromStdString(twoRunFixture().path)));
  EXPECT_TRUE(doc->loadRun(run_id, true));
  return doc;
}

void sendMouse(QWidget* w, QEvent::Type type, QPoint pos, Qt::MouseButton button,
               Qt::KeyboardModifiers mods = Qt::NoModifier) {
  QMouseEvent e(type, pos, w->mapToGlobal(pos), button,
                type == QEvent::MouseButtonRelease ? Qt::NoButton : Qt::MouseButtons(button), mods);
  QApplication::sendEvent(w, &e);
}

// ---- item models ----------------------------------------------------------------------------

TEST_F(GuiTest, EveryItemModelPassesTheModelTester) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  RunListModel runs;
  QAbstractItemModelTester t1(&runs, QAbstractItemModelTester::FailureReportingMode::Fatal);
  runs.setRuns(doc->runs());
  EXPECT_EQ(runs.rowCount(), 2);
  EXPECT_EQ(runs.data(runs.index(0, RunListModel::kOptLevel), Qt::DisplayRole).toString(), "O2");

  OpTableModel ops;
  QAbstractItemModelTester t2(&ops, QAbstractItemModelTester::FailureReportingMode::Fatal);
  OpAggregateQuery q;
  q.run_id = twoRunFixture().o1.run_id;
  q.group_by = OpGroupBy::kNameAndShapes;
  auto table = doc->reader()->opAggregates(q);
  ASSERT_TRUE(table.isOk());
  ops.setTable(table.value(), true);
  EXPECT_GT(ops.rowCount(), 10);
  TableProxy proxy;
  QAbstractItemModelTester t3(&proxy, QAbstractItemModelTester::FailureReportingMode::Fatal);
  proxy.setSourceModel(&ops);
  proxy.sort(OpTableModel::kSelf, Qt::DescendingOrder);
  // Numbers sort as numbers: self time never increases down the sorted table.
  for (int r = 1; r < proxy.rowCount(); ++r) {
    EXPECT_GE(proxy.data(proxy.index(r - 1, OpTableModel::kSelf), kSortRole).toLongLong(),
              proxy.data(proxy.index(r, OpTableModel::kSelf), kSortRole).toLongLong());
  }
  proxy.setFilter("addmm", {OpTableModel::kName});
  ASSERT_GT(proxy.rowCount(), 0);
  for (int r = 0; r < proxy.rowCount(); ++r) {
    EXPECT_TRUE(proxy.data(proxy.index(r, OpTableModel::kName)).toString().contains("addmm", Qt::CaseInsensitive));
  }

  StepTableModel steps;
  QAbstractItemModelTester t4(&steps, QAbstractItemModelTester::FailureReportingMode::Fatal);
  steps.setSteps(doc->timeline()->steps());
  EXPECT_EQ(steps.rowCount(), 24);
  EXPECT_EQ(steps.data(steps.index(3, StepTableModel::kOverflow), Qt::DisplayRole).toString(), "overflow");

  OverflowModel ov;
  QAbstractItemModelTester t5(&ov, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ov.setEvents(doc->overflowEvents());
  EXPECT_EQ(ov.rowCount(), 6);  // two overflow steps: float_status, nonfinite_grad and first_op each

  DumpTableModel dumps;
  QAbstractItemModelTester t6(&dumps, QAbstractItemModelTester::FailureReportingMode::Fatal);
  dumps.setDumps(doc->dumps());
  EXPECT_EQ(dumps.rowCount(), 12);
  int red = 0;
  for (int r = 0; r < dumps.rowCount(); ++r) red += dumps.data(dumps.index(r, 0), Qt::BackgroundRole).isValid();
  EXPECT_EQ(red, 1);  // the addmm output of overflow step 3
}

// ---- timeline arithmetic and hit testing ----------------------------------------------------

TEST_F(GuiTest, ZoomKeepsTheTimeUnderTheAnchorAndRoundTrips) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  TimelineView v;
  v.resize(1200, 700);
  v.setData(doc->timeline());
  const TimelineData* d = doc->timeline();
  // fitAll: the run with a 2 % margin each side fills the plot.
  EXPECT_NEAR(v.xAt(d->beginNs()), v.plotLeft() + v.plotWidth() * (1.0 / 52), 2.0);
  EXPECT_NEAR(v.xAt(d->endNs()), v.plotLeft() + v.plotWidth() * (51.0 / 52), 2.0);
  const double npp = v.nsPerPixel();
  const int64_t begin = v.viewBegin();
  for (double x : {v.plotLeft() + 10.0, 600.0, 1150.0}) {
    const int64_t before = v.timeAt(x);
    v.zoomAt(0.5, x);
    EXPECT_NEAR(v.nsPerPixel(), npp * 0.5, npp * 1e-9);
    EXPECT_LE(std::llabs(v.timeAt(x) - before), static_cast<int64_t>(npp));
    v.zoomAt(2.0, x);
    EXPECT_NEAR(v.nsPerPixel(), npp, npp * 1e-9);
    EXPECT_LE(std::llabs(v.viewBegin() - begin), static_cast<int64_t>(npp) + 1);
  }
  // xAt and timeAt invert each other.
  v.zoomAt(0.01, 700);
  for (int64_t t : {v.viewBegin(), v.viewBegin() + 123456, v.viewEnd() - 1}) {
    EXPECT_LE(std::llabs(v.timeAt(v.xAt(t)) - t), 1);
  }
  // Pan by pixels moves the view by pixels x scale; A/D keys pan 15 % of the width.
  const int64_t b0 = v.viewBegin();
  v.panPixels(100);
  EXPECT_NEAR(static_cast<double>(v.viewBegin() - b0), 100 * v.nsPerPixel(), 1.0);
  const int64_t b1 = v.viewBegin();
  QTest::keyClick(&v, Qt::Key_D);
  EXPECT_NEAR(static_cast<double>(v.viewBegin() - b1), 0.15 * v.plotWidth() * v.nsPerPixel(), 2.0);
  QTest::keyClick(&v, Qt::Key_W);
  EXPECT_LT(v.nsPerPixel(), npp * 0.01);
  // Zoom is clamped: far out shows at most 1.5 runs, far in never below 0.02 ns/px.
  v.zoomAt(1e9, 700);
  EXPECT_LE(v.nsPerPixel() * v.plotWidth(), 1.5 * static_cast<double>(d->endNs() - d->beginNs()) + 1);
  v.zoomAt(1e-12, 700);
  EXPECT_GE(v.nsPerPixel(), 0.02);
  // fitStep frames exactly that step.
  ASSERT_TRUE(v.fitStep(5));
  const StepRow* s = d->stepByIndex(5);
  EXPECT_NEAR(v.xAt(s->start_ns), v.plotLeft() + v.plotWidth() / 52.0, 2.0);
  EXPECT_NEAR(v.xAt(s->start_ns + s->dur_ns), v.plotLeft() + v.plotWidth() * 51.0 / 52, 2.0);
  EXPECT_FALSE(v.fitStep(999));
}

TEST_F(GuiTest, HitTestingFindsTheSliceUnderThePointer) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  TimelineView v;
  v.resize(1400, 900);
  v.setData(doc->timeline());
  const TimelineData* d = doc->timeline();
  v.fitStep(6);
  // Every op of step 6 that is at least 3 px wide is found at its centre, and only there.
  int checked = 0;
  for (size_t li = 0; li < d->lanes().size(); ++li) {
    const Lane& lane = d->lanes()[li];
    for (uint32_t i = 0; i < lane.slices.size(); ++i) {
      const Slice& s = lane.slices[i];
      if (s.step != 6 || s.dur_ns / v.nsPerPixel() < 3) continue;
      const SliceRef ref{static_cast<int>(li), i};
      const QRectF r = v.sliceRect(ref);
      if (r.bottom() > v.height()) continue;
      EXPECT_EQ(v.sliceAt(r.center().toPoint()), ref) << d->str(s.name);
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
  EXPECT_FALSE(v.sliceAt(QPoint(20, 100)).valid());                       // gutter
  EXPECT_FALSE(v.sliceAt(QPoint(700, 5)).valid());                        // ruler
  EXPECT_EQ(v.stepAt(QPoint(v.plotLeft() + v.plotWidth() / 2, TimelineView::kRuler + 5)), 6);
  // A click selects and reports the slice; the details name it.
  TimelinePanel panel(doc.get());
  panel.resize(1400, 900);
  panel.view()->setData(doc->timeline());
  panel.view()->fitStep(6);
  const auto hits = d->search("aten::addmm");
  SliceRef addmm;
  for (SliceRef h : hits) {
    if (d->slice(h).step == 6) {
      addmm = h;
      break;
    }
  }
  ASSERT_TRUE(addmm.valid());
  QSignalSpy selected(panel.view(), &TimelineView::sliceSelected);
  const QPoint c = panel.view()->sliceRect(addmm).center().toPoint();
  sendMouse(panel.view(), QEvent::MouseButtonPress, c, Qt::LeftButton);
  sendMouse(panel.view(), QEvent::MouseButtonRelease, c, Qt::LeftButton);
  ASSERT_EQ(selected.count(), 1);
  EXPECT_EQ(panel.view()->selectedSlice(), addmm);
  const QString html = panel.details()->toHtml();
  EXPECT_TRUE(html.contains("aten::addmm"));
  EXPECT_TRUE(html.contains("c10::Half"));
  EXPECT_TRUE(html.contains("Kernel (predicted)"));
  EXPECT_TRUE(html.contains("AddmmBackward0"));  // the backward partner link
  // Following the partner link selects the backward op on the autograd thread.
  const SliceRef partner = d->partner(addmm);
  ASSERT_TRUE(partner.valid());
  emit panel.details()->anchorClicked(QUrl(QString("op:%1").arg(d->slice(partner).id)));
  EXPECT_EQ(panel.view()->selectedSlice(), partner);
  EXPECT_TRUE(d->slice(partner).is_backward);
}

TEST_F(GuiTest, SubPixelSlicesAreMergedSoAFullRunDrawsFewRectangles) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  TimelineView v;
  v.resize(1000, 700);
  v.setData(doc->timeline());
  QImage img(v.size(), QImage::Format_ARGB32);
  v.render(&img);
  const int64_t full = v.lastPaintRects();
  EXPECT_GT(full, 50);
  int64_t slices = 0;  // host ops and their predicted copies
  for (const Lane& lane : doc->timeline()->lanes()) slices += static_cast<int64_t>(lane.slices.size());
  EXPECT_LT(full, slices / 2);
  int rows = 0;
  for (const Lane& lane : doc->timeline()->lanes()) rows += lane.depthCount();
  EXPECT_LE(full, static_cast<int64_t>(rows) * v.plotWidth() + 100);
  // Zoomed into one step, every visible op is its own rectangle.
  v.fitStep(4);
  v.render(&img);
  EXPECT_GT(v.lastPaintRects(), 80);
}

// ---- range selection ------------------------------------------------------------------------

TEST_F(GuiTest, DragSelectedRangeSummaryEqualsTheReadersAggregate) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  TimelinePanel panel(doc.get());
  panel.resize(1400, 900);
  panel.show();
  panel.view()->setData(doc->timeline());
  panel.view()->fitStep(10);
  TimelineView* v = panel.view();
  QSignalSpy spy(v, &TimelineView::rangeSelected);
  // Shift+drag across the middle of the lanes.
  const int y = TimelineView::kRuler + TimelineView::kStepBand + 30;
  const QPoint a(v->plotLeft() + 200, y), b(v->plotLeft() + 700, y);
  sendMouse(v, QEvent::MouseButtonPress, a, Qt::LeftButton, Qt::ShiftModifier);
  sendMouse(v, QEvent::MouseMove, QPoint(a.x() + 50, y), Qt::LeftButton, Qt::ShiftModifier);
  sendMouse(v, QEvent::MouseMove, b, Qt::LeftButton, Qt::ShiftModifier);
  sendMouse(v, QEvent::MouseButtonRelease, b, Qt::LeftButton, Qt::ShiftModifier);
  ASSERT_EQ(spy.count(), 1);
  const int64_t begin = spy.at(0).at(0).toLongLong(), end = spy.at(0).at(1).toLongLong();
  EXPECT_EQ(begin, v->timeAt(a.x()));
  EXPECT_EQ(end, v->timeAt(b.x()));
  OpAggregateQuery q;
  q.run_id = twoRunFixture().o1.run_id;
  q.window = {begin, end};
  auto ref = doc->reader()->opAggregates(q);
  ASSERT_TRUE(ref.isOk());
  const OpAggregateTable& got = panel.rangeModel()->table();
  ASSERT_GT(ref->op_count, 10);
  EXPECT_EQ(got.op_count, ref->op_count);
  EXPECT_EQ(got.self_sum_ns, ref->self_sum_ns);
  EXPECT_EQ(got.total_device_ns, ref->total_device_ns);
  ASSERT_EQ(got.rows.size(), ref->rows.size());
  for (size_t i = 0; i < got.rows.size(); ++i) {
    EXPECT_EQ(got.rows[i].name, ref->rows[i].name);
    EXPECT_EQ(got.rows[i].calls, ref->rows[i].calls);
    EXPECT_EQ(got.rows[i].self_ns, ref->rows[i].self_ns);
    EXPECT_EQ(got.rows[i].total_ns, ref->rows[i].total_ns);
    EXPECT_EQ(got.rows[i].device_ns, ref->rows[i].device_ns);
  }
  // A plain drag pans instead and selects nothing new.
  const int64_t vb = v->viewBegin();
  sendMouse(v, QEvent::MouseButtonPress, b, Qt::LeftButton);
  sendMouse(v, QEvent::MouseMove, QPoint(b.x() - 100, y), Qt::LeftButton);
  sendMouse(v, QEvent::MouseButtonRelease, QPoint(b.x() - 100, y), Qt::LeftButton);
  EXPECT_EQ(spy.count(), 1);
  EXPECT_NEAR(static_cast<double>(v->viewBegin() - vb), 100 * v->nsPerPixel(), 2.0);
}

// ---- search ---------------------------------------------------------------------------------

TEST_F(GuiTest, SearchMovesThroughMatchesInTimeAndWraps) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  TimelinePanel panel(doc.get());
  panel.resize(1200, 800);
  panel.view()->setData(doc->timeline());
  EXPECT_EQ(panel.search("threshold_backward"), 24 * 3);  // three relus per step
  panel.view()->fitAll();
  panel.nextMatch();
  EXPECT_EQ(panel.matchIndex(), 0);
  const SliceRef first = panel.view()->selectedSlice();
  panel.nextMatch();
  EXPECT_GT(doc->timeline()->slice(panel.view()->selectedSlice()).start_ns, doc->timeline()->slice(first).start_ns);
  panel.previousMatch();
  panel.previousMatch();
  EXPECT_EQ(panel.matchIndex(), 24 * 3 - 1);  // wrapped to the last
  EXPECT_EQ(panel.search("zzz-nothing"), 0);
  panel.nextMatch();  // no crash without matches
}

// ---- bad files ------------------------------------------------------------------------------

TEST_F(GuiTest, BadFilesEmitTheErrorSignalAndNeverCrash) {
  const std::string text = npuscope::testing::tempPath("text");
  { std::ofstream(text) << "this is not a database\n"; }
  const std::string newer = npuscope::testing::tempPath("newer");
  {
    auto w = TraceWriter::open(newer);
    ASSERT_TRUE(w.isOk());
  }
  {
    auto db = openTraceDatabase(newer, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db.value().get(), "PRAGMA user_version = 99").isOk());
  }
  const std::string truncated = npuscope::testing::tempPath("truncated");
  std::filesystem::copy_file(twoRunFixture().path, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) / 2);
  const std::string garbage = npuscope::testing::tempPath("garbage");
  {
    std::filesystem::copy_file(twoRunFixture().path, garbage);
    std::fstream f(garbage, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    const std::string junk(8192, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  struct Case {
    std::string path, expect;
  };
  const std::vector<Case> cases = {{text, "not an npuscope trace file"},
                                   {newer, "newer npuscope"},
                                   {truncated, "truncated"},
                                   {"/nonexistent/dir/trace.db", ""},
                                   {garbage, ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    TraceDocument doc;
    QSignalSpy errors(&doc, &TraceDocument::errorOccurred);
    bool ok = doc.open(QString::fromStdString(c.path));
    if (ok && !doc.runs().empty()) ok = doc.loadRun(doc.runs().front().id, true);
    EXPECT_FALSE(ok);
    ASSERT_GE(errors.count(), 1);
    const QString msg = errors.at(0).at(0).toString();
    EXPECT_FALSE(msg.isEmpty());
    if (!c.expect.empty()) {
      EXPECT_TRUE(msg.contains(QString::fromStdString(c.expect))) << msg.toStdString();
    }
    // The main window shows it in its message bar and keeps working.
    MainWindow w;
    w.setSynchronous(true);
    if (!w.openFile(QString::fromStdString(c.path), true)) {
      EXPECT_FALSE(w.lastError().isEmpty());
    }
  }
  // A good file still opens after a bad one in the same window.
  MainWindow w;
  w.setSynchronous(true);
  EXPECT_FALSE(w.openFile(QString::fromStdString(text), true));
  EXPECT_TRUE(w.openFile(QString::fromStdString(twoRunFixture().path), true));
  EXPECT_GE(w.document()->currentRun(), 1);
  for (const auto& p : {text, newer, truncated, garbage}) std::filesystem::remove(p);
}

// ---- live refresh ---------------------------------------------------------------------------

TEST_F(GuiTest, AFileStillBeingWrittenRefreshesLive) {
  const std::string path = npuscope::testing::tempPath("live");
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w.isOk());
  npuscope::testing::SyntheticRunOptions o;
  o.steps = 3;
  o.end_run = false;
  o.dumps = false;
  auto first = npuscope::testing::writeSyntheticRun(*w.value(), o);
  ASSERT_TRUE(first.isOk());
  TraceDocument doc;
  doc.setSynchronousRefresh(true);
  ASSERT_TRUE(doc.open(QString::fromStdString(path)));
  ASSERT_EQ(doc.runs().size(), 1u);
  EXPECT_EQ(doc.runs().front().status, "running");
  ASSERT_TRUE(doc.loadRun(doc.runs().front().id, true));
  const int64_t before = doc.timeline()->opCount();
  EXPECT_EQ(before, first->ops);
  EXPECT_FALSE(doc.poll());  // nothing changed yet
  // More ops and a step of the same run arrive.
  auto buf = w.value()->takeBuffer();
  for (int i = 0; i < 50; ++i) {
    OpRecord r;
    r.id = 1'000'000 + i;
    r.start_ns = first->end_ns + 1000 + i * 10'000;
    r.dur_ns = 5'000;
    r.thread_id = 1;
    r.step = 3;
    r.name_id = StringTable::global().intern("aten::live_op");
    buf->records[buf->size++] = r;
  }
  w.value()->submit(buf);
  StepRecord s;
  s.step = 3;
  s.start_ns = first->end_ns;
  s.dur_ns = 600'000;
  s.loss = 0.5;
  w.value()->addStep(s);
  ASSERT_TRUE(w.value()->flush().isOk());
  QTest::qWait(20);  // file times have coarse resolution on some file systems
  QSignalSpy loaded(&doc, &TraceDocument::runLoaded);
  EXPECT_TRUE(doc.poll());
  ASSERT_EQ(loaded.count(), 1);
  EXPECT_TRUE(loaded.at(0).at(1).toBool());  // refreshed in place
  EXPECT_EQ(doc.timeline()->opCount(), before + 50);
  EXPECT_EQ(doc.timeline()->steps().size(), 4u);
  ASSERT_TRUE(w.value()->endRun("completed").isOk());
  w.value().reset();
  EXPECT_TRUE(doc.poll());
  EXPECT_EQ(doc.runs().front().status, "completed");
  std::filesystem::remove(path);
}

// ---- operators, training, dumps -------------------------------------------------------------

TEST_F(GuiTest, OperatorsTableGroupsFiltersAndHighlightsOnTheTimeline) {
  MainWindow w;
  w.setSynchronous(true);
  ASSERT_TRUE(w.openFile(QString::fromStdString(twoRunFixture().path), true));
  w.selectRuns({twoRunFixture().o1.run_id});
  ASSERT_EQ(w.document()->currentRun(), twoRunFixture().o1.run_id);
  OperatorsView* ops = w.operators();
  QAbstractItemModelTester tester(ops->proxy(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  const int by_name = ops->model()->rowCount();
  ops->setGroupByShapes(true);
  EXPECT_GT(ops->model()->rowCount(), by_name);
  EXPECT_TRUE(ops->model()->withShapes());
  ops->setGroupByShapes(false);
  EXPECT_EQ(ops->model()->rowCount(), by_name);
  ops->setFilterText("aten::relu");
  ASSERT_EQ(ops->proxy()->rowCount(), 1);
  QSignalSpy sel(ops, &OperatorsView::opSelected);
  ops->table()->setCurrentIndex(ops->proxy()->index(0, 0));
  ASSERT_EQ(sel.count(), 1);
  EXPECT_EQ(sel.at(0).at(0).toString(), "aten::relu");
  // The timeline now draws relus in the highlight colour.
  TimelineView* v = w.timeline()->view();
  v->resize(1200, 700);
  v->fitStep(2);
  QImage img(v->size(), QImage::Format_ARGB32);
  v->render(&img);
  int orange = 0;
  for (int y = 0; y < img.height(); ++y) {
    for (int x = v->plotLeft(); x < img.width(); ++x) orange += img.pixel(x, y) == qRgb(0xf0, 0x8c, 0x00);
  }
  EXPECT_GT(orange, 100);
}

TEST_F(GuiTest, TrainingMarkersOpenTheStepWithItsOverflowsAndDumps) {
  MainWindow w;
  w.setSynchronous(true);
  ASSERT_TRUE(w.openFile(QString::fromStdString(twoRunFixture().path), true));
  w.selectRuns({twoRunFixture().o1.run_id});
  TrainingView* t = w.training();
  ASSERT_EQ(t->overflowSeries()->count(), 2);
  QSignalSpy activated(t, &TrainingView::stepActivated);
  emit t->overflowSeries()->clicked(t->overflowSeries()->at(0));
  ASSERT_EQ(activated.count(), 1);
  EXPECT_EQ(activated.at(0).at(0).toLongLong(), 3);
  EXPECT_EQ(t->shownStep(), 3);
  EXPECT_EQ(t->overflowModel()->rowCount(), 3);
  EXPECT_EQ(t->dumpModel()->rowCount(), 6);
  // The main window switched to the timeline framing step 3 with its summary.
  EXPECT_EQ(w.tabs()->currentWidget(), static_cast<QWidget*>(w.timeline()));
  const StepRow* s = w.document()->timeline()->stepByIndex(3);
  EXPECT_EQ(w.timeline()->view()->range().begin_ns, s->start_ns);
  EXPECT_GT(w.timeline()->rangeModel()->rowCount(), 5);
}

// The step's first overflowing op (source first_op): named with its id and numbers in the events
// table and the step label; activating it selects exactly that op in the timeline.
TEST_F(GuiTest, FirstOverflowingOpOpensInTheTimeline) {
  MainWindow w;
  w.setSynchronous(true);
  ASSERT_TRUE(w.openFile(QString::fromStdString(twoRunFixture().path), true));
  w.selectRuns({twoRunFixture().o1.run_id});
  TrainingView* t = w.training();
  t->showStep(8);
  const OverflowModel* m = t->overflowModel();
  int row = -1;
  for (int r = 0; r < m->rowCount(); ++r) {
    if (m->eventAt(r)->source == "first_op") row = r;
  }
  ASSERT_GE(row, 0);
  const int64_t id = m->eventAt(row)->op_id;
  ASSERT_GT(id, 0);
  EXPECT_EQ(m->index(row, OverflowModel::kOp).data().toString(), QString("aten::mul #%1").arg(id));
  EXPECT_EQ(m->index(row, OverflowModel::kDetail).data().toString(),
            "backward: float16 result of 640, 12 overflowed, 0 NaN (max finite |x| 1.31e+05 before rounding); "
            "inputs finite, max |x| 2.5");
  // The run's overflow cost: its skipped steps' time, worked out here from the steps.
  int64_t total = 0, lost = 0;
  for (const StepRow& s : w.document()->timeline()->steps()) total += s.dur_ns, lost += s.skipped ? s.dur_ns : 0;
  EXPECT_TRUE(t->overflowCostText().contains(QString("2 of 24 steps skipped"))) << t->overflowCostText().toStdString();
  EXPECT_TRUE(t->overflowCostText().contains(
      QString("(%1 %)").arg(100.0 * static_cast<double>(lost) / static_cast<double>(total), 0, 'f', 1)))
      << t->overflowCostText().toStdString();
  QSignalSpy opened(t, &TrainingView::opActivated);
  QTableView* table = nullptr;
  for (QTableView* v : t->findChildren<QTableView*>()) {
    if (v->model() == m) table = v;
  }
  ASSERT_NE(table, nullptr);
  emit table->activated(m->index(row, 0));  // a double-click or Enter on the row
  ASSERT_EQ(opened.count(), 1);
  EXPECT_EQ(opened.at(0).at(0).toLongLong(), id);
  EXPECT_EQ(w.tabs()->currentWidget(), static_cast<QWidget*>(w.timeline()));
  const TimelineData* d = w.document()->timeline();
  const SliceRef sel = w.timeline()->view()->selectedSlice();
  ASSERT_TRUE(sel.valid());
  EXPECT_EQ(d->slice(sel).id, id);
  EXPECT_EQ(d->str(d->slice(sel).name), "aten::mul");
  EXPECT_EQ(d->slice(sel).step, 8);
}

TEST_F(GuiTest, DumpHistogramDecodesThePayloadAndCountsNonFinite) {
  auto doc = openRun(twoRunFixture().o1.run_id);
  DumpsView v(doc.get());
  v.refresh();
  QAbstractItemModelTester tester(v.proxy(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(v.proxy()->rowCount(), 12);
  v.setOnlyNonFinite(true);
  ASSERT_EQ(v.proxy()->rowCount(), 1);
  const int row = v.proxy()->mapToSource(v.proxy()->index(0, 0)).row();
  v.showDump(row);
  const TensorDumpInfo* d = v.model()->dumpAt(row);
  EXPECT_EQ(v.histogram()->nanCount(), *d->nan_count);
  EXPECT_EQ(v.histogram()->infCount(), *d->inf_count);
  int64_t finite = 0;
  for (int64_t b : v.histogram()->bins()) finite += b;
  EXPECT_EQ(finite + *d->nan_count + *d->inf_count, 640);
  v.setOnlyNonFinite(false);
  EXPECT_EQ(v.proxy()->rowCount(), 12);
}

TEST(DumpDecoding, Float16AndFloat32RoundTrip) {
  TensorDumpData half;
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f}) {
    const uint16_t h = npuscope::testing::detail::floatToHalf(f);
    half.bytes.push_back(static_cast<uint8_t>(h & 0xff));
    half.bytes.push_back(static_cast<uint8_t>(h >> 8));
  }
  auto v = decodeDumpValues(half, "float16");
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(v.value(), (std::vector<double>{0.0, 1.0, -2.5, 65504.0}));
  EXPECT_FALSE(decodeDumpValues(half, "complex32").isOk());
  TensorDumpData bogus;
  bogus.bytes = {0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3};
  bogus.zstd_frame = true;
  EXPECT_FALSE(decodeDumpValues(bogus, "float32").isOk());
}

// ---- record dialog --------------------------------------------------------------------------

TEST_F(GuiTest, RecordDialogRunsTheCliAndReportsFailures) {
  RecordDialog dlg;
  dlg.setOutputPath("/tmp/x.db");
  dlg.setExtraArguments("--opt-level O1");
  const QStringList args = dlg.arguments();
  EXPECT_EQ(args.front(), "train");
  EXPECT_TRUE(args.contains("--db"));
  EXPECT_EQ(args.at(args.indexOf("--db") + 1), "/tmp/x.db");
  EXPECT_EQ(args.back(), "O1");

  // A CLI that cannot start.
  {
    QSignalSpy failed(&dlg, &RecordDialog::failed);
    dlg.setProgram("/nonexistent/npuscope");
    dlg.start();
    ASSERT_TRUE(failed.count() > 0 || failed.wait(5000));
    EXPECT_TRUE(failed.at(0).at(0).toString().contains("could not start"));
  }
  // A CLI that fails.
  const std::string dir = std::filesystem::temp_directory_path() / ("npuscope_gui_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string bad = dir + "/bad.sh";
  { std::ofstream(bad) << "#!/bin/sh\necho 'npuscope: error: no such model' >&2\nexit 3\n"; }
  std::filesystem::permissions(bad, std::filesystem::perms::owner_all);
  {
    QSignalSpy failed(&dlg, &RecordDialog::failed);
    dlg.setProgram(QString::fromStdString(bad));
    dlg.start();
    ASSERT_TRUE(failed.wait(5000));
    EXPECT_TRUE(failed.at(0).at(0).toString().contains("exit code 3"));
    EXPECT_TRUE(failed.at(0).at(0).toString().contains("no such model"));
  }
  // A CLI that prints progress and writes the trace: the file is announced, then finished.
  const std::string good = dir + "/good.sh";
  const std::string out = dir + "/out.db";
  {
    std::ofstream(good) << "#!/bin/sh\nfor a; do last=$a; done\n"
                        << "echo 'step 1/4 loss 2.0' >&2\ncp '" << twoRunFixture().path << "' '" << out << "'\n"
                        << "sleep 0.5\necho 'step 4/4 loss 1.0' >&2\nexit 0\n";
  }
  std::filesystem::permissions(good, std::filesystem::perms::owner_all);
  {
    QSignalSpy ready(&dlg, &RecordDialog::outputFileReady);
    QSignalSpy finished(&dlg, &RecordDialog::finished);
    dlg.setProgram(QString::fromStdString(good));
    dlg.setOutputPath(QString::fromStdString(out));
    dlg.setExtraArguments("");
    dlg.start();
    ASSERT_TRUE(finished.wait(10000));
    EXPECT_EQ(ready.count(), 1);
    EXPECT_EQ(finished.at(0).at(0).toString(), QString::fromStdString(out));
    EXPECT_TRUE(dlg.log().contains("step 4/4"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace npuscope::gui

namespace npuscope::gui {
namespace {

TEST_F(GuiTest, CompareShowsVerdictsWithTheFirstDivergentOpOnTop) {
  MainWindow w;
  w.setSynchronous(true);
  ASSERT_TRUE(w.openFile(QString::fromStdString(twoRunFixture().path), true));
  w.selectRuns({twoRunFixture().o1.run_id, twoRunFixture().o2.run_id});
  CompareModel* m = w.compare()->model();
  QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_GT(m->rowCount(), 0);
  const auto& res = m->result();
  EXPECT_EQ(res.pass + res.warning + res.error + res.not_compared, res.rows.size());
  if (!res.first_divergent_op.empty()) {
    EXPECT_EQ(m->rowAt(0)->op_name, res.first_divergent_op);
    EXPECT_EQ(m->rowAt(0)->step, res.first_divergent_step);
  }
  // Rows are tinted by verdict.
  EXPECT_TRUE(m->data(m->index(0, CompareModel::kVerdict), Qt::BackgroundRole).isValid());
}

}  // namespace
}  // namespace npuscope::gui
