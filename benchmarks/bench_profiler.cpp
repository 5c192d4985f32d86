// bench_profiler: what recording costs, and how fast the trace store writes and reads.
// Run with --benchmark_format=json; each target is a user counter measured in this run:
//   added_ns_per_op                   add_ on 16 floats on npu, recording on minus no profiler  <= 500
//   ratio_off_vs_none                 the same op, callbacks registered but off / no profiler  <= 1.02
//   ratio_cnn_step_recording_vs_none  a training step of the test CNN, recording / none        <= 1.05
//   ratio_overflow_attribution_vs_tracking  an overflowing fp16 CNN step with float-status tracking,
//                                     the first overflowing op described and recorded / tracking only <= 1.05
//   writer_rows_per_s                 sustained op rows into SQLite by the TraceWriter          >= 1e6
//   ratio_new_file_vs_migrations      a new trace file (the current schema as one script) / the
//                                     same file built from schema 1 by the migrations              <= 0.75
//   report_seconds_10m_ops            the op table over a generated 10M-op file                <= 1
// Reference figures (no target; what this host gives any recorder, measured in the same run):
//   callback_floor_ns_per_op          the same add_ with a do-nothing callback registered as the
//                                     recorder's (scopes, inputs boxed) minus no profiler: libtorch's
//                                     own cost of observing an op, under added_ns_per_op
//   ratio_cnn_step_callback_floor_vs_none  the CNN step with that callback / none
//   sqlite_plain_rows_per_s           the writer's rows inserted by a plain loop (one transaction,
//                                     32-row bound INSERTs with their ids) into a new trace file
//   ratio_writer_vs_sqlite_plain      writer_rows_per_s / sqlite_plain_rows_per_s
// "No profiler" means the callbacks are not registered with libtorch at all; the blocks of the
// two variants alternate (ratio.h), so the ratios hold even on a busy machine.
#include <sqlite3.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "ratio.h"
#include "npuscope/store/clock.h"
#include "npuscope/store/database.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/device/npu.h"
#include "npuscope/profiler/session.h"
#include "src/op_recorder.h"
#include "npuscope/workloads/models.h"

