// bench_gui: the workbench on a 1M-op run (written once through TraceWriter by the GUI tests'
// generator, cached in the temp directory as npuscope_bench_gui_1m.db), offscreen.
//   open_first_paint_ms_1m_ops: open the file, load the run, paint the timeline once (target <= 1500)
//   frame_ms_1m_ops: median repaint after one zoom or pan step, at full-run scale and at 1 ms
//                    across (target <= 30); the two scales are also reported separately.
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <algorithm>
#include <filesystem>
#include <vector>

#include "npuscope/gui/timeline_view.h"
#include "npuscope/gui/trace_document.h"
#include "synthetic_trace.h"

namespace {

constexpr int64_t kTargetOps = 1'000'000;

QApplication* app() {
  static QApplication* a = [] {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    static int argc = 1;
    static char name[] = "bench_gui";
    static char* argv[] = {name, nullptr};
    return new QApplication(argc, argv);
  }();
  return a;
}

// The 1M-op file, generated on first use and kept (generation takes a few seconds).
const std::string& traceFile() {
  static std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() / "npuscope_bench_gui_1m.db").string();
    bool ok = false;
    if (std::filesystem::exists(p)) {
      auto r = npuscope::TraceReader::open(p);
      if (r.isOk()) {
        auto runs = r.value()->runs();
        ok = runs.isOk() && runs->size() == 1 && runs->front().status == "completed";
      }
    }
    if (!ok) {
      for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(p + s);
      npuscope::testing::SyntheticRunOptions o;
      o.blocks = 4;
      o.dumps = false;
      auto r = npuscope::testing::writeSyntheticFile(p, o, kTargetOps);
      if (!r.isOk()) {
        fprintf(stderr, "bench_gui: cannot write %s: %s\n", p.c_str(), r.status().toString().c_str());
        std::abort();
      }
    }
    return p;
  }();
  return path;
}

double paintMs(npuscope::gui::TimelineView& v, QImage& img) {
  QElapsedTimer t;
  t.start();
  v.render(&img);
  return static_cast<double>(t.nsecsElapsed()) / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void BM_OpenFirstPaint(benchmark::State& state) {
  app();
  const std::string& path = traceFile();
  std::vector<double> ms;
  int64_t ops = 0;
  for (auto _ : state) {
    QElapsedTimer t;
    t.start();
    npuscope::gui::TraceDocument doc;
    if (!doc.open(QString::fromStdString(path)) || !doc.loadRun(doc.runs().front().id, true)) {
      state.SkipWithError("open failed");
      return;
    }
    npuscope::gui::TimelineView v;
    v.resize(1600, 900);
    v.setMemoryOverview(doc.memoryOverview());
    v.setData(doc.timeline());
    QImage img(v.size(), QImage::Format_ARGB32_Premultiplied);
    v.render(&img);
    ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
    ops = doc.timeline()->opCount();
  }
  state.counters["open_first_paint_ms_1m_ops"] = median(ms);
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_OpenFirstPaint)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_Frame(benchmark::State& state) {
  app();
  npuscope::gui::TraceDocument doc;
  if (!doc.open(QString::fromStdString(traceFile())) || !doc.loadRun(doc.runs().front().id, true)) {
    state.SkipWithError("open failed");
    return;
  }
  npuscope::gui::TimelineView v;
  v.resize(1600, 900);
  v.setMemoryOverview(doc.memoryOverview());
  v.setData(doc.timeline());
  QImage img(v.size(), QImage::Format_ARGB32_Premultiplied);
  v.render(&img);
  const npuscope::gui::TimelineData* d = doc.timeline();
  std::vector<double> full, fine;
  int64_t rects_full = 0, rects_fine = 0;
  for (auto _ : state) {
    // Full-run scale: zoom a notch in and out around the middle, pan a notch each way.
    v.fitAll();
    for (int i = 0; i < 4; ++i) {
      if (i == 0) v.zoomAt(0.85, 800);
      if (i == 1) v.zoomAt(1 / 0.85, 800);
      if (i == 2) v.panPixels(160);
      if (i == 3) v.panPixels(-160);
      full.push_back(paintMs(v, img));
      rects_full = v.lastPaintRects();
    }
    // 1 ms across, in the middle of the run.
    const int64_t mid = (d->beginNs() + d->endNs()) / 2;
    v.setView(mid, 1e6 / v.plotWidth());
    for (int i = 0; i < 4; ++i) {
      if (i == 0) v.zoomAt(0.85, 800);
      if (i == 1) v.zoomAt(1 / 0.85, 800);
      if (i == 2) v.panPixels(160);
      if (i == 3) v.panPixels(-160);
      fine.push_back(paintMs(v, img));
      rects_fine = v.lastPaintRects();
    }
  }
  std::vector<double> all = full;
  all.insert(all.end(), fine.begin(), fine.end());
  state.counters["frame_ms_1m_ops"] = median(all);
  state.counters["frame_ms_full_run"] = median(full);
  state.counters["frame_ms_1ms_window"] = median(fine);
  state.counters["rects_full_run"] = static_cast<double>(rects_full);
  state.counters["rects_1ms_window"] = static_cast<double>(rects_fine);
  state.counters["ops"] = static_cast<double>(d->opCount());
}
BENCHMARK(BM_Frame)->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
