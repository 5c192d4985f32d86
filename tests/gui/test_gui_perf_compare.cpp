// The performance compare view, headless: two hand-written runs whose per-name calls, totals and
// maxima the test adds up itself (not through comparePerf) against the models' rows, the only-A /
// only-B marking and tints, the default largest-|diff| order, numeric sorting, the name filter
// and the step pairs; the synthetic O1/O2 fixture (modeled device time); the real Kineto and
// torch_npu samples, imported; an error shown as a message. Screenshots: perf_compare_*.png.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDir>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTreeWidget>
#include <QTest>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "gui_test_support.h"
#include "npuscope/store/database.h"
#include "npuscope/gui/models.h"
#include "npuscope/gui/compare_view.h"
#include "npuscope/gui/main_window.h"
#include "npuscope/gui/perf_compare_view.h"
#include "npuscope/gui/units.h"
#include "npuscope/import/import.h"

#ifndef NPUSCOPE_SCREENSHOT_DIR
#define NPUSCOPE_SCREENSHOT_DIR "screenshots"
#endif
#ifndef NPUSCOPE_TRACES
#define NPUSCOPE_TRACES "tests/data/traces"
#endif
#ifndef NPUSCOPE_MSPROBE
#define NPUSCOPE_MSPROBE "tests/data/msprobe"
#endif