namespace npuscope {
namespace {

using bench::RatioResult;
namespace prof = profiler;

std::string tempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/npuscope_bench_" + std::to_string(getpid()) + "_" + name;
  for (const char* s : {"", "-wal", "-shm"}) std::remove((path + s).c_str());
  return path;
}

void removeFile(const std::string& path) {
  for (const char* s : {"", "-wal", "-shm"}) std::remove((path + s).c_str());
}

using bench::alternateBlocks;

// A session into a scratch file, for the length of one benchmark.
struct ScratchSession {
  std::string path;
  std::unique_ptr<prof::RecordingSession> session;
  explicit ScratchSession(const std::string& name) : path(tempPath(name)) {
    prof::SessionOptions o;
    o.path = path;
    o.run.command = "bench_profiler";
    auto s = prof::RecordingSession::start(o);
    if (!s.isOk()) {
      std::fprintf(stderr, "bench_profiler: %s\n", s.status().message().c_str());
      std::exit(1);
    }
    session = std::move(*s);
  }
  ~ScratchSession() {
    (void)session->stop();
    session.reset();
    removeFile(path);
  }
};

void recordingOn() { prof::recorder::setMode(true, true); }
void recordingOff() { prof::recorder::setMode(false, false); }
void noProfiler() { prof::recorder::removeCallbacksForBaseline(); }

void BM_SmallOpRecording(benchmark::State& state) {
  at::Tensor a = at::ones({16}).to(npu::device(0));
  at::Tensor b = at::ones({16}).to(npu::device(0));
  ScratchSession s("small_op.db");
  auto op = [&] { a.add_(b, 1e-9); };
  const RatioResult r = alternateBlocks(state, recordingOn, op, noProfiler, op, 2000);
  state.counters["added_ns_per_op"] = r.pair_diff_ns;
  state.counters["recording_ns_per_op"] = r.a_ns;
  state.counters["none_ns_per_op"] = r.b_ns;
  state.counters["dropped_records"] = static_cast<double>(s.session->droppedRecords());
}
BENCHMARK(BM_SmallOpRecording)->Iterations(200)->Unit(benchmark::kMillisecond);

void BM_SmallOpOff(benchmark::State& state) {
  at::Tensor a = at::ones({16}).to(npu::device(0));
  at::Tensor b = at::ones({16}).to(npu::device(0));
  ScratchSession s("off.db");
  auto op = [&] { a.add_(b, 1e-9); };
  const RatioResult r = alternateBlocks(state, recordingOff, op, noProfiler, op, 2000);
  bench::reportRatio(state, "ratio_off_vs_none", r, "off", "none");
}
BENCHMARK(BM_SmallOpOff)->Iterations(200)->Unit(benchmark::kMillisecond);

void floorOn() {
  noProfiler();
  prof::recorder::setFloorCallback(true);
}
void floorOff() {
  noProfiler();
  prof::recorder::setFloorCallback(false);
}

void BM_SmallOpCallbackFloor(benchmark::State& state) {
  at::Tensor a = at::ones({16}).to(npu::device(0));
  at::Tensor b = at::ones({16}).to(npu::device(0));
  auto op = [&] { a.add_(b, 1e-9); };
  const RatioResult r = alternateBlocks(state, floorOn, op, floorOff, op, 2000);
  floorOff();
  state.counters["callback_floor_ns_per_op"] = r.pair_diff_ns;
}
BENCHMARK(BM_SmallOpCallbackFloor)->Iterations(200)->Unit(benchmark::kMillisecond);

// The test CNN on npu:0 (seed 0) in `dtype`, or null with the benchmark skipped.
std::shared_ptr<workloads::Model> cnnOnNpu(benchmark::State& state, at::ScalarType dtype) {
  torch::manual_seed(0);
  auto model = workloads::makeModel("cnn");
  if (!model.isOk()) {
    state.SkipWithError(model.status().message().c_str());
    return nullptr;
  }
  std::shared_ptr<workloads::Model> net = *model;
  net->to(npu::device(0), dtype);
  return net;
}

// The bench's fp32 training step: the CNN with SGD on one batch.
struct CnnStep {
  std::shared_ptr<workloads::Model> net;
  std::unique_ptr<torch::optim::SGD> opt;
  at::Tensor x, y;
  explicit CnnStep(benchmark::State& state) : net(cnnOnNpu(state, at::kFloat)) {
    if (!net) return;
    opt = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    x = at::randn({64, 1, 28, 28}).to(npu::device(0));
    y = at::randint(0, 10, {64}, at::kLong).to(npu::device(0));
  }
  at::Tensor train() {
    opt->zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt->step();
    return loss;
  }
};

void BM_CnnStepRecording(benchmark::State& state) {
  CnnStep cnn(state);
  if (!cnn.net) return;
  ScratchSession s("cnn.db");
  auto recorded = [&] {
    at::Tensor loss = cnn.train();
    s.session->step(prof::StepMetrics{loss.item<double>()});
  };
  auto plain = [&] { (void)cnn.train().item<double>(); };
  const RatioResult r = alternateBlocks(state, recordingOn, recorded, noProfiler, plain, 3);
  bench::reportRatio(state, "ratio_cnn_step_recording_vs_none", r, "recording", "none");
}
BENCHMARK(BM_CnnStepRecording)->Iterations(40)->Unit(benchmark::kMillisecond);

void BM_CnnStepCallbackFloor(benchmark::State& state) {
  CnnStep cnn(state);
  if (!cnn.net) return;
  auto plain = [&] { (void)cnn.train().item<double>(); };
  const RatioResult r = alternateBlocks(state, floorOn, plain, floorOff, plain, 3);
  floorOff();
  bench::reportRatio(state, "ratio_cnn_step_callback_floor_vs_none", r, "floor", "none");
}
BENCHMARK(BM_CnnStepCallbackFloor)->Iterations(40)->Unit(benchmark::kMillisecond);

// An O2-style step of the test CNN (fp16 weights and activations, fp32 loss) whose scaled loss
// overflows in backward every step, so the step is skipped as AMP skips it (no optimizer step):
// with float-status tracking on, the session's observer describes and records the step's first
// overflowing op (A) or no observer is set (B: tracking alone, as before attribution existed).
void BM_OverflowAttribution(benchmark::State& state) {
  std::shared_ptr<workloads::Model> net = cnnOnNpu(state, at::kHalf);
  if (!net) return;
  const at::Tensor x = at::randn({64, 1, 28, 28}).to(at::kHalf).to(npu::device(0));
  const at::Tensor y = at::randint(0, 10, {64}, at::kLong).to(npu::device(0));
  npu::set_float_status_tracking(true);
  ScratchSession s("overflow.db");
  const npu::OverflowSiteObserver observer = npu::overflow_site_observer();  // the session's
  int overflowed = 0;
  auto step = [&] {
    net->zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x).to(at::kFloat), y);
    (loss * 1e9).backward();  // a loss scale far too large: fp16 gradients overflow
    overflowed += npu::get_float_status(0);
    npu::clear_float_status(0);
    s.session->step(prof::StepMetrics{loss.item<double>()});
  };
  const RatioResult r = alternateBlocks(
      state, [&] { recordingOn(); npu::set_overflow_site_observer(observer); }, step,
      [&] { recordingOn(); npu::set_overflow_site_observer(nullptr); }, step, 3);
  bench::reportRatio(state, "ratio_overflow_attribution_vs_tracking", r, "attribution", "tracking");
  state.counters["overflow_steps"] = overflowed;
  npu::set_float_status_tracking(false);
}
BENCHMARK(BM_OverflowAttribution)->Iterations(30)->Unit(benchmark::kMillisecond);

