// File > Open of traces to import: the conversion, its cache (re-used while the source is
// unchanged, redone when it changes), cancel and bad input leaving nothing that looks complete,
// and the performance compare of the open run against a converted trace.
#include <gtest/gtest.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProgressDialog>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "gui_test_support.h"
#include "npuscope/analysis/perf_compare.h"
#include "npuscope/gui/main_window.h"
#include "npuscope/gui/perf_compare_view.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/trace_import.h"

namespace npuscope::gui {
namespace {

namespace fs = std::filesystem;

void saveShot(QWidget* w, const QString& name) {
  QApplication::processEvents();
  QDir().mkpath(NPUSCOPE_SCREENSHOT_DIR);
  const QString file = QString(NPUSCOPE_SCREENSHOT_DIR) + "/" + name + ".png";
  ASSERT_TRUE(w->grab().toImage().save(file)) << file.toStdString();
}

// A fresh folder per test holding a copy of the real samples.
class OpenTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ensureApp();
    dir_ = fs::temp_directory_path() / ("npuscope_gui_open_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(fs::path(NPUSCOPE_TRACES) / "kineto_before_fix_trace.json", dir_ / "kineto_before_fix_trace.json");
    fs::copy(fs::path(NPUSCOPE_TRACES) / "ascend_alexnet_rank0_ascend_pt", dir_ / "alexnet_ascend_pt",
             fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }
  QString path(const char* name) const { return QString::fromStdString((dir_ / name).string()); }
  fs::path dir_;
};

TEST_F(OpenTraceTest, AKinetoTraceIsConvertedBesideItAndTheConversionReusedUntilTheSourceChanges) {
  MainWindow w;
  const QString src = path("kineto_before_fix_trace.json");
  const QString cached = path("kineto_before_fix_trace.npuscope.db");
  ASSERT_EQ(TraceImport::formatOf(src), "kineto");
  EXPECT_EQ(TraceImport::cachePathFor(src), cached) << "beside the source, named as `npuscope import` names it";
  ASSERT_TRUE(w.openFile(src, true)) << w.lastError().toStdString();
  ASSERT_TRUE(QFileInfo::exists(cached));
  EXPECT_FALSE(QFileInfo::exists(cached + ".partial"));
  EXPECT_EQ(w.document()->path(), cached);
  ASSERT_EQ(w.document()->runs().size(), 1u);
  EXPECT_EQ(w.document()->runs().front().source, "kineto");
  // The sample's independent count (tests/import: 4 cpu_op + 1 cuda_runtime).
  EXPECT_TRUE(w.lastImportSummary().contains("5 host ops")) << w.lastImportSummary().toStdString();
  ASSERT_NE(w.document()->timeline(), nullptr);
  EXPECT_EQ(w.document()->timeline()->opCount(), 5);

  // Unchanged source: the cached file is opened, not rewritten.
  const QDateTime made = QFileInfo(cached).lastModified();
  QTest::qWait(20);
  ASSERT_TRUE(w.openFile(src, true));
  EXPECT_EQ(QFileInfo(cached).lastModified(), made);
  EXPECT_TRUE(w.statusText().contains("unchanged")) << w.statusText().toStdString();

  // A changed source is converted again.
  {
    QFile f(src);
    ASSERT_TRUE(f.open(QIODevice::ReadWrite));
    f.seek(f.size());
    f.write("\n");  // same events, another size and time
  }
  EXPECT_FALSE(TraceImport::upToDate(src, cached));
  ASSERT_TRUE(w.openFile(src, true)) << w.lastError().toStdString();
  EXPECT_TRUE(TraceImport::upToDate(src, cached));
  EXPECT_FALSE(w.statusText().contains("unchanged"));
  EXPECT_EQ(w.document()->timeline()->opCount(), 5);
}

TEST_F(OpenTraceTest, ATorchNpuFolderOpensWithItsDeviceStreamsAndAnExplicitCacheDirIsUsed) {
  MainWindow w;
  const QString cache = QString::fromStdString((dir_ / "cache").string());
  w.importer()->setCacheDir(cache);
  const QString src = path("alexnet_ascend_pt");
  ASSERT_EQ(TraceImport::formatOf(src), "torch_npu");
  ASSERT_TRUE(w.openFile(src + "/", true)) << w.lastError().toStdString();
  EXPECT_TRUE(w.document()->path().startsWith(cache + "/")) << w.document()->path().toStdString();
  EXPECT_TRUE(w.document()->path().endsWith("-alexnet_ascend_pt.npuscope.db"));
  const TimelineData* d = w.document()->timeline();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->opCount(), 1885);  // the sample's Python-counted host ops (tests/import)
  int64_t tasks = 0;
  for (const Lane& l : d->lanes()) tasks += l.kind == LaneKind::kTasks ? static_cast<int64_t>(l.slices.size()) : 0;
  EXPECT_EQ(tasks, 539);
  // A file inside the folder changes: the stamp sees it.
  EXPECT_TRUE(TraceImport::upToDate(src, w.document()->path()));
  {
    std::ofstream f(dir_ / "alexnet_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv", std::ios::app);
    f << "\n";
  }
  EXPECT_FALSE(TraceImport::upToDate(src, w.document()->path()));
}

TEST_F(OpenTraceTest, CancelAndBadInputLeaveNoConversionBehind) {
  MainWindow w;
  // Cancelled: the source is a real trace, the conversion stopped while it runs.
  {
    TraceImport imp;
    QSignalSpy cancelled(&imp, &TraceImport::cancelled);
    QSignalSpy finished(&imp, &TraceImport::finished);
    const QString src = path("alexnet_ascend_pt");
    ASSERT_TRUE(imp.start(src));
    imp.cancel();
    ASSERT_TRUE(cancelled.wait(20000) || cancelled.count() == 1);
    EXPECT_EQ(finished.count(), 0);
    const QString target = TraceImport::cachePathFor(src);
    EXPECT_FALSE(QFileInfo::exists(target));
    EXPECT_FALSE(QFileInfo::exists(target + ".partial"));
    EXPECT_FALSE(QFileInfo::exists(target + ".source"));
  }
  // Truncated JSON: one clear message naming the file, nothing kept, the window still usable.
  {
    const QString bad = path("truncated.json");
    QFile in(path("kineto_before_fix_trace.json"));
    ASSERT_TRUE(in.open(QIODevice::ReadOnly));
    const QByteArray all = in.readAll();
    QFile out(bad);
    ASSERT_TRUE(out.open(QIODevice::WriteOnly));
    out.write(all.left(all.size() / 2));
    out.close();
    ASSERT_EQ(TraceImport::formatOf(bad), "kineto");
    EXPECT_TRUE(w.openFile(bad, true));  // the conversion ran; it failed
    EXPECT_TRUE(w.lastError().contains("truncated.json")) << w.lastError().toStdString();
    EXPECT_EQ(w.lastError().count('\n'), 0) << "one line";
    const QString target = TraceImport::cachePathFor(bad);
    EXPECT_FALSE(QFileInfo::exists(target));
    EXPECT_FALSE(QFileInfo::exists(target + ".partial"));
    EXPECT_FALSE(w.document()->isOpen());
  }
}

// An emulated run (the synthetic O1 fixture) against the real torch_npu trace, converted on the
// way: the Performance tab holds the same rows as core's comparePerf of the two files.
TEST_F(OpenTraceTest, PerformanceCompareAgainstAConvertedTrace) {
  MainWindow w;
  w.setSynchronous(true);
  const auto& fx = testing::twoRunFixture();
  EXPECT_EQ(TraceImport::formatOf(QString::fromStdString(fx.path)), "") << "an npuscope file is opened, not imported";
  ASSERT_TRUE(w.openFile(QString::fromStdString(fx.path), true));
  w.selectRuns({fx.o1.run_id});
  ASSERT_EQ(w.document()->currentRun(), fx.o1.run_id);
  const QString src = path("alexnet_ascend_pt");
  ASSERT_TRUE(w.comparePerformanceWith(src, true)) << w.lastError().toStdString();
  EXPECT_EQ(w.tabs()->currentWidget(), w.perfCompare());
  const PerfCompareResult& got = w.perfCompare()->result();
  // The reference: comparePerf on the two files directly.
  auto a = TraceReader::open(fx.path);
  auto b = TraceReader::open(TraceImport::cachePathFor(src).toStdString());
  ASSERT_TRUE(a.isOk() && b.isOk());
  auto runs = b.value()->runs();
  ASSERT_TRUE(runs.isOk());
  auto want = comparePerf(*a.value(), fx.o1.run_id, *b.value(), runs->front().id);
  ASSERT_TRUE(want.isOk()) << want.status().toString();
  EXPECT_EQ(got.host.size(), want->host.size());
  EXPECT_EQ(got.device.size(), want->device.size());
  EXPECT_EQ(got.device_a, "model");
  EXPECT_EQ(got.device_b, "real");
  EXPECT_EQ(got.host_total_b, want->host_total_b);
  EXPECT_GT(w.perfCompare()->hostModel()->rowCount(), 10);
  saveShot(&w, "open_trace_01_perf_compare_emulated_vs_torch_npu");
}

// A trace file a fuzzer's mutation damaged (a recorded file whose strings table is corrupt, that
// still opens): the run opens with what can be read, and the message bar says the file is
// damaged, once, as `npuscope report` says it on stderr (screenshot open_trace_damaged_file.png).
TEST_F(OpenTraceTest, ADamagedTraceFileOpensWithAWarning) {
  fs::copy(fs::path(NPUSCOPE_FUZZ_CORPUS) / "trace_file" / "uaf-duplicate-string-id.db", dir_ / "damaged.db");
  const QString damaged = path("damaged.db");
  MainWindow w;
  w.setSynchronous(true);
  w.resize(1100, 700);
  w.show();
  ASSERT_TRUE(w.openFile(damaged, true)) << w.lastError().toStdString();
  EXPECT_TRUE(w.lastError().isEmpty()) << w.lastError().toStdString();
  ASSERT_NE(w.document()->timeline(), nullptr);
  EXPECT_GT(w.document()->timeline()->opCount(), 0);
  const QString shown = w.messageShown();
  EXPECT_TRUE(shown.startsWith("Warning: " + damaged + " is damaged: its strings table ")) << shown.toStdString();
  EXPECT_TRUE(shown.endsWith("(check: sqlite3 " + damaged + " 'PRAGMA integrity_check')")) << shown.toStdString();
  EXPECT_EQ(shown.count("is damaged"), 1) << shown.toStdString();
  saveShot(&w, "open_trace_damaged_file");
  // A sound file opened next has no such warning; the damaged one opened again is told again.
  ASSERT_TRUE(w.openFile(QString::fromStdString(testing::twoRunFixture().path), true));
  EXPECT_FALSE(w.messageShown().contains("is damaged")) << w.messageShown().toStdString();
  ASSERT_TRUE(w.openFile(damaged, true)) << w.lastError().toStdString();
  EXPECT_TRUE(w.messageShown().startsWith("Warning: " + damaged + " is damaged: ")) << w.messageShown().toStdString();
}

// The progress dialog of a conversion in the background (a generated 40 MB Kineto trace), as a
// person sees it, then cancelled from it. The conversion takes about half a second here, as long
// as the dialog's delay: it is held at its first progress report past a third of the file until
// the click, so that the click certainly comes while it runs. The test waits for the hold and for
// the dialog to show it (not merely for the dialog with some progress: on a loaded machine the
// dialog appears before a third is read, and the hold came after the checks).
TEST_F(OpenTraceTest, ProgressDialogShowsBytesAndCancels) {
  const QString big = path("big_trace.json");
  {
    std::ofstream f(big.toStdString());
    f << "{\"traceEvents\": [\n";
    for (int i = 0; i < 250000; ++i) {
      f << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, \"tid\": 1, \"ts\": " << i * 10
        << ", \"dur\": 5, \"args\": {\"Input Dims\": [[64, 128], [64, 128]], \"Input type\": [\"float\", \"float\"]}},\n";
    }
    f << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mul\", \"pid\": 1, \"tid\": 1, \"ts\": 9999999, \"dur\": 1}\n]}\n";
  }
  std::promise<void> clicked;
  std::shared_future<void> go_on = clicked.get_future().share();
  std::atomic<bool> held{false};
  MainWindow w;
  // Declared after the window, so gone before it: the conversion is let go on every way out
  // (the window's end waits for it).
  struct Release {
    std::promise<void>& p;
    bool done = false;
    void operator()() {
      if (!done) p.set_value();
      done = true;
    }
    ~Release() { (*this)(); }
  } release{clicked};
  w.importer()->setProgressHook([&held, go_on](int64_t done, int64_t total) {
    if (done > 0 && done * 3 >= total && !held.exchange(true)) go_on.wait();  // a third read
  });
  w.resize(1200, 700);
  w.show();
  QSignalSpy cancelled(w.importer(), &TraceImport::cancelled);
  QSignalSpy finished(w.importer(), &TraceImport::finished);
  QSignalSpy failed(w.importer(), &TraceImport::failed);
  ASSERT_TRUE(w.openFile(big));
  // Held (the reader stopped at a third) and shown: the dialog's 100 ms tick has drawn the held
  // figure, at least 333 of its 1000.
  QProgressDialog* dlg = nullptr;
  QElapsedTimer waited;
  waited.start();
  while (waited.elapsed() < 60000) {
    QTest::qWait(10);
    dlg = w.findChild<QProgressDialog*>();
    if (held.load() && dlg && dlg->isVisible() && dlg->value() >= 333) break;
    dlg = nullptr;
  }
  ASSERT_NE(dlg, nullptr) << "in 60 s, no progress dialog showing the conversion held at a third (held "
                          << held.load() << ", importer at " << w.importer()->done() << " of "
                          << w.importer()->total() << " bytes, finished " << finished.count() << ", failed "
                          << failed.count() << ")";
  EXPECT_TRUE(w.importer()->isRunning());
  EXPECT_TRUE(dlg->labelText().contains("big_trace.json"));
  saveShot(dlg, "open_trace_02_progress");
  auto* cancel = dlg->findChild<QPushButton*>();
  ASSERT_NE(cancel, nullptr);
  QTest::mouseClick(cancel, Qt::LeftButton);
  release();
  ASSERT_TRUE(cancelled.wait(20000) || cancelled.count() == 1)
      << "finished " << finished.count() << ", failed " << failed.count();
  EXPECT_EQ(finished.count() + failed.count(), 0);
  EXPECT_TRUE(w.statusText().contains("cancelled"));
  EXPECT_FALSE(QFileInfo::exists(TraceImport::cachePathFor(big)));
  EXPECT_FALSE(QFileInfo::exists(TraceImport::cachePathFor(big) + ".partial"));
}

}  // namespace
}  // namespace npuscope::gui
