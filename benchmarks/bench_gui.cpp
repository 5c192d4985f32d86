// bench_gui: the workbench on a 1M-op run and a 50M-op run (written once through TraceWriter by
// the GUI tests' generator, cached in the temp directory as npuscope_bench_gui_1m.db and
// npuscope_bench_gui_50m.db — the latter takes a few minutes and ~4 GB the first time),
// offscreen.
//   open_first_paint_ms_50m_ops: open the 50M-op file, load the run (partially: block density,
//                    steps) and paint the whole-run timeline once (target <= 2000)
//   window_ms_50m_ops: zoom to a window of ~1M ops, load its ops and paint (reported)
//   gui_peak_rss_MB_50m_ops: the process's peak resident memory over the two (target <= 1000;
//                    the peak is reset after the file is generated)
//   open_first_paint_ms_10m_ops: the same on a 10M-op file (npuscope_bench_gui_10m.db; target <= 500)
//   open_first_paint_ms_1m_ops: open the file, load the run, paint the timeline once (target <= 300;
//                    the paint shows the run from its block summaries, its ops follow)
//   open_every_op_ms_1m_ops: the same until every op is in memory and shown (reported)
//   frame_ms_1m_ops: median repaint after one zoom or pan step, at full-run scale and at 1 ms
//                    across (target <= 30); the two scales are also reported separately.
//   memory_tab_first_paint_ms_100k_blocks: open a run of 100 steps and 100k device blocks (memory
//                    by owner), build the Memory tab (peak, categories, largest tensors, each
//                    step's peak) and paint it once (target <= 500)
// NPUSCOPE_BENCH_GUI_50M_OPS overrides the size of the large run (e.g. 5000000 for a quick look).
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "npuscope/gui/memory_view.h"
#include "npuscope/gui/timeline_view.h"
#include "npuscope/store/trace_writer.h"
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

// A generated file of about `ops` ops, made on first use and kept.
std::string generatedFile(const char* name, int64_t ops, int blocks) {
  const std::string p = (std::filesystem::temp_directory_path() / name).string();
  bool ok = false;
  if (std::filesystem::exists(p)) {
    auto r = npuscope::TraceReader::open(p);
    if (r.isOk()) {
      auto runs = r.value()->runs();
      ok = runs.isOk() && runs->size() == 1 && runs->front().status == "completed";
      if (ok) {
        auto threads = r.value()->threads(runs->front().id);
        int64_t n = 0;
        for (const auto& t : threads.value()) n += t.op_count;
        ok = threads.isOk() && n >= ops * 9 / 10 && n <= ops * 11 / 10;
      }
    }
  }
  if (!ok) {
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(p + s);
    npuscope::testing::SyntheticRunOptions o;
    o.blocks = blocks;
    o.dumps = false;
    // Ops per step of this layout, measured on a short run.
    o.steps = 20;
    const std::string probe = p + ".probe";
    auto pr = npuscope::testing::writeSyntheticFile(probe, o);
    int64_t probe_ops = 0;
    if (pr.isOk()) {
      auto rd = npuscope::TraceReader::open(probe);
      if (rd.isOk()) {
        auto threads = rd.value()->threads(pr.value().run_id);
        if (threads.isOk()) {
          for (const auto& t : threads.value()) probe_ops += t.op_count;
        }
      }
    }
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(probe + s);
    if (!pr.isOk() || probe_ops == 0) {
      fprintf(stderr, "bench_gui: cannot write %s\n", probe.c_str());
      std::abort();
    }
    o.steps = std::max<int64_t>(1, ops * 20 / probe_ops);
    auto r = npuscope::testing::writeSyntheticFile(p, o);
    if (!r.isOk()) {
      fprintf(stderr, "bench_gui: cannot write %s: %s\n", p.c_str(), r.status().toString().c_str());
      std::abort();
    }
  }
  return p;
}

// /proc/self/status fields in kB.
int64_t procStatusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size());
  }
  return -1;
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