// Op records shaped like a training step's: a top-level op with three children, the middle one
// with two of its own, on two threads; 40 names and 100 shape lists.
struct SyntheticOps {
  std::vector<uint32_t> names, shapes;
  int64_t next_id = 1, t = 1000;
  SyntheticOps() {
    for (int i = 0; i < 40; ++i) names.push_back(StringTable::global().intern("aten::bench_op_" + std::to_string(i)));
    for (int i = 0; i < 100; ++i) {
      shapes.push_back(StringTable::global().intern("[[" + std::to_string(i + 1) + ", 64], [64, 64]]"));
    }
  }
  OpRecord make(int64_t parent, int64_t start, int64_t dur, uint64_t thread, int depth, bool leaf) {
    OpRecord r;
    r.id = next_id++;
    r.parent_id = parent;
    r.start_ns = start;
    r.dur_ns = dur;
    r.thread_id = thread;
    r.depth = static_cast<int16_t>(depth);
    r.step = static_cast<int32_t>(r.id / 20000);
    r.name_id = names[static_cast<size_t>(r.id * 7919) % names.size()];
    r.shapes_id = shapes[static_cast<size_t>(r.id * 104729) % shapes.size()];
    r.seq_nr = depth == 0 ? r.id : -1;
    r.is_backward = thread == 2;
    if (leaf) {
      r.device = 0;
      r.device_start_ns = start;
      r.device_dur_ns = dur / 2;
    }
    return r;
  }
  // Appends one tree (6 ops) per thread to `out`.
  void trees(std::vector<OpRecord>& out) {
    for (uint64_t thread = 1; thread <= 2; ++thread) {
      const OpRecord top = make(-1, t, 1000, thread, 0, false);
      out.push_back(top);
      for (int c = 0; c < 3; ++c) {
        const int64_t start = t + 10 + c * 300;
        const OpRecord child = make(top.id, start, 250, thread, 1, c != 1);
        out.push_back(child);
        if (c == 1) {
          for (int g = 0; g < 2; ++g) out.push_back(make(child.id, start + 5 + g * 100, 90, thread, 2, true));
        }
      }
      t += 1100;
    }
  }
};

