// Chrome trace export: the JSON parses, every X event carries name/ph/ts/dur/pid/tid, slices on
// a track nest (a child sticking out of its parent is clamped), step slices, counters, the
// modeled device stream and metadata are there, args follow Kineto's keys, and a run larger
// than the size limit splits by time into files that are each a valid trace.
#include <sqlite3.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "npuscope/analysis/chrome_trace.h"
#include "npuscope/store/clock.h"
#include "npuscope/store/database.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"
#include "support/chrome_trace_checks.h"

namespace npuscope {
namespace {

using nlohmann::json;
using namespace npuscope::testing_support;  // ns, Slice, nestingError, checkedSlices

std::string tempPath(const std::string& name) {
  std::string p = testing::TempDir() + "/npuscope_ct_" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((p + suffix).c_str());
  return p;
}

bool exists(const std::string& p) { return std::ifstream(p).good(); }

uint64_t fileSize(const std::string& p) {
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  return static_cast<uint64_t>(in.tellg());
}

json parseFile(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);  // throws (and fails the test) on invalid JSON
}


TEST(ChromeTrace, NestingCheckCatchesPartialOverlap) {
  // The checker the other tests rely on must itself fail on a bad track.
  EXPECT_EQ(nestingError({{0, 100, "a"}, {10, 50, "b"}, {50, 100, "c"}, {100, 120, "d"}}), "");
  EXPECT_NE(nestingError({{0, 100, "a"}, {10, 103, "b"}}), "");
  EXPECT_NE(nestingError({{0, 100, "a"}, {50, 150, "b"}}), "");
}

TEST(ChromeTrace, PartPaths) {
  EXPECT_EQ(chromeTracePartPath("/x/t.json", 0), "/x/t.json");
  EXPECT_EQ(chromeTracePartPath("/x/t.json", 2), "/x/t.2.json");
  EXPECT_EQ(chromeTracePartPath("/x/t", 1), "/x/t.1");
}

int64_t intern(sqlite3* db, const std::string& s) {
  auto ins = prepare(db, "INSERT OR IGNORE INTO strings(value) VALUES (?1)");
  sqlite3_bind_text(ins->get(), 1, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(ins->get()), SQLITE_DONE);
  auto sel = prepare(db, "SELECT id FROM strings WHERE value=?1");
  sqlite3_bind_text(sel->get(), 1, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(sel->get()), SQLITE_ROW);
  return sqlite3_column_int64(sel->get(), 0);
}

const char kWeirdName[] = "weird \"op\"\n\\ \xff end";

// Run 1 starts at 1000 ns. Step 0 = [1500, 4000), step 1 = [4000, 5000).
// thread 7 (main): linear#1 [2000,3000) > addmm#2 [2100,3003) (sticks out by 3 ns);
//   weird#3 [3100,3200); relu#4 [3900,4100) (crosses the step boundary); mul#5 [4200,4300) seq 5;
//   outer#9 [4700,4800) > inner#8 [4700,4750) (same start, the child has the smaller id)
// thread 9 (backward): MulBackward0#6 [4400,4600) seq 5 > mul#7 [4450,4550)
// npu:0 modeled: addmm [2200,2700), mul#5 [4250,4300), mul#7 [4500,4540)
std::string buildFixture(const std::string& name) {
  const std::string p = tempPath(name);
  auto db = openTraceDatabase(p, OpenMode::kReadWrite);
  EXPECT_TRUE(db.isOk());
  sqlite3* d = db->get();
  EXPECT_TRUE(execSql(d,
                      "INSERT INTO runs(id, started_ns, wall_start_ns, status, model, opt_level)"
                      " VALUES (1, 1000, 0, 'completed', 'cnn', 'O2');"
                      "INSERT INTO steps(run_id, step, start_ns, dur_ns, loss, loss_scale, overflow, skipped)"
                      " VALUES (1, 0, 1500, 2500, 1.25, 65536, 0, 0), (1, 1, 4000, 1000, NULL, 32768, 1, 1);"
                      "INSERT INTO memory(run_id, ts_ns, device, allocated, reserved)"
                      " VALUES (1, 2000, 0, 100, 200), (1, 4300, 0, 150, 200);")
                  .isOk());
  const int64_t shapes = intern(d, "[[2, 3], [3, 4]]");
  const int64_t odd_shapes = intern(d, "[[2, 3], <opaque>]");
  const int64_t dtypes = intern(d, "float, Scalar, ");
  struct Row {
    int64_t id, parent;
    std::string name;
    int64_t start, dur, thread, depth, step, seq;
    bool bwd;
    int64_t shapes, device, dev_start, dev_dur;
  };
  const std::vector<Row> rows = {
      {1, -1, "aten::linear", 2000, 1000, 7, 0, 0, 4, false, shapes, -1, -1, -1},
      {2, 1, "aten::addmm", 2100, 903, 7, 1, 0, -1, false, odd_shapes, 0, 2200, 500},
      {3, -1, kWeirdName, 3100, 100, 7, 0, 0, -1, false, -1, -1, -1, -1},
      {4, -1, "aten::relu", 3900, 200, 7, 0, 0, -1, false, -1, -1, -1, -1},
      {5, -1, "aten::mul", 4200, 100, 7, 0, 1, 5, false, -1, 0, 4250, 50},
      {6, -1, "MulBackward0", 4400, 200, 9, 0, 1, 5, true, -1, -1, -1, -1},
      {7, 6, "aten::mul", 4450, 100, 9, 1, 1, -1, true, -1, 0, 4500, 40},
      {8, 9, "inner", 4700, 50, 7, 1, 1, -1, false, -1, -1, -1, -1},
      {9, -1, "outer", 4700, 100, 7, 0, 1, -1, false, -1, -1, -1, -1},
  };
  auto st = prepare(d,
                    "INSERT INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth, parent_id,"
                    " seq_nr, is_backward, shapes_id, dtypes_id, device, device_start_ns, device_dur_ns)"
                    " VALUES (?1,1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)");
  EXPECT_TRUE(st.isOk());
  for (const Row& r : rows) {
    sqlite3_stmt* s = st->get();
    sqlite3_reset(s);
    auto opt = [&](int col, int64_t v) {
      if (v < 0) sqlite3_bind_null(s, col);
      else sqlite3_bind_int64(s, col, v);
    };
    sqlite3_bind_int64(s, 1, r.id);
    sqlite3_bind_int64(s, 2, r.step);
    sqlite3_bind_int64(s, 3, intern(d, r.name));
    sqlite3_bind_int64(s, 4, r.start);
    sqlite3_bind_int64(s, 5, r.dur);
    sqlite3_bind_int64(s, 6, r.thread);
    sqlite3_bind_int64(s, 7, r.depth);
    opt(8, r.parent);
    opt(9, r.seq);
    sqlite3_bind_int64(s, 10, r.bwd);
    opt(11, r.shapes);
    opt(12, r.shapes == shapes ? dtypes : -1);
    opt(13, r.device);
    opt(14, r.dev_start);
    opt(15, r.dev_dur);
    EXPECT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(d);
  }
  return p;
}

std::unique_ptr<TraceReader> openReader(const std::string& p) {
  auto r = TraceReader::open(p);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.isOk() ? std::move(r).value() : nullptr;
}

// A recorded slice (cat "predicted": a slice of the predicted host lane).
const json* findX(const std::vector<json>& xs, const std::string& name, int64_t external_id = -1,
                  bool predicted = false) {
  for (const json& e : xs) {
    if ((e["cat"] == "predicted") != predicted) continue;
    if (e["name"] == name && (external_id < 0 || e["args"].value("External id", int64_t{-1}) == external_id)) return &e;
  }
  return nullptr;
}

TEST(ChromeTrace, ExportParsesNestsAndCarriesEverything) {
  auto reader = openReader(buildFixture("full.db"));
  ASSERT_TRUE(reader);
  const std::string out = tempPath("full.json");
  auto sum = exportChromeTrace(*reader, out);
  ASSERT_TRUE(sum.isOk()) << sum.status().message();
  ASSERT_EQ(sum->files, std::vector<std::string>{out});
  EXPECT_EQ(sum->op_events, 9);
  EXPECT_EQ(sum->step_events, 2);
  EXPECT_EQ(sum->device_events, 3);
  EXPECT_EQ(sum->counter_events, 5);  // 2 memory, 2 loss scale, 1 loss (step 1 has none)
  EXPECT_EQ(sum->clamped_slices, 2);  // addmm#2 by 3 ns, relu#4 at the step boundary
  EXPECT_EQ(sum->base_ns, 1000);

  const json trace = parseFile(out);
  const std::vector<json> xs = checkedSlices(trace);
  EXPECT_EQ(sum->predicted_host_events, 9);  // every op of the two steps: none is inside a kernel
  ASSERT_EQ(xs.size(), 9u + 2u + 3u + 9u);

  // Times: µs relative to the run start; the sticking-out child ends with its parent.
  const json* linear = findX(xs, "aten::linear");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(ns((*linear)["ts"]), 1000);
  EXPECT_EQ(ns((*linear)["dur"]), 1000);
  EXPECT_EQ((*linear)["cat"], "cpu_op");
  EXPECT_EQ((*linear)["tid"], 7);
  const json* addmm = findX(xs, "aten::addmm", 2);
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(ns((*addmm)["dur"]), 900);
  const json* relu = findX(xs, "aten::relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(ns((*relu)["ts"]) + ns((*relu)["dur"]), 3000);  // clamped to step 0's end (4000 - 1000)

  // Kineto-style args.
  const json& la = (*linear)["args"];
  EXPECT_EQ(la["Input Dims"], json::parse("[[2, 3], [3, 4]]"));
  EXPECT_EQ(la["Input type"], json::parse(R"(["float", "Scalar", ""])"));
  EXPECT_EQ(la["Sequence number"], 4);
  EXPECT_EQ(la["External id"], 1);
  EXPECT_EQ(la["Step"], 0);
  EXPECT_EQ((*addmm)["args"]["Input Dims"], "[[2, 3], <opaque>]");  // not JSON: kept as a string
  EXPECT_EQ((*addmm)["args"]["Parent id"], 1);
  EXPECT_EQ((*addmm)["args"]["Device"], "npu:0");
  EXPECT_EQ(ns((*addmm)["args"]["Device dur (modeled) us"]), 500);
  const json* bwd = findX(xs, "MulBackward0");
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ((*bwd)["args"]["Backward"], 1);
  EXPECT_EQ((*bwd)["args"]["Sequence number"], 5);
  EXPECT_EQ((*bwd)["args"]["Fwd thread id"], 7);
  EXPECT_EQ((*bwd)["tid"], 9);
  // Quotes, control characters and invalid UTF-8 (replaced by U+FFFD) survive as valid JSON.
  EXPECT_NE(findX(xs, "weird \"op\"\n\\ \xef\xbf\xbd end"), nullptr);

  // Step slices on the main thread.
  const json* s0 = findX(xs, "ProfilerStep#0");
  const json* s1 = findX(xs, "ProfilerStep#1");
  ASSERT_TRUE(s0 && s1);
  EXPECT_EQ((*s0)["cat"], "user_annotation");
  EXPECT_EQ((*s0)["tid"], 7);
  EXPECT_EQ((*s0)["pid"], (*linear)["pid"]);
  EXPECT_EQ(ns((*s0)["ts"]), 500);
  EXPECT_EQ(ns((*s0)["dur"]), 2500);
  EXPECT_EQ((*s0)["args"]["Loss scale"], 65536.0);
  EXPECT_EQ((*s1)["args"]["Overflow"], 1);

  // The predicted timeline (default HostModelParams), step 0 placed at its recorded start (ts
  // 500): linear is a composite (2 us), addmm is dispatched (10 us) and enqueued (1.5 us), the
  // launch thread launches it 8 us later: host slice 2.5..14 us, kernel at 500 + 21500 ns.
  const json* p_addmm = findX(xs, "aten::addmm", 2, true);
  ASSERT_NE(p_addmm, nullptr);
  EXPECT_EQ((*p_addmm)["pid"], (*linear)["pid"]);
  EXPECT_NE((*p_addmm)["tid"], (*linear)["tid"]);
  EXPECT_EQ(ns((*p_addmm)["ts"]), 2500);
  EXPECT_EQ(ns((*p_addmm)["dur"]), 11500);
  EXPECT_EQ((*p_addmm)["args"]["Step"], 0);

  // The predicted device stream: its own process and thread.
  std::vector<const json*> kernels;
  for (const json& e : xs) {
    if (e["cat"] == "kernel") kernels.push_back(&e);
  }
  ASSERT_EQ(kernels.size(), 3u);
  for (const json* k : kernels) {
    EXPECT_NE((*k)["pid"], (*linear)["pid"]);
    EXPECT_EQ((*k)["pid"], (*kernels[0])["pid"]);
    EXPECT_EQ((*k)["tid"], (*kernels[0])["tid"]);
  }
  EXPECT_EQ(ns((*kernels[0])["ts"]), 22000);
  EXPECT_EQ(ns((*kernels[0])["dur"]), 500);
  EXPECT_EQ((*kernels[0])["args"]["External id"], 2);

  // Metadata and counters.
  std::set<std::string> thread_names, counters;
  bool device_process = false;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "npu:0") {
      device_process = e["pid"] == (*kernels[0])["pid"];
    }
    if (e["ph"] == "C") {
      counters.insert(e["name"].get<std::string>());
      EXPECT_TRUE(e.contains("ts") && e.contains("pid") && e["args"].is_object()) << e.dump();
    }
  }
  EXPECT_TRUE(thread_names.count("thread 7 (main)"));
  EXPECT_TRUE(thread_names.count("thread 9 (backward)"));
  EXPECT_TRUE(thread_names.count("npu:0 stream (predicted)"));
  EXPECT_TRUE(thread_names.count("host (predicted, a real npu)"));
  EXPECT_TRUE(device_process);
  EXPECT_EQ(counters, (std::set<std::string>{"Memory npu:0", "Loss scale", "Loss"}));
}