// What a person waits for: the file opened, its latest run loaded, the timeline painted once.
bool openAndPaint(const std::string& path, npuscope::gui::TraceDocument& doc, npuscope::gui::TimelineView& v,
                  QImage& img) {
  if (!doc.open(QString::fromStdString(path)) || !doc.loadRun(doc.runs().front().id, true)) return false;
  v.resize(1600, 900);
  v.setMemoryOverview(doc.memoryOverview());
  v.setData(doc.timeline());
  img = QImage(v.size(), QImage::Format_ARGB32_Premultiplied);
  v.render(&img);
  return true;
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

// First in the binary, so the peak resident memory it reports is its own.
void BM_OpenFirstPaint50M(benchmark::State& state) {
  app();
  int64_t target = 50'000'000;
  if (const char* e = std::getenv("NPUSCOPE_BENCH_GUI_50M_OPS")) target = std::max<int64_t>(100000, std::atoll(e));
  const std::string path = generatedFile("npuscope_bench_gui_50m.db", target, 16);
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";  // resets VmHWM: the generator's memory is not the GUI's
  }
  std::vector<double> first, window;
  int64_t ops = 0, window_ops = 0;
  for (auto _ : state) {
    QElapsedTimer t;
    t.start();
    npuscope::gui::TraceDocument doc;
    npuscope::gui::TimelineView v;
    QImage img;
    if (!openAndPaint(path, doc, v, img)) {
      state.SkipWithError("open failed");
      return;
    }
    first.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
    const npuscope::gui::TimelineData* d = doc.timeline();
    ops = d->totalOps();
    // Zoom to about 1M ops in the middle of the run, as a user would, and let the view ask.
    t.restart();
    const int64_t mid = (d->beginNs() + d->endNs()) / 2;
    int64_t span = d->endNs() - d->beginNs();
    while (span > 1000 && d->estimateOps(mid - span / 2, mid + span / 2) > 500000) span /= 2;
    v.setView(mid - span / 2, static_cast<double>(span) / v.plotWidth());
    const npuscope::TimeWindow w = v.wantedWindow();
    if (w.end_ns <= w.begin_ns || !doc.loadWindow(w, true)) {
      state.SkipWithError("no window was asked for");
      return;
    }
    v.setData(doc.timeline(), true);
    v.render(&img);
    window.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
    window_ops = doc.timeline()->opCount();
    doc.waitForBackground();
  }
  state.counters["open_first_paint_ms_50m_ops"] = median(first);
  state.counters["window_ms_50m_ops"] = median(window);
  state.counters["window_ops"] = static_cast<double>(window_ops);
  state.counters["gui_peak_rss_MB_50m_ops"] = static_cast<double>(procStatusKb("VmHWM")) / 1024.0;
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_OpenFirstPaint50M)->Iterations(3)->Unit(benchmark::kMillisecond);

// Opens `path` each iteration and paints it once (`first`: the median ms), then waits for the
// reads that follow the paint (`every`: the median ms until every op is shown, when given).
void firstPaintLoop(benchmark::State& state, const std::string& path, const char* first, const char* every) {
  std::vector<double> ms, all;
  int64_t ops = 0;
  for (auto _ : state) {
    QElapsedTimer t;
    t.start();
    npuscope::gui::TraceDocument doc;
    npuscope::gui::TimelineView v;
    QImage img;
    if (!openAndPaint(path, doc, v, img)) {
      state.SkipWithError("open failed");
      return;
    }
    ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
    doc.waitForBackground();  // the reads after the first paint, before the next iteration
    all.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
    ops = doc.timeline()->opCount();
  }
  state.counters[first] = median(ms);
  if (every) {
    state.counters[every] = median(all);
    state.counters["ops"] = static_cast<double>(ops);
  }
}