namespace npuscope::gui {
namespace {

using npuscope::testing::ensureApp;
using npuscope::testing::tempPath;
using npuscope::testing::twoRunFixture;

// ---- a hand-written pair of runs ------------------------------------------------------------

struct OpSpec {
  const char* name;
  std::vector<int64_t> durs;
  const char* child = nullptr;  // one child per call, inside the parent, `child_dur` long
  int64_t child_dur = 0;
};
struct TaskSpec {
  const char* name;   // as the trace has it, with its instance number
  const char* group;  // the name the device table shows
  int64_t dur;
};
struct RunSpec {
  std::vector<OpSpec> ops;
  std::vector<TaskSpec> tasks;
  std::vector<int64_t> steps;  // step durations
};

// A: the baseline. B: mm slower, add faster (more calls, less time), relu gone, gelu new,
// linear/addmm unchanged; MatMul slower on the device, Relu gone, Gelu new; one step fewer.
const RunSpec& specA() {
  static const RunSpec s{{{"aten::mm", {100'000, 120'000, 90'000}},
                          {"aten::relu", {10'000, 12'000}},
                          {"aten::add", {50'000, 50'000}},
                          {"aten::linear", {200'000}, "aten::addmm", 150'000}},
                         {{"MatMul_1", "MatMul", 40'000}, {"MatMul_2", "MatMul", 60'000}, {"Relu_3", "Relu", 5'000}},
                         {1'000'000, 1'100'000, 1'050'000}};
  return s;
}
const RunSpec& specB() {
  static const RunSpec s{{{"aten::mm", {200'000, 210'000}},
                          {"aten::add", {30'000, 30'000, 30'000}},
                          {"aten::gelu", {25'000}},
                          {"aten::linear", {200'000}, "aten::addmm", 150'000}},
                         {{"MatMul_7", "MatMul", 80'000},
                          {"MatMul_8", "MatMul", 90'000},
                          {"MatMul_9", "MatMul", 70'000},
                          {"Gelu_1", "Gelu", 8'000}},
                         {1'500'000, 1'400'000}};
  return s;
}

struct Expected {
  int64_t calls = 0, total = 0, max = 0;
};
using ExpectedSide = std::map<std::string, Expected>;

void add(ExpectedSide& side, const std::string& name, int64_t dur) {
  Expected& e = side[name];
  ++e.calls;
  e.total += dur;
  e.max = std::max(e.max, dur);
}
ExpectedSide expectedHost(const RunSpec& s) {
  ExpectedSide out;
  for (const OpSpec& o : s.ops) {
    for (int64_t d : o.durs) {
      add(out, o.name, d);
      if (o.child) add(out, o.child, o.child_dur);
    }
  }
  return out;
}
ExpectedSide expectedDevice(const RunSpec& s) {
  ExpectedSide out;
  for (const TaskSpec& t : s.tasks) add(out, t.group, t.dur);
  return out;
}
// Host time covered by ops: children lie inside their parents, so the top-level durations.
int64_t expectedHostTotal(const RunSpec& s) {
  int64_t t = 0;
  for (const OpSpec& o : s.ops) {
    for (int64_t d : o.durs) t += d;
  }
  return t;
}

uint32_t intern(const char* s) { return StringTable::global().intern(s); }

StatusOr<int64_t> writeRun(TraceWriter& w, const RunSpec& s, const char* opt_level) {
  RunInfo info;
  info.started_ns = 1'000'000'000;
  info.wall_start_ns = 1'700'000'000'000'000'000;
  info.command = "train";
  info.model = "handmade";
  info.opt_level = opt_level;
  info.device = "npu:0";
  ASSIGN_OR_RETURN(int64_t run, w.beginRun(info));
  auto buf = w.takeBuffer();
  int64_t t = info.started_ns, id = 0;
  for (const OpSpec& o : s.ops) {
    for (int64_t d : o.durs) {
      OpRecord r;
      r.id = ++id;
      r.start_ns = t;
      r.dur_ns = d;
      r.thread_id = 1;
      r.name_id = intern(o.name);
      buf->records[buf->size++] = r;
      if (o.child) {
        OpRecord c = r;
        c.id = ++id;
        c.parent_id = r.id;
        c.depth = 1;
        c.start_ns = t + (d - o.child_dur) / 2;
        c.dur_ns = o.child_dur;
        c.name_id = intern(o.child);
        buf->records[buf->size++] = c;
      }
      t += d + 1'000;
    }
  }
  w.submit(buf);
  std::vector<DeviceTaskRecord> tasks;
  int64_t dt = info.started_ns;
  for (const TaskSpec& ts : s.tasks) {
    DeviceTaskRecord r;
    r.start_ns = dt;
    r.dur_ns = ts.dur;
    r.name_id = intern(ts.name);
    r.type_id = intern("AI_CORE");
    tasks.push_back(r);
    dt += ts.dur + 500;
  }
  w.addDeviceTasks(std::move(tasks));
  int64_t st = info.started_ns;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    StepRecord r;
    r.step = static_cast<int64_t>(i);
    r.start_ns = st;
    r.dur_ns = s.steps[i];
    w.addStep(r);
    st += s.steps[i];
  }
  RETURN_IF_ERROR(w.endRun("completed", "", st));
  return run;
}

struct HandmadePair {
  std::string path;
  int64_t run_a = -1, run_b = -1;
};

const HandmadePair& handmadePair() {
  static HandmadePair p = [] {
    HandmadePair h;
    h.path = tempPath("perf_compare_pair");
    auto w = TraceWriter::open(h.path);
    if (!w.isOk()) std::abort();
    auto a = writeRun(*w.value(), specA(), "O1");
    auto b = writeRun(*w.value(), specB(), "O2");
    if (!a.isOk() || !b.isOk()) std::abort();
    h.run_a = a.value();
    h.run_b = b.value();
    return h;
  }();
  return p;
}

std::unique_ptr<TraceReader> openReader(const std::string& path) {
  auto r = TraceReader::open(path);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.isOk() ? std::move(r).value() : nullptr;
}

// ---- helpers over the view ------------------------------------------------------------------

// The names down a table, as shown (after the proxy's sort and filter).
std::vector<std::string> shownNames(QTableView* t) {
  std::vector<std::string> out;
  for (int r = 0; r < t->model()->rowCount(); ++r) {
    out.push_back(t->model()->index(r, PerfTableModel::kName).data().toString().toStdString());
  }
  return out;
}

int sourceRowOf(const PerfTableModel* m, const std::string& name) {
  for (int r = 0; r < m->rowCount(); ++r) {
    if (m->rowAt(r)->name == name) return r;
  }
  return -1;
}

QVariant cell(const QAbstractItemModel* m, int row, int col, int role = Qt::DisplayRole) {
  return m->index(row, col).data(role);
}

// Checks a table model's rows against both sides' expectations: same names, calls, totals,
// maxima and averages (sort role and text), diff, ratio or the only-A / only-B marking and tint.
void expectRows(const PerfTableModel* m, const ExpectedSide& a, const ExpectedSide& b) {
  std::set<std::string> names;
  for (auto& [n, e] : a) names.insert(n);
  for (auto& [n, e] : b) names.insert(n);
  ASSERT_EQ(m->rowCount(), static_cast<int>(names.size()));
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const int row = sourceRowOf(m, name);
    ASSERT_GE(row, 0);
    const Expected ea = a.count(name) ? a.at(name) : Expected{};
    const Expected eb = b.count(name) ? b.at(name) : Expected{};
    using M = PerfTableModel;
    EXPECT_EQ(cell(m, row, M::kCallsA, kSortRole).toLongLong(), ea.calls);
    EXPECT_EQ(cell(m, row, M::kTotalA, kSortRole).toLongLong(), ea.total);
    EXPECT_EQ(cell(m, row, M::kMaxA, kSortRole).toLongLong(), ea.max);
    EXPECT_EQ(cell(m, row, M::kCallsB, kSortRole).toLongLong(), eb.calls);
    EXPECT_EQ(cell(m, row, M::kTotalB, kSortRole).toLongLong(), eb.total);
    EXPECT_EQ(cell(m, row, M::kMaxB, kSortRole).toLongLong(), eb.max);
    EXPECT_EQ(cell(m, row, M::kDiff, kSortRole).toLongLong(), eb.total - ea.total);
    if (ea.calls) {
      EXPECT_DOUBLE_EQ(cell(m, row, M::kAvgA, kSortRole).toDouble(), static_cast<double>(ea.total) / ea.calls);
      EXPECT_EQ(cell(m, row, M::kTotalA).toString(), formatNs(ea.total));
      EXPECT_EQ(cell(m, row, M::kCallsA).toString(), QString::number(ea.calls));
    } else {
      EXPECT_EQ(cell(m, row, M::kTotalA).toString(), "\u2013") << "an absent side shows a dash";
    }
    if (eb.calls) {
      EXPECT_EQ(cell(m, row, M::kTotalB).toString(), formatNs(eb.total));
      EXPECT_EQ(cell(m, row, M::kMaxB).toString(), formatNs(eb.max));
    } else {
      EXPECT_EQ(cell(m, row, M::kTotalB).toString(), "\u2013");
    }
    const QVariant bg = cell(m, row, M::kName, Qt::BackgroundRole);
    const QString ratio = cell(m, row, M::kRatio).toString();
    if (!eb.calls) {
      EXPECT_EQ(ratio, "only A");
      EXPECT_EQ(bg.value<QBrush>().color(), perfRowTint(PerfRowKind::kOnlyA));
    } else if (!ea.calls) {
      EXPECT_EQ(ratio, "only B");
      EXPECT_EQ(bg.value<QBrush>().color(), perfRowTint(PerfRowKind::kOnlyB));
    } else {
      const double r = static_cast<double>(eb.total) / static_cast<double>(ea.total);
      EXPECT_DOUBLE_EQ(cell(m, row, M::kRatio, kSortRole).toDouble(), r);
      EXPECT_EQ(ratio, QString::number(r, 'f', 2) + "\u00d7");
      if (eb.total == ea.total) {
        EXPECT_FALSE(bg.isValid()) << "equal rows are not tinted";
      } else {
        EXPECT_EQ(bg.value<QBrush>().color(), perfRowTint(eb.total > ea.total ? PerfRowKind::kSlower : PerfRowKind::kFaster));
      }
    }
  }
}

class PerfCompareTest : public ::testing::Test {
 protected:
  void SetUp() override { ensureApp(); }
};

void save(QWidget* w, const QString& name) {
  QApplication::processEvents();
  QDir().mkpath(NPUSCOPE_SCREENSHOT_DIR);
  const QString path = QString(NPUSCOPE_SCREENSHOT_DIR) + "/" + name + ".png";
  ASSERT_TRUE(w->grab().save(path)) << path.toStdString();
}

// ---- tests ----------------------------------------------------------------------------------

TEST_F(PerfCompareTest, RowsMatchSumsComputedFromTheWrittenOps) {
  const HandmadePair& p = handmadePair();
  auto reader = openReader(p.path);
  ASSERT_TRUE(reader);
  PerfCompareView v;
  QAbstractItemModelTester t1(v.hostModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  QAbstractItemModelTester t2(v.deviceModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  QAbstractItemModelTester t3(v.stepModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  QAbstractItemModelTester t4(v.hostTable()->model(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_TRUE(v.compareRuns(*reader, p.run_a, "#1 O1", *reader, p.run_b, "#2 O2"));

  expectRows(v.hostModel(), expectedHost(specA()), expectedHost(specB()));
  expectRows(v.deviceModel(), expectedDevice(specA()), expectedDevice(specB()));
  EXPECT_EQ(v.result().device_a, "real");
  EXPECT_EQ(v.result().device_b, "real");

  // The four tints are told apart.
  std::set<QRgb> tints;
  for (PerfRowKind k : {PerfRowKind::kSlower, PerfRowKind::kFaster, PerfRowKind::kOnlyA, PerfRowKind::kOnlyB}) {
    tints.insert(perfRowTint(k).rgb());
  }
  EXPECT_EQ(tints.size(), 4u);

  // The summary: both labels, host totals, what the device rows are.
  const QString summary = v.summary()->text();
  EXPECT_TRUE(summary.contains("#1 O1") && summary.contains("#2 O2")) << summary.toStdString();
  const int64_t ha = expectedHostTotal(specA()), hb = expectedHostTotal(specB());
  EXPECT_TRUE(summary.contains(formatNs(ha))) << summary.toStdString();
  EXPECT_TRUE(summary.contains(formatNs(hb))) << summary.toStdString();
  EXPECT_TRUE(summary.contains("+" + formatNs(hb - ha))) << summary.toStdString();
  EXPECT_TRUE(summary.contains("real tasks")) << summary.toStdString();
  // The ratio's direction is explained next to the numbers.
  EXPECT_TRUE(v.hostModel()->headerData(PerfTableModel::kRatio, Qt::Horizontal, Qt::ToolTipRole)
                  .toString()
                  .contains("above 1 B is slower"));
  EXPECT_EQ(v.tabs()->tabText(PerfCompareView::kHostTab), "Host ops (6)");
  EXPECT_EQ(v.tabs()->tabText(PerfCompareView::kDeviceTab), "Device tasks (3)");
}

TEST_F(PerfCompareTest, LargestDifferenceFirstThenNumericSortAndBack) {
  const HandmadePair& p = handmadePair();
  auto reader = openReader(p.path);
  ASSERT_TRUE(reader);
  PerfCompareView v;
  ASSERT_TRUE(v.compareRuns(*reader, p.run_a, "A", *reader, p.run_b, "B"));
  const ExpectedSide a = expectedHost(specA()), b = expectedHost(specB());
  auto total = [](const ExpectedSide& s, const std::string& n) { return s.count(n) ? s.at(n).total : 0; };
  auto absDiff = [&](const std::string& n) { return std::llabs(total(b, n) - total(a, n)); };

  // Default: largest |B − A| first (aten::mm, +100 µs), never increasing down the table.
  const auto shown = shownNames(v.hostTable());
  ASSERT_EQ(shown.size(), 6u);
  EXPECT_EQ(shown[0], "aten::mm");
  for (size_t i = 1; i < shown.size(); ++i) EXPECT_GE(absDiff(shown[i - 1]), absDiff(shown[i])) << shown[i];

  // Total B descending, as numbers: "410 µs" > "90.0 µs" > "25.0 µs" > "–" (relu is only in A).
  std::vector<std::string> by_total_b;
  for (const auto& n : shown) by_total_b.push_back(n);
  std::stable_sort(by_total_b.begin(), by_total_b.end(),
                   [&](const std::string& x, const std::string& y) { return total(b, x) > total(b, y); });
  v.hostTable()->sortByColumn(PerfTableModel::kTotalB, Qt::DescendingOrder);
  EXPECT_EQ(shownNames(v.hostTable()), by_total_b);

  // Ratio ascending: only A (0) first, only B (no ratio: infinitely slower) last.
  v.hostTable()->sortByColumn(PerfTableModel::kRatio, Qt::AscendingOrder);
  auto by_ratio = shownNames(v.hostTable());
  EXPECT_EQ(by_ratio.front(), "aten::relu");
  EXPECT_EQ(by_ratio.back(), "aten::gelu");
  // Signed diff descending: slower in B on top, faster at the bottom.
  v.hostTable()->sortByColumn(PerfTableModel::kDiff, Qt::DescendingOrder);
  auto by_diff = shownNames(v.hostTable());
  EXPECT_EQ(by_diff.front(), "aten::mm");
  EXPECT_EQ(by_diff.back(), "aten::relu");

  // A click on the header sorts too; the reset button brings back the default order.
  QTest::mouseClick(v.hostTable()->horizontalHeader()->viewport(), Qt::LeftButton, {},
                    QPoint(v.hostTable()->horizontalHeader()->sectionViewportPosition(PerfTableModel::kName) + 5, 5));
  auto by_name = shown;
  std::sort(by_name.begin(), by_name.end());
  auto clicked = shownNames(v.hostTable());
  if (clicked.front() != by_name.front()) std::reverse(clicked.begin(), clicked.end());  // either direction
  EXPECT_EQ(clicked, by_name);
  v.resetOrder();
  EXPECT_EQ(shownNames(v.hostTable()), shown);
  EXPECT_EQ(v.hostTable()->horizontalHeader()->sortIndicatorSection(), -1);
}

TEST_F(PerfCompareTest, FilterByNameAndBySide) {
  const HandmadePair& p = handmadePair();
  auto reader = openReader(p.path);
  ASSERT_TRUE(reader);
  PerfCompareView v;
  ASSERT_TRUE(v.compareRuns(*reader, p.run_a, "A", *reader, p.run_b, "B"));
  QTest::keyClicks(v.filterEdit(), "ADD");  // case-insensitive, on the name
  auto shown = shownNames(v.hostTable());
  std::sort(shown.begin(), shown.end());
  EXPECT_EQ(shown, (std::vector<std::string>{"aten::add", "aten::addmm"}));
  EXPECT_EQ(v.tabs()->tabText(PerfCompareView::kHostTab), "Host ops (2 / 6)");
  EXPECT_EQ(v.deviceTable()->model()->rowCount(), 0);
  v.filterEdit()->setText("matmul");
  EXPECT_EQ(shownNames(v.deviceTable()), std::vector<std::string>{"MatMul"});
  v.filterEdit()->clear();

  const std::pair<PerfCompareView::Show, std::vector<std::string>> cases[] = {
      {PerfCompareView::kShowOnlyA, {"aten::relu"}},
      {PerfCompareView::kShowOnlyB, {"aten::gelu"}},
      {PerfCompareView::kShowSlower, {"aten::mm"}},
      {PerfCompareView::kShowFaster, {"aten::add"}},
      {PerfCompareView::kShowBoth, {"aten::add", "aten::addmm", "aten::linear", "aten::mm"}},
  };
  for (const auto& [show, names] : cases) {
    v.showCombo()->setCurrentIndex(show);
    auto got = shownNames(v.hostTable());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, names) << v.showCombo()->currentText().toStdString();
  }
  v.showCombo()->setCurrentIndex(PerfCompareView::kShowOnlyB);
  EXPECT_EQ(shownNames(v.deviceTable()), std::vector<std::string>{"Gelu"});
  v.showCombo()->setCurrentIndex(PerfCompareView::kShowAll);
  EXPECT_EQ(v.hostTable()->model()->rowCount(), 6);
}

TEST_F(PerfCompareTest, StepsArePairedByPosition) {
  const HandmadePair& p = handmadePair();
  auto reader = openReader(p.path);
  ASSERT_TRUE(reader);
  PerfCompareView v;
  ASSERT_TRUE(v.compareRuns(*reader, p.run_a, "A", *reader, p.run_b, "B"));
  const auto& sa = specA().steps;
  const auto& sb = specB().steps;
  const QAbstractItemModel* m = v.stepTable()->model();
  ASSERT_EQ(m->rowCount(), static_cast<int>(std::max(sa.size(), sb.size())));
  using S = PerfStepModel;
  for (int r = 0; r < m->rowCount(); ++r) {
    SCOPED_TRACE(r);
    const size_t i = static_cast<size_t>(r);
    EXPECT_EQ(cell(m, r, S::kIndex).toLongLong(), r);
    EXPECT_EQ(cell(m, r, S::kStepA).toString(), i < sa.size() ? QString::number(r) : "\u2013");
    EXPECT_EQ(cell(m, r, S::kDurA).toString(), i < sa.size() ? formatNs(sa[i]) : "\u2013");
    EXPECT_EQ(cell(m, r, S::kDurB).toString(), i < sb.size() ? formatNs(sb[i]) : "\u2013");
    if (i < sa.size() && i < sb.size()) {
      const int64_t d = sb[i] - sa[i];
      EXPECT_EQ(cell(m, r, S::kDiff, kSortRole).toLongLong(), d);
      EXPECT_EQ(cell(m, r, S::kDiff).toString(), (d > 0 ? "+" : "") + formatNs(d));
      EXPECT_EQ(cell(m, r, S::kDiff, Qt::BackgroundRole).value<QBrush>().color(),
                perfRowTint(d > 0 ? PerfRowKind::kSlower : PerfRowKind::kFaster));
    } else {
      EXPECT_EQ(cell(m, r, S::kRatio).toString(), i < sa.size() ? "only A" : "only B");
    }
  }
  EXPECT_EQ(v.tabs()->tabText(PerfCompareView::kStepTab), "Steps (3)");
  // Slowest B step first when sorted by B's duration; the missing one last.
  v.stepTable()->sortByColumn(S::kDurB, Qt::DescendingOrder);
  EXPECT_EQ(cell(m, 0, S::kDurB).toString(), formatNs(*std::max_element(sb.begin(), sb.end())));
  EXPECT_EQ(cell(m, m->rowCount() - 1, S::kDurB).toString(), "\u2013");
}

TEST_F(PerfCompareTest, ModeledRunsOfTheFixtureAndAScreenshot) {
  const auto& f = twoRunFixture();
  auto reader = openReader(f.path);
  ASSERT_TRUE(reader);
  PerfCompareView v;
  v.resize(1400, 820);
  v.show();
  ASSERT_TRUE(v.compareRuns(*reader, f.o1.run_id, "#1 O1 (24 steps)", *reader, f.o2.run_id, "#2 O2 (16 steps)"));
  EXPECT_EQ(v.result().device_a, "model");
  EXPECT_EQ(v.result().device_b, "model");
  EXPECT_TRUE(v.tabs()->tabText(PerfCompareView::kDeviceTab).startsWith("Device (modeled)"));
  EXPECT_TRUE(v.summary()->text().contains("modeled op time"));
  // The optimizer step runs once per step; its foreach ops are skipped on O1's overflow steps 3
  // and 8 (synthetic_trace.h).
  const PerfTableModel* m = v.hostModel();
  const int opt = sourceRowOf(m, "Optimizer.step#NpuFusedSGD.step");
  ASSERT_GE(opt, 0);
  EXPECT_EQ(m->rowAt(opt)->a.calls, 24);
  EXPECT_EQ(m->rowAt(opt)->b.calls, 16);
  const int mul = sourceRowOf(m, "aten::_foreach_mul_");
  ASSERT_GE(mul, 0);
  EXPECT_EQ(m->rowAt(mul)->a.calls, 22);
  EXPECT_EQ(m->rowAt(mul)->b.calls, 16);
  EXPECT_EQ(v.stepTable()->model()->rowCount(), 24);
  EXPECT_EQ(cell(v.stepTable()->model(), 20, PerfStepModel::kRatio).toString(), "only A");
  v.hostTable()->selectRow(0);
  ASSERT_NO_FATAL_FAILURE(save(&v, "perf_compare_01_host_synthetic"));
  v.tabs()->setCurrentIndex(PerfCompareView::kStepTab);
  ASSERT_NO_FATAL_FAILURE(save(&v, "perf_compare_02_steps_synthetic"));
}

TEST_F(PerfCompareTest, HandmadePairScreenshot) {
  const HandmadePair& p = handmadePair();
  auto reader = openReader(p.path);
  ASSERT_TRUE(reader);
  PerfCompareView v;
  v.resize(1400, 560);
  v.show();
  ASSERT_TRUE(v.compareRuns(*reader, p.run_a, "#1 O1", *reader, p.run_b, "#2 O2"));
  ASSERT_NO_FATAL_FAILURE(save(&v, "perf_compare_03_host_handmade"));
  v.tabs()->setCurrentIndex(PerfCompareView::kDeviceTab);
  ASSERT_NO_FATAL_FAILURE(save(&v, "perf_compare_04_device_handmade"));
}

// The real samples, imported into one file: the Kineto trace against itself (every row equal)
// and the torch_npu AlexNet step against the Kineto trace (different models: rows on one side).
TEST_F(PerfCompareTest, ImportedRealTraces) {
  const std::string db = tempPath("perf_compare_real");
  auto kineto = import::importPath(std::string(NPUSCOPE_TRACES) + "/kineto_before_fix_trace.json", db);
  ASSERT_TRUE(kineto.isOk()) << kineto.status().message();
  auto ascend = import::importPath(std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt", db);
  ASSERT_TRUE(ascend.isOk()) << ascend.status().message();
  ASSERT_EQ(kineto->runs.size(), 1u);
  ASSERT_EQ(ascend->runs.size(), 1u);
  const int64_t k = kineto->runs[0].run_id, a = ascend->runs[0].run_id;
  auto reader = openReader(db);
  ASSERT_TRUE(reader);

  PerfCompareView v;
  v.resize(1400, 820);
  v.show();
  ASSERT_TRUE(v.compareRuns(*reader, k, "kineto", *reader, k, "kineto again"));
  ASSERT_GE(v.hostModel()->rowCount(), 5);
  for (const PerfRow& r : v.hostModel()->rows()) {
    EXPECT_EQ(r.a.calls, r.b.calls) << r.name;
    EXPECT_EQ(r.diffNs(), 0) << r.name;
  }
  for (int r = 0; r < v.hostModel()->rowCount(); ++r) {
    EXPECT_EQ(cell(v.hostModel(), r, PerfTableModel::kRatio).toString(), "1.00\u00d7");
    EXPECT_FALSE(cell(v.hostModel(), r, PerfTableModel::kName, Qt::BackgroundRole).isValid());
  }
  EXPECT_EQ(v.result().device_a, "real");
  ASSERT_GT(v.deviceModel()->rowCount(), 0);

  ASSERT_TRUE(v.compareRuns(*reader, a, "torch_npu AlexNet (rank 0)", *reader, k, "Kineto sample"));
  // Only-A rows are exactly the names the Kineto run lacks, read from each run's op table.
  auto names = [&](int64_t run) {
    OpAggregateQuery q;
    q.run_id = run;
    auto t = reader->opAggregates(q);
    EXPECT_TRUE(t.isOk());
    std::set<std::string> out;
    for (const auto& r : t.value().rows) out.insert(r.name);
    return out;
  };
  const auto in_a = names(a), in_k = names(k);
  ASSERT_GT(in_a.size(), 50u);
  int only_a = 0;
  for (int r = 0; r < v.hostModel()->rowCount(); ++r) {
    const std::string n = v.hostModel()->rowAt(r)->name;
    const QString mark = cell(v.hostModel(), r, PerfTableModel::kRatio).toString();
    EXPECT_EQ(mark == "only A", in_a.count(n) && !in_k.count(n)) << n;
    EXPECT_EQ(mark == "only B", !in_a.count(n) && in_k.count(n)) << n;
    only_a += mark == "only A";
  }
  EXPECT_GT(only_a, 0);
  // 100 ns of Kineto ops against 184 ms of AlexNet: a ratio too small for two decimals is not "0.00×".
  EXPECT_TRUE(v.summary()->text().contains("&lt;0.01\u00d7")) << v.summary()->text().toStdString();
  EXPECT_TRUE(v.summary()->text().contains("1 step, mean")) << v.summary()->text().toStdString();
  ASSERT_NO_FATAL_FAILURE(save(&v, "perf_compare_05_host_real"));
  v.tabs()->setCurrentIndex(PerfCompareView::kDeviceTab);
  ASSERT_NO_FATAL_FAILURE(save(&v, "perf_compare_06_device_real"));
  reader.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
}

TEST_F(PerfCompareTest, AnErrorIsShownAsAMessage) {
  // A copy of the pair whose device-task table is gone under an open reader.
  const std::string path = tempPath("perf_compare_broken");
  std::filesystem::copy_file(handmadePair().path, path, std::filesystem::copy_options::overwrite_existing);
  auto reader = openReader(path);
  ASSERT_TRUE(reader);
  {
    auto db = openTraceDatabase(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk()) << db.status().message();
    ASSERT_TRUE(execSql(db.value().get(), "DROP TABLE device_tasks").isOk());
  }
  PerfCompareView v;
  auto good = openReader(handmadePair().path);
  ASSERT_TRUE(good);
  ASSERT_TRUE(v.compareRuns(*good, handmadePair().run_a, "A", *good, handmadePair().run_b, "B"));
  ASSERT_GT(v.hostModel()->rowCount(), 0);
  QSignalSpy spy(&v, &PerfCompareView::errorOccurred);
  EXPECT_FALSE(v.compareRuns(*reader, handmadePair().run_a, "A", *reader, handmadePair().run_b, "B"));
  ASSERT_EQ(spy.count(), 1);
  EXPECT_TRUE(spy.at(0).at(0).toString().contains("device_tasks")) << spy.at(0).at(0).toString().toStdString();
  EXPECT_TRUE(v.summary()->text().contains("failed")) << v.summary()->text().toStdString();
  EXPECT_EQ(v.hostModel()->rowCount(), 0) << "the previous comparison is cleared";
  EXPECT_EQ(v.stepModel()->rowCount(), 0);
  reader.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// The Compare tab over two imported msprobe dumps (the real sample, and a copy whose first
// "Max": 5.125 became 15.125): statistics-mode columns, and the module tree with the first
// divergent call selected under its opened modules, coloured by the worst verdict beneath.
TEST_F(PerfCompareTest, MsprobeCompareShowsTheModuleTreeAndTheFirstDivergentCall) {
  const std::string sample = std::string(NPUSCOPE_MSPROBE) + "/pytorch_mix";
  const std::string changed = tempPath("msprobe_changed");
  std::filesystem::remove_all(changed);
  std::filesystem::create_directories(changed);
  for (const char* f : {"dump.json", "stack.json", "construct.json"}) {
    std::filesystem::copy_file(sample + "/" + f, changed + "/" + f);
  }
  {
    std::ifstream in(changed + "/dump.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "\"Max\": 5.125";
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, from.size(), "\"Max\": 15.125");
    std::ofstream(changed + "/dump.json", std::ios::trunc) << text;
  }
  const std::string db = tempPath("msprobe_compare.db");
  std::filesystem::remove(db);
  ASSERT_TRUE(import::importPath(sample, db).isOk());
  auto second = import::importPath(changed, db);
  ASSERT_TRUE(second.isOk()) << second.status().message();
  MainWindow w;
  w.setSynchronous(true);
  w.resize(1500, 900);
  ASSERT_TRUE(w.openFile(QString::fromStdString(db), true));
  w.selectRuns({1, 2});
  CompareView* v = w.compare();
  const compare::CompareResult& res = v->model()->result();
  ASSERT_TRUE(res.statistics_only);
  ASSERT_FALSE(res.first_divergent_op.empty());
  EXPECT_EQ(v->model()->headerData(CompareModel::kCosine, Qt::Horizontal, Qt::DisplayRole).toString(), "Max diff");
  EXPECT_EQ(v->model()->rowAt(0)->op_name, res.first_divergent_op) << "the first divergent call's rows first";
  QStringList diffs;
  for (int row = 0; row < v->model()->rowCount() && v->model()->rowAt(row)->op_name == res.first_divergent_op; ++row) {
    diffs << v->model()->data(v->model()->index(row, CompareModel::kCosine), Qt::DisplayRole).toString();
  }
  EXPECT_TRUE(diffs.contains(formatValue(10.0))) << "its Max diff 15.125 - 5.125: " << diffs.join(' ').toStdString();
  QTreeWidget* tree = v->tree();
  ASSERT_FALSE(tree->isHidden());
  QTreeWidgetItem* cur = tree->currentItem();
  ASSERT_NE(cur, nullptr);
  EXPECT_EQ(cur->data(0, Qt::UserRole).toString().toStdString(), res.first_divergent_op);
  EXPECT_TRUE(cur->font(0).bold());
  ASSERT_NE(cur->parent(), nullptr) << "the call sits under its module";
  EXPECT_TRUE(cur->parent()->isExpanded());
  for (QTreeWidgetItem* p = cur->parent(); p; p = p->parent()) {
    EXPECT_EQ(p->text(1), "warning") << "a module shows the worst verdict beneath it: "
                                     << p->text(0).toStdString();
  }
  // A click on a node selects its first row.
  for (int i = 0; i < tree->topLevelItemCount(); ++i) {
    QTreeWidgetItem* top = tree->topLevelItem(i);
    if (top->childCount() > 0) continue;
    tree->setCurrentItem(top);
    const QModelIndex sel = v->table()->currentIndex();
    ASSERT_TRUE(sel.isValid());
    EXPECT_EQ(QString::fromStdString(v->model()->rowAt(
                  static_cast<TableProxy*>(v->table()->model())->mapToSource(sel).row())->op_name),
              top->data(0, Qt::UserRole).toString());
    break;
  }
  tree->setCurrentItem(cur);
  w.tabs()->setCurrentWidget(v);
  save(&w, "msprobe_compare");
}

}  // namespace
}  // namespace npuscope::gui