TEST(ChromeTrace, EqualStartsPutTheParentFirst) {
  auto reader = openReader(buildFixture("order.db"));
  ASSERT_TRUE(reader);
  const std::string out = tempPath("order.json");
  ASSERT_TRUE(exportChromeTrace(*reader, out).isOk());
  const json trace = parseFile(out);
  // In file order, "outer" (the parent, larger id) comes before "inner" at the same ts.
  int outer = -1, inner = -1, i = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "outer") outer = i;
    if (e["ph"] == "X" && e["name"] == "inner") inner = i;
    ++i;
  }
  ASSERT_GE(outer, 0);
  ASSERT_GE(inner, 0);
  EXPECT_LT(outer, inner);
}

TEST(ChromeTrace, WindowAndOptionsLimitTheExport) {
  auto reader = openReader(buildFixture("window.db"));
  ASSERT_TRUE(reader);
  ChromeTraceOptions o;
  o.window = TimeWindow{4000, 10000};
  o.device_stream = false;
  o.memory_counters = false;
  const std::string out = tempPath("window.json");
  auto sum = exportChromeTrace(*reader, out, o);
  ASSERT_TRUE(sum.isOk()) << sum.status().message();
  EXPECT_EQ(sum->op_events, 5);  // mul#5, MulBackward0#6, mul#7, inner#8, outer#9
  EXPECT_EQ(sum->step_events, 1);
  EXPECT_EQ(sum->device_events, 0);
  EXPECT_EQ(sum->counter_events, 1);  // step 1's loss scale
  checkedSlices(parseFile(out));
  o.run_id = 42;
  EXPECT_EQ(exportChromeTrace(*reader, out, o).status().code(), StatusCode::kNotFound);
}