// A 10M-op run: more than a full load holds, fewer than the 50M one; generated once like it.
void BM_OpenFirstPaint10M(benchmark::State& state) {
  app();
  firstPaintLoop(state, generatedFile("npuscope_bench_gui_10m.db", 10'000'000, 16), "open_first_paint_ms_10m_ops",
                 nullptr);
}
BENCHMARK(BM_OpenFirstPaint10M)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_OpenFirstPaint(benchmark::State& state) {
  app();
  firstPaintLoop(state, traceFile(), "open_first_paint_ms_1m_ops", "open_every_op_ms_1m_ops");
}
BENCHMARK(BM_OpenFirstPaint)->Iterations(3)->Unit(benchmark::kMillisecond);

// A run of 100 steps with 1000 device blocks each (100k): persistent parameters and state, and
// per step activations that live into the backward half and temporaries that do not.
const std::string& memoryFile() {
  static std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() / "npuscope_bench_gui_memory.db").string();
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(p + s);
    auto w = npuscope::TraceWriter::open(p);
    if (!w.isOk()) std::abort();
    npuscope::RunInfo info;
    info.model = "memory";
    if (!(*w)->beginRun(info).isOk()) std::abort();
    const int64_t step_ns = 10'000'000;
    int64_t seq = 0;
    std::vector<npuscope::MemoryBlockRecord> blocks;
    auto block = [&](int64_t ns, int64_t size, npuscope::MemoryCategory c, int64_t step) {
      npuscope::MemoryBlockRecord b;
      b.alloc_seq = ++seq;
      b.alloc_ns = ns;
      b.size = b.requested = size;
      b.category = static_cast<uint8_t>(c);
      b.step = step;
      b.op_id = -1;
      return b;
    };
    for (int i = 0; i < 100; ++i) blocks.push_back(block(0, 4 << 20, npuscope::MemoryCategory::kParameter, -1));
    for (int64_t k = 0; k < 100; ++k) {
      npuscope::StepRecord s;
      s.step = k;
      s.start_ns = k * step_ns + 1;
      s.dur_ns = step_ns - 2;
      (*w)->addStep(s);
      std::vector<size_t> open;
      for (int i = 0; i < 1000; ++i) {
        const bool activation = i % 2 == 0;
        blocks.push_back(block(k * step_ns + 10 + i * 4000, (1 + i % 7) << 20,
                               activation ? npuscope::MemoryCategory::kActivation : npuscope::MemoryCategory::kTemporary, k));
        if (!activation) {  // a temporary dies at once
          blocks.back().free_seq = ++seq;
          blocks.back().free_ns = blocks.back().alloc_ns + 1000;
        } else {
          open.push_back(blocks.size() - 1);
        }
      }
      for (size_t i : open) {  // the activations die in the step's backward half
        blocks[i].free_seq = ++seq;
        blocks[i].free_ns = k * step_ns + step_ns / 2 + (blocks[i].alloc_ns - k * step_ns) / 2;
      }
    }
    (*w)->addMemoryBlocks(std::move(blocks));
    if (!(*w)->endRun("completed").isOk() || !(*w)->close().isOk()) std::abort();
    return p;
  }();
  return path;
}

void BM_MemoryTabFirstPaint(benchmark::State& state) {
  app();
  const std::string& path = memoryFile();
  std::vector<double> ms;
  size_t devices = 0;
  for (auto _ : state) {
    QElapsedTimer t;
    t.start();
    npuscope::gui::TraceDocument doc;
    if (!doc.open(QString::fromStdString(path)) || !doc.loadRun(doc.runs().front().id, true)) {
      state.SkipWithError("open failed");
      return;
    }
    npuscope::gui::MemoryView view(&doc);
    view.resize(1600, 900);
    QImage img(view.size(), QImage::Format_ARGB32_Premultiplied);
    view.render(&img);
    ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
    devices = view.devices().size();
    doc.waitForBackground();
  }
  state.counters["memory_tab_first_paint_ms_100k_blocks"] = median(ms);
  state.counters["devices"] = static_cast<double>(devices);
}
BENCHMARK(BM_MemoryTabFirstPaint)->Iterations(3)->Unit(benchmark::kMillisecond);

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