// Writes `rows` synthetic ops into `path` through a TraceWriter; returns the seconds from the
// first buffer handed over to the last row committed.
double writeSynthetic(const std::string& path, int64_t rows) {
  TraceWriter::Options options;
  options.max_queued_buffers = static_cast<size_t>(rows / OpBuffer::kCapacity + 2);
  auto w = TraceWriter::open(path, options);
  if (!w.isOk()) {
    std::fprintf(stderr, "bench_profiler: %s\n", w.status().message().c_str());
    std::exit(1);
  }
  RunInfo info;
  info.command = "bench_profiler synthetic";
  if (!(*w)->beginRun(info).isOk()) std::exit(1);
  SyntheticOps gen;
  std::vector<OpRecord> recs;
  recs.reserve(static_cast<size_t>(rows) + 16);
  while (static_cast<int64_t>(recs.size()) < rows) gen.trees(recs);
  recs.resize(static_cast<size_t>(rows));
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<OpBuffer> buf = (*w)->takeBuffer();
  for (const OpRecord& r : recs) {
    buf->records[buf->size++] = r;
    if (buf->full()) (*w)->submit(buf);
  }
  (*w)->submit(buf);
  if (!(*w)->flush().isOk()) std::exit(1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if ((*w)->droppedRecords() != 0) std::fprintf(stderr, "bench_profiler: the writer dropped records\n");
  (void)(*w)->endRun("completed");
  return s;
}

// The same rows by a plain loop: a new trace file, one transaction, 32-row INSERTs with every
// column bound (ids too), as a program would write them with SQLite alone. Returns the seconds
// from the first INSERT to the commit.
double writePlain(const std::string& path, int64_t rows) {
  auto db = openTraceDatabase(path, OpenMode::kReadWrite);
  if (!db.isOk()) {
    std::fprintf(stderr, "bench_profiler: %s\n", db.status().message().c_str());
    std::exit(1);
  }
  sqlite3* h = db->get();
  if (!execSql(h, "INSERT INTO runs(started_ns, wall_start_ns) VALUES (0, 0)").isOk()) std::exit(1);
  constexpr int kCols = 17, kRows = 32;
  std::string sql = "INSERT INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth, parent_id,"
                    " seq_nr, is_backward, shapes_id, dtypes_id, device, device_start_ns, device_dur_ns, host_sync)"
                    " VALUES ";
  for (int r = 0; r < kRows; ++r) sql += std::string(r ? "," : "") + "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  auto st = prepare(h, sql);
  if (!st.isOk()) std::exit(1);
  SyntheticOps gen;
  std::vector<OpRecord> recs;
  recs.reserve(static_cast<size_t>(rows) + 16);
  while (static_cast<int64_t>(recs.size()) < rows) gen.trees(recs);
  recs.resize(static_cast<size_t>(rows - rows % kRows));
  std::sort(recs.begin(), recs.end(), [](const OpRecord& a, const OpRecord& b) { return a.id < b.id; });
  auto opt = [&](int col, int64_t v) {
    if (v < 0) {
      sqlite3_bind_null(st->get(), col);
    } else {
      sqlite3_bind_int64(st->get(), col, v);
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (!execSql(h, "BEGIN").isOk()) std::exit(1);
  for (size_t at = 0; at < recs.size(); at += kRows) {
    for (int k = 0; k < kRows; ++k) {
      const OpRecord& r = recs[at + static_cast<size_t>(k)];
      const int c = k * kCols;
      sqlite3_bind_int64(st->get(), c + 1, r.id);
      sqlite3_bind_int64(st->get(), c + 2, 1);
      opt(c + 3, r.step);
      sqlite3_bind_int64(st->get(), c + 4, r.name_id);
      sqlite3_bind_int64(st->get(), c + 5, r.start_ns);
      sqlite3_bind_int64(st->get(), c + 6, r.dur_ns);
      sqlite3_bind_int64(st->get(), c + 7, static_cast<int64_t>(r.thread_id));
      sqlite3_bind_int64(st->get(), c + 8, r.depth);
      opt(c + 9, r.parent_id);
      opt(c + 10, r.seq_nr);
      sqlite3_bind_int64(st->get(), c + 11, r.is_backward);
      opt(c + 12, r.shapes_id == 0 ? -1 : r.shapes_id);
      opt(c + 13, r.dtypes_id == 0 ? -1 : r.dtypes_id);
      opt(c + 14, r.device);
      opt(c + 15, r.device_start_ns);
      opt(c + 16, r.device_dur_ns);
      opt(c + 17, r.host_sync ? 1 : -1);
    }
    if (sqlite3_step(st->get()) != SQLITE_DONE) {
      std::fprintf(stderr, "bench_profiler: plain insert: %s\n", sqlite3_errmsg(h));
      std::exit(1);
    }
    sqlite3_reset(st->get());
  }
  if (!execSql(h, "COMMIT").isOk()) std::exit(1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s * static_cast<double>(rows) / static_cast<double>(recs.size());
}

// The writer and the plain loop alternate, each file new, so the ratio pairs runs of the same
// moment of this host.
void BM_WriterRows(benchmark::State& state) {
  const int64_t rows = 2'000'000;
  std::vector<double> rates, plain, ratios;
  bool writer_first = true;
  for (auto _ : state) {
    const std::string path = tempPath("writer.db");
    const std::string plain_path = tempPath("plain.db");
    double w = 0, p = 0;
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == writer_first) {
        w = static_cast<double>(rows) / writeSynthetic(path, rows);
      } else {
        p = static_cast<double>(rows) / writePlain(plain_path, rows);
      }
    }
    writer_first = !writer_first;
    rates.push_back(w);
    plain.push_back(p);
    ratios.push_back(w / p);
    removeFile(path);
    removeFile(plain_path);
  }
  state.counters["writer_rows_per_s"] = bench::medianOf(rates);
  state.counters["sqlite_plain_rows_per_s"] = bench::medianOf(plain);
  state.counters["ratio_writer_vs_sqlite_plain"] = bench::medianOf(ratios);
}
BENCHMARK(BM_WriterRows)->Iterations(3)->Unit(benchmark::kMillisecond);

// Rows of the run's stored op table (op_totals, schema 13): a file written before has none, and
// its report scans every op; such a file is not the one this figure is about.
int64_t storedOpTableRows(TraceReader& reader, int64_t run_id) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(reader.db(), "SELECT count(*) FROM op_totals WHERE run_id = ?", -1, &st, nullptr) != SQLITE_OK) {
    sqlite3_finalize(st);
    return 0;  // no such table: an older file
  }
  sqlite3_bind_int64(st, 1, run_id);
  const int64_t rows = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return rows;
}