// A run written through the TraceWriter, exported under a tiny size limit.
TEST(ChromeTrace, LargeRunsSplitIntoValidFilesByTime) {
  const std::string db = tempPath("split.db");
  constexpr int kSteps = 20, kTreesPerStep = 25;
  int64_t total_ops = 0;
  {
    auto w = TraceWriter::open(db);
    ASSERT_TRUE(w.isOk());
    RunInfo info;
    info.started_ns = 1000000;
    ASSERT_TRUE((*w)->beginRun(info).isOk());
    const uint32_t fwd = StringTable::global().intern("split::forward");
    const uint32_t kern = StringTable::global().intern("split::kernel");
    const uint32_t bwd = StringTable::global().intern("split::Backward");
    auto buf = (*w)->takeBuffer();
    int64_t id = 5000000, t = 1000000, dev = 1000000;
    for (int s = 0; s < kSteps; ++s) {
      const int64_t step_start = t;
      for (int k = 0; k < kTreesPerStep; ++k) {
        for (int thread = 1; thread <= 2; ++thread) {
          OpRecord parent;
          parent.id = ++id;
          parent.start_ns = t;
          parent.dur_ns = 1000;
          parent.thread_id = static_cast<uint64_t>(thread);
          parent.step = s;
          parent.seq_nr = k;
          parent.is_backward = thread == 2;
          parent.name_id = thread == 2 ? bwd : fwd;
          OpRecord child = parent;
          child.id = ++id;
          child.parent_id = parent.id;
          child.start_ns = t + 100;
          child.dur_ns = 905;  // sticks out of the parent by 5 ns
          child.depth = 1;
          child.seq_nr = -1;
          child.name_id = kern;
          child.device = 0;
          child.device_start_ns = std::max(dev, t + 200);
          child.device_dur_ns = 300;
          dev = child.device_start_ns + 300;
          buf->records[buf->size++] = child;
          buf->records[buf->size++] = parent;
          if (buf->full()) {
            ASSERT_TRUE((*w)->submit(buf));
          }
          total_ops += 2;
          t += 1100;
        }
        (*w)->addMemory(MemoryRecord{t, 0, static_cast<uint64_t>(k) * 1024, 1 << 20});
      }
      StepRecord sr;
      sr.step = s;
      sr.start_ns = step_start;
      sr.dur_ns = t - step_start;
      sr.loss_scale = 1024.0 * (s + 1);
      (*w)->addStep(sr);
    }
    ASSERT_TRUE((*w)->submit(buf));
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  auto reader = openReader(db);
  ASSERT_TRUE(reader);
  const std::string out = tempPath("split.json");
  for (int k = 1; k < 200; ++k) std::remove(chromeTracePartPath(out, static_cast<size_t>(k)).c_str());
  ChromeTraceOptions o;
  o.max_file_bytes = 16 * 1024;
  auto sum = exportChromeTrace(*reader, out, o);
  ASSERT_TRUE(sum.isOk()) << sum.status().message();
  ASSERT_GE(sum->files.size(), 5u);
  EXPECT_EQ(sum->op_events, total_ops);
  EXPECT_EQ(sum->step_events, kSteps);
  EXPECT_EQ(sum->device_events, total_ops / 2);
  EXPECT_EQ(sum->clamped_slices, total_ops / 2);

  int64_t ops = 0, steps = 0, kernels = 0, counters = 0;
  int64_t last_host_ts = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < sum->files.size(); ++i) {
    const std::string& f = sum->files[i];
    EXPECT_EQ(f, chromeTracePartPath(out, i));
    EXPECT_LE(fileSize(f), o.max_file_bytes) << f;
    json trace;
    ASSERT_NO_THROW(trace = parseFile(f)) << f;
    const std::vector<json> xs = checkedSlices(trace);
    bool named_threads = false;
    int64_t first_host_ts = std::numeric_limits<int64_t>::max(), max_host_ts = std::numeric_limits<int64_t>::min();
    for (const json& e : trace["traceEvents"]) {
      named_threads |= e["ph"] == "M" && e["name"] == "thread_name";
      if (e["ph"] == "C") ++counters;
    }
    for (const json& x : xs) {
      if (x["cat"] == "cpu_op") ++ops;
      if (x["cat"] == "user_annotation") ++steps;
      if (x["cat"] == "kernel") {
        ++kernels;
        continue;
      }
      // Predicted lanes sit in their step's part; their times are the prediction's, which here
      // (tiny recorded ops) runs far longer than the recording.
      if (x["cat"] == "predicted") continue;
      first_host_ts = std::min(first_host_ts, ns(x["ts"]));
      max_host_ts = std::max(max_host_ts, ns(x["ts"]));
    }
    EXPECT_TRUE(named_threads) << f;
    EXPECT_GE(first_host_ts, last_host_ts) << "parts must follow each other in time: " << f;
    last_host_ts = max_host_ts;
  }
  EXPECT_EQ(ops, total_ops);
  EXPECT_EQ(steps, kSteps);
  EXPECT_EQ(kernels, total_ops / 2);
  EXPECT_EQ(counters, sum->counter_events);

  // Exporting again in one file removes the parts of the split export.
  auto one = exportChromeTrace(*reader, out);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one->files.size(), 1u);
  EXPECT_FALSE(exists(chromeTracePartPath(out, 1)));
  checkedSlices(parseFile(out));
}

}  // namespace
}  // namespace npuscope