// The 10M-op file is generated once per machine (NPUSCOPE_BENCH_10M names it; default in /tmp)
// and reused while it holds 10M ops of run 1 and their stored op table.
void BM_Report10MOps(benchmark::State& state) {
  const int64_t ops = 10'000'000;
  const char* env = std::getenv("NPUSCOPE_BENCH_10M");
  const std::string path = env ? env : "/tmp/npuscope_bench_10m_ops.db";
  bool ready = false;
  if (auto r = TraceReader::open(path); r.isOk()) {
    if (auto runs = (*r)->runs(); runs.isOk() && runs->size() == 1) {
      OpAggregateQuery q;
      q.run_id = runs->front().id;
      q.top_n = 1;
      auto t = (*r)->opAggregates(q);
      ready = t.isOk() && t->op_count == ops && storedOpTableRows(**r, q.run_id) > 0;
    }
  }
  if (!ready) {
    removeFile(path);
    const double s = writeSynthetic(path, ops);
    std::fprintf(stderr, "bench_profiler: generated %s (%lld ops) in %.1f s\n", path.c_str(),
                 static_cast<long long>(ops), s);
  }
  auto reader = TraceReader::open(path);
  if (!reader.isOk()) {
    state.SkipWithError(reader.status().message().c_str());
    return;
  }
  auto run = (*reader)->latestRun();
  std::vector<double> secs;
  for (auto _ : state) {
    OpAggregateQuery q;
    q.run_id = run->id;
    const auto t0 = std::chrono::steady_clock::now();
    auto table = (*reader)->opAggregates(q);
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!table.isOk() || table->op_count != ops) {
      state.SkipWithError("the op table did not cover the 10M ops");
      return;
    }
  }
  state.counters["report_seconds_10m_ops"] = bench::medianOf(secs);
}
BENCHMARK(BM_Report10MOps)->Iterations(3)->Unit(benchmark::kMillisecond);

// A new trace file: openTraceDatabase gives it the current schema as one script (written at build
// time); before, it ran every migration from schema 1 (each ALTER TABLE reloads the whole
// schema). The migrations are what an old file still takes: schema 1 from
// store/schema/001_initial.sql, then the rest in one transaction.
void BM_NewTraceFile(benchmark::State& state) {
  std::ifstream in(std::string(NPUSCOPE_SCHEMA_DIR) + "/001_initial.sql");
  const std::string v1((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (v1.empty()) {
    state.SkipWithError("001_initial.sql not found");
    return;
  }
  const std::string a = tempPath("new_file.db"), b = tempPath("migrated_file.db");
  auto check = [](const StatusOr<ScopedDb>& db) {
    if (!db.isOk()) {
      std::fprintf(stderr, "bench_profiler: %s\n", db.status().message().c_str());
      std::exit(1);
    }
  };
  const RatioResult r = alternateBlocks(
      state, [&] { removeFile(a); },
      [&] {
        removeFile(a);
        check(openTraceDatabase(a, OpenMode::kReadWrite));
      },
      [&] { removeFile(b); },
      [&] {
        removeFile(b);
        sqlite3* raw = nullptr;
        sqlite3_open(b.c_str(), &raw);
        ScopedDb v1_db(raw);
        (void)execSql(v1_db.get(), "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; BEGIN;" + v1 +
                                       ";PRAGMA user_version=1; COMMIT;");
        v1_db.reset();
        check(openTraceDatabase(b, OpenMode::kReadWrite));
      },
      20);
  removeFile(a);
  removeFile(b);
  bench::reportRatio(state, "ratio_new_file_vs_migrations", r, "new_file", "migrations");
}
BENCHMARK(BM_NewTraceFile)->Iterations(20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace npuscope

BENCHMARK_MAIN();
