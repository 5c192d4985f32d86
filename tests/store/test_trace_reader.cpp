// The trace reader: key_averages-style aggregates checked against hand-computed values of a known
// op tree (self = total minus direct children, percentages, shapes grouping, time windows, step
// ranges, sorting), timelines, threads, steps, memory downsampling, dumps, and reading a file a
// TraceWriter still has open. TraceReaderLarge times the op table on a generated file when
// NPUSCOPE_LARGE_OPS is set (e.g. NPUSCOPE_LARGE_OPS=10000000).
#include <sqlite3.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include "npuscope/store/clock.h"
#include "npuscope/store/database.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"
#include "support/scratch_db.h"

namespace npuscope {
namespace {

using testing_support::tempPath;

// One op row of a fixture, inserted with SQL so the test controls every id and time.
struct Op {
  int64_t id;
  int64_t parent;  // -1: none
  const char* name;
  int64_t start, dur, thread;
  int depth;
  int64_t step = -1;
  const char* shapes = nullptr;
  const char* dtypes = nullptr;
  int64_t seq = -1;
  bool backward = false;
  int device = -1;
  int64_t dev_start = -1, dev_dur = -1;
};

int64_t internString(sqlite3* db, const char* s) {
  if (!s) return -1;
  auto ins = prepare(db, "INSERT OR IGNORE INTO strings(value) VALUES (?1)");
  EXPECT_TRUE(ins.isOk());
  sqlite3_bind_text(ins->get(), 1, s, -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(ins->get()), SQLITE_DONE);
  auto sel = prepare(db, "SELECT id FROM strings WHERE value=?1");
  sqlite3_bind_text(sel->get(), 1, s, -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(sel->get()), SQLITE_ROW);
  return sqlite3_column_int64(sel->get(), 0);
}

void insertOps(sqlite3* db, int64_t run, const std::vector<Op>& ops) {
  auto st = prepare(db,
                    "INSERT INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth, parent_id,"
                    " seq_nr, is_backward, shapes_id, dtypes_id, device, device_start_ns, device_dur_ns)"
                    " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)");
  ASSERT_TRUE(st.isOk()) << st.status().message();
  auto opt = [&](int col, int64_t v) {
    if (v < 0) sqlite3_bind_null(st->get(), col);
    else sqlite3_bind_int64(st->get(), col, v);
  };
  for (const Op& o : ops) {
    sqlite3_reset(st->get());
    sqlite3_bind_int64(st->get(), 1, o.id);
    sqlite3_bind_int64(st->get(), 2, run);
    opt(3, o.step);
    sqlite3_bind_int64(st->get(), 4, internString(db, o.name));
    sqlite3_bind_int64(st->get(), 5, o.start);
    sqlite3_bind_int64(st->get(), 6, o.dur);
    sqlite3_bind_int64(st->get(), 7, o.thread);
    sqlite3_bind_int64(st->get(), 8, o.depth);
    opt(9, o.parent);
    opt(10, o.seq);
    sqlite3_bind_int64(st->get(), 11, o.backward ? 1 : 0);
    opt(12, internString(db, o.shapes));
    opt(13, internString(db, o.dtypes));
    opt(14, o.device);
    opt(15, o.dev_start);
    opt(16, o.dev_dur);
    ASSERT_EQ(sqlite3_step(st->get()), SQLITE_DONE) << sqlite3_errmsg(db);
  }
}

constexpr const char* kS1 = "[[2, 3], [3, 4]]";
constexpr const char* kS2 = "[[4, 3], [3, 4]]";

// Run 1: two steps, a main thread (1) and a backward thread (2). Run 2: one op, started later.
//
// thread 1  100 ─ linear#1 (S1) ────────────── 200     210 relu 230     300 linear#6 (S2) 350
//             105 t 115   120 addmm#3 ──── 180                            310 addmm#7 340
//                              125 empty 130
// thread 2                               240 AddmmBackward0#8 280
//                                          245 mm#9 275
std::string buildFixture(const std::string& name) {
  const std::string p = tempPath(name);
  auto db = openTraceDatabase(p, OpenMode::kReadWrite);
  EXPECT_TRUE(db.isOk()) << db.status().message();
  sqlite3* d = db->get();
  EXPECT_TRUE(execSql(d,
                      "INSERT INTO runs(id, started_ns, ended_ns, wall_start_ns, status, command, model, opt_level,"
                      " optimizer, device, config_json, results_json, dropped_records)"
                      " VALUES (1, 50, 400, 1000, 'completed', 'train', 'cnn', 'O1', 'sgd', 'npu:0', '{}', '{\"acc\":1}', 3),"
                      "        (2, 10, NULL, 2000, 'running', 'infer', 'mlp', 'O2', NULL, 'npu:1', NULL, NULL, 0);"
                      "INSERT INTO steps(run_id, step, start_ns, dur_ns, loss, loss_scale, overflow, skipped, lr, grad_norm)"
                      " VALUES (1, 0, 90, 200, 2.5, 65536, 0, 0, 0.1, 1.5),"
                      "        (1, 1, 290, 80, NULL, 32768, 1, 1, 0.1, NULL);"
                      "INSERT INTO overflow_events(run_id, step, ts_ns, source, op_name, detail)"
                      " VALUES (1, 1, 330, 'float_status', 'aten::addmm', 'inf in output'),"
                      "        (1, 1, 320, 'nonfinite_grad', NULL, NULL);"
                      "INSERT INTO tensor_dumps(id, run_id, step, op_id, op_name, op_type, io, idx, dtype, shape, min, max,"
                      " mean, l2norm, nan_count, inf_count, data)"
                      " VALUES (1, 1, 0, 3, 'addmm_3', 'aten::addmm', 'output', 0, 'float16', '[2, 4]', -1, 2, 0.5, 3,"
                      "         0, 0, x'0001020304'),"
                      "        (2, 1, 0, 3, 'addmm_3', 'aten::addmm', 'input', 1, 'float16', '[2, 3]', NULL, NULL, NULL,"
                      "         NULL, NULL, NULL, x'28B52FFD00');")
                  .isOk());
  insertOps(d, 1,
            {
                {1, -1, "aten::linear", 100, 100, 1, 0, 0, kS1, "float, float", 11},
                {2, 1, "aten::t", 105, 10, 1, 1, 0},
                {3, 1, "aten::addmm", 120, 60, 1, 1, 0, kS1, "float, float", -1, false, 0, 130, 40},
                {4, 3, "aten::empty", 125, 5, 1, 2, 0},
                {5, -1, "aten::relu", 210, 20, 1, 0, 0, nullptr, nullptr, -1, false, 0, 215, 10},
                {6, -1, "aten::linear", 300, 50, 1, 0, 1, kS2, "float, float", 12},
                {7, 6, "aten::addmm", 310, 30, 1, 1, 1, kS2, nullptr, -1, false, 0, 320, 20},
                {8, -1, "AddmmBackward0", 240, 40, 2, 0, 0, nullptr, nullptr, 11, true},
                {9, 8, "aten::mm", 245, 30, 2, 1, 0, nullptr, nullptr, -1, true},
            });
  insertOps(d, 2, {{100, -1, "aten::relu", 20, 7, 5, 0}});
  // Memory: device 0 rises 0..99 over ts 100..199 with a spike of 1000 at ts 150; device 1 flat.
  auto mem = prepare(d, "INSERT INTO memory(run_id, ts_ns, device, allocated, reserved) VALUES (1, ?1, ?2, ?3, ?4)");
  EXPECT_TRUE(mem.isOk());
  for (int i = 0; i < 100; ++i) {
    for (int dev = 0; dev < 2; ++dev) {
      sqlite3_reset(mem->get());
      sqlite3_bind_int64(mem->get(), 1, 100 + i);
      sqlite3_bind_int64(mem->get(), 2, dev);
      sqlite3_bind_int64(mem->get(), 3, dev == 0 ? (i == 50 ? 1000 : i) : 7);
      sqlite3_bind_int64(mem->get(), 4, dev == 0 ? 2000 + i : 8);
      EXPECT_EQ(sqlite3_step(mem->get()), SQLITE_DONE);
    }
  }
  return p;
}

std::unique_ptr<TraceReader> openReader(const std::string& p) {
  auto r = TraceReader::open(p);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.isOk() ? std::move(r).value() : nullptr;
}

const OpAggregate* find(const OpAggregateTable& t, const std::string& name, const std::string& shapes = "") {
  for (const OpAggregate& a : t.rows) {
    if (a.name == name && a.input_shapes == shapes) return &a;
  }
  return nullptr;
}

OpAggregateTable aggregates(TraceReader& r, OpAggregateQuery q) {
  auto t = r.opAggregates(q);
  EXPECT_TRUE(t.isOk()) << t.status().message();
  return t.isOk() ? std::move(t).value() : OpAggregateTable();
}

struct Expect {
  const char* name;
  int64_t calls, total, self, min, max, device;
};

void expectRows(const OpAggregateTable& t, const std::vector<Expect>& rows) {
  EXPECT_EQ(t.rows.size(), rows.size());
  for (const Expect& e : rows) {
    const OpAggregate* a = find(t, e.name);
    ASSERT_NE(a, nullptr) << e.name;
    EXPECT_EQ(a->calls, e.calls) << e.name;
    EXPECT_EQ(a->total_ns, e.total) << e.name;
    EXPECT_EQ(a->self_ns, e.self) << e.name;
    EXPECT_EQ(a->min_ns, e.min) << e.name;
    EXPECT_EQ(a->max_ns, e.max) << e.name;
    EXPECT_EQ(a->device_ns, e.device) << e.name;
    EXPECT_DOUBLE_EQ(a->avg_ns, static_cast<double>(e.total) / static_cast<double>(e.calls)) << e.name;
  }
}

TEST(TraceReader, RunsLatestFirstWithEveryColumn) {
  auto r = openReader(buildFixture("runs.db"));
  ASSERT_TRUE(r);
  auto runs = r->runs();
  ASSERT_TRUE(runs.isOk());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].id, 2);  // the later wall-clock start, though its monotonic start is smaller
  const RunRow& a = (*runs)[1];
  EXPECT_EQ(a.id, 1);
  EXPECT_EQ(a.started_ns, 50);
  EXPECT_EQ(a.ended_ns, std::optional<int64_t>(400));
  EXPECT_EQ(a.wall_start_ns, 1000);
  EXPECT_EQ(a.status, "completed");
  EXPECT_EQ(a.command, "train");
  EXPECT_EQ(a.model, "cnn");
  EXPECT_EQ(a.opt_level, "O1");
  EXPECT_EQ(a.optimizer, "sgd");
  EXPECT_EQ(a.device, "npu:0");
  EXPECT_EQ(a.config_json, "{}");
  EXPECT_EQ(a.results_json, "{\"acc\":1}");
  EXPECT_EQ(a.dropped_records, 3);
  EXPECT_FALSE((*runs)[0].ended_ns.has_value());
  EXPECT_EQ((*runs)[0].optimizer, "");
  auto latest = r->latestRun();
  ASSERT_TRUE(latest.isOk());
  EXPECT_EQ(latest->id, 2);
  EXPECT_EQ(r->run(7).status().code(), StatusCode::kNotFound);
}

TEST(TraceReader, LatestRunOfAnEmptyFileIsNotFound) {
  const std::string p = tempPath("empty_runs.db");
  ASSERT_TRUE(openTraceDatabase(p, OpenMode::kReadWrite).isOk());
  auto r = openReader(p);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->latestRun().status().code(), StatusCode::kNotFound);
  auto runs = r->runs();
  ASSERT_TRUE(runs.isOk());
  EXPECT_TRUE(runs->empty());
}

TEST(TraceReader, OpenRefusesWhatIsNotATraceFile) {
  auto r = TraceReader::open(tempPath("missing.db"));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(TraceReader, AggregatesByNameMatchTheHandComputedTree) {
  auto r = openReader(buildFixture("agg.db"));
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  const OpAggregateTable t = aggregates(*r, q);
  // self: linear (100-10-60) + (50-30) = 50; addmm (60-5) + 30 = 85; AddmmBackward0 40-30 = 10.
  expectRows(t, {{"aten::linear", 2, 150, 50, 50, 100, 0},
                 {"aten::t", 1, 10, 10, 10, 10, 0},
                 {"aten::addmm", 2, 90, 85, 30, 60, 60},
                 {"aten::empty", 1, 5, 5, 5, 5, 0},
                 {"aten::relu", 1, 20, 20, 20, 20, 10},
                 {"AddmmBackward0", 1, 40, 10, 40, 40, 0},
                 {"aten::mm", 1, 30, 30, 30, 30, 0}});
  EXPECT_EQ(t.op_count, 9);
  EXPECT_EQ(t.group_count, 7);
  // The 100 % is the sum of self times, which equals the top-level ops' time: 100+20+50+40.
  EXPECT_EQ(t.self_sum_ns, 210);
  EXPECT_EQ(t.total_device_ns, 70);
  EXPECT_DOUBLE_EQ(find(t, "aten::addmm")->self_pct, 100.0 * 85 / 210);
  EXPECT_DOUBLE_EQ(find(t, "aten::linear")->total_pct, 100.0 * 150 / 210);
  EXPECT_EQ(find(t, "aten::addmm")->device_calls, 2);
  double pct = 0;
  for (const auto& a : t.rows) pct += a.self_pct;
  EXPECT_NEAR(pct, 100.0, 1e-9);
  // Sorted by self time, ties by name ("AddmmBackward0" < "aten::t").
  std::vector<std::string> order;
  for (const auto& a : t.rows) order.push_back(a.name);
  EXPECT_EQ(order, (std::vector<std::string>{"aten::addmm", "aten::linear", "aten::mm", "aten::relu", "AddmmBackward0",
                                             "aten::t", "aten::empty"}));
}

// Ids need not grow from parent to child (another producer may number ops at their end): the
// children are read first and still come off their parent's self time, in both scan paths.
TEST(TraceReader, AggregatesWhenChildrenHaveSmallerIdsThanTheirParent) {
  const std::string p = tempPath("agg_ids.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(), "INSERT INTO runs(id, started_ns, wall_start_ns) VALUES (1, 0, 0)").isOk());
    insertOps(db->get(), 1,
              {{10, 30, "inner", 110, 20, 1, 1},
               {11, 30, "inner", 140, 30, 1, 1},
               {30, -1, "outer", 100, 100, 1, 0},
               {31, -1, "outer", 1000, 10, 1, 0}});
  }
  auto r = openReader(p);
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  expectRows(aggregates(*r, q), {{"outer", 2, 110, 60, 10, 100, 0}, {"inner", 2, 50, 50, 20, 30, 0}});
  q.window = TimeWindow{100, 150};  // 50 of 910 ns: read through the thread index
  expectRows(aggregates(*r, q), {{"outer", 1, 100, 50, 100, 100, 0}, {"inner", 2, 50, 50, 20, 30, 0}});
}

TEST(TraceReader, AggregatesGroupByNameAndShapes) {
  auto r = openReader(buildFixture("agg_shapes.db"));
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  q.group_by = OpGroupBy::kNameAndShapes;
  const OpAggregateTable t = aggregates(*r, q);
  EXPECT_EQ(t.group_count, 9);  // linear and addmm split in two by shapes; the other five have none
  const OpAggregate* l1 = find(t, "aten::linear", kS1);
  const OpAggregate* l2 = find(t, "aten::linear", kS2);
  ASSERT_TRUE(l1 && l2);
  EXPECT_EQ(l1->calls, 1);
  EXPECT_EQ(l1->self_ns, 30);
  EXPECT_EQ(l2->self_ns, 20);
  const OpAggregate* a1 = find(t, "aten::addmm", kS1);
  ASSERT_NE(a1, nullptr);
  EXPECT_EQ(a1->self_ns, 55);
  ASSERT_NE(find(t, "aten::mm", ""), nullptr);
  EXPECT_EQ(t.self_sum_ns, 210);
  EXPECT_TRUE(r->damage().empty()) << r->damage().front();  // a sound file's names and shapes
}

TEST(TraceReader, AggregatesOfASmallWindowCountChildrenOutsideIt) {
  auto r = openReader(buildFixture("agg_window.db"));
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  // Starts in [100, 122): linear#1, t#2, addmm#3. empty#4 starts at 125 but is addmm's child.
  q.window = TimeWindow{100, 122};
  const OpAggregateTable t = aggregates(*r, q);
  expectRows(t, {{"aten::linear", 1, 100, 30, 100, 100, 0},
                 {"aten::t", 1, 10, 10, 10, 10, 0},
                 {"aten::addmm", 1, 60, 55, 60, 60, 40}});
  EXPECT_EQ(t.self_sum_ns, 95);
  EXPECT_EQ(t.op_count, 3);
}

TEST(TraceReader, AggregatesOfALargeWindowCountChildrenOutsideIt) {
  auto r = openReader(buildFixture("agg_window_large.db"));
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  // Everything but addmm#7 (starts at 310, child of linear#6 which starts at 300).
  q.window = TimeWindow{0, 305};
  const OpAggregateTable t = aggregates(*r, q);
  expectRows(t, {{"aten::linear", 2, 150, 50, 50, 100, 0},
                 {"aten::t", 1, 10, 10, 10, 10, 0},
                 {"aten::addmm", 1, 60, 55, 60, 60, 40},
                 {"aten::empty", 1, 5, 5, 5, 5, 0},
                 {"aten::relu", 1, 20, 20, 20, 20, 10},
                 {"AddmmBackward0", 1, 40, 10, 40, 40, 0},
                 {"aten::mm", 1, 30, 30, 30, 30, 0}});
  EXPECT_EQ(t.self_sum_ns, 180);
}

TEST(TraceReader, AggregatesOfAStepRange) {
  auto r = openReader(buildFixture("agg_steps.db"));
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  q.steps = StepRange{1, 1};
  OpAggregateTable t = aggregates(*r, q);
  expectRows(t, {{"aten::linear", 1, 50, 20, 50, 50, 0}, {"aten::addmm", 1, 30, 30, 30, 30, 20}});
  EXPECT_EQ(t.self_sum_ns, 50);
  q.steps = StepRange{5, 9};
  t = aggregates(*r, q);
  EXPECT_TRUE(t.rows.empty());
  EXPECT_EQ(t.self_sum_ns, 0);
  // Another run of the same file is separate.
  q = OpAggregateQuery();
  q.run_id = 2;
  t = aggregates(*r, q);
  expectRows(t, {{"aten::relu", 1, 7, 7, 7, 7, 0}});
}

TEST(TraceReader, AggregatesSortAndTopN) {
  auto r = openReader(buildFixture("agg_sort.db"));
  ASSERT_TRUE(r);
  auto names = [](const OpAggregateTable& t) {
    std::vector<std::string> out;
    for (const auto& a : t.rows) out.push_back(a.name);
    return out;
  };
  OpAggregateQuery q;
  q.run_id = 1;
  q.top_n = 3;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"aten::addmm", "aten::linear", "aten::mm"}));
  q.sort = OpSortKey::kTotalTime;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"aten::linear", "aten::addmm", "AddmmBackward0"}));
  q.sort = OpSortKey::kCount;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"aten::addmm", "aten::linear", "AddmmBackward0"}));
  q.sort = OpSortKey::kAvgTime;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"aten::linear", "aten::addmm", "AddmmBackward0"}));
  q.sort = OpSortKey::kDeviceTime;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"aten::addmm", "aten::relu", "AddmmBackward0"}));
  q.sort = OpSortKey::kName;
  q.descending = false;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"AddmmBackward0", "aten::addmm", "aten::empty"}));
  q.sort = OpSortKey::kSelfTime;
  q.top_n = 2;
  EXPECT_EQ(names(aggregates(*r, q)), (std::vector<std::string>{"aten::empty", "AddmmBackward0"}));
  q.top_n = 0;
  EXPECT_EQ(aggregates(*r, q).rows.size(), 7u);

  auto key = parseOpSortKey("total");
  ASSERT_TRUE(key.isOk());
  EXPECT_EQ(*key, OpSortKey::kTotalTime);
  EXPECT_STREQ(opSortKeyName(OpSortKey::kAvgTime), "avg");
  EXPECT_FALSE(parseOpSortKey("bogus").isOk());
  q.window = TimeWindow{5, 5};
  EXPECT_EQ(r->opAggregates(q).status().code(), StatusCode::kInvalidArgument);
}

TEST(TraceReader, ThreadsWithCountsAndTheBackwardThread) {
  auto r = openReader(buildFixture("threads.db"));
  ASSERT_TRUE(r);
  auto th = r->threads(1);
  ASSERT_TRUE(th.isOk()) << th.status().message();
  ASSERT_EQ(th->size(), 2u);
  EXPECT_EQ((*th)[0].thread_id, 1);
  EXPECT_EQ((*th)[0].op_count, 7);
  EXPECT_EQ((*th)[0].backward_op_count, 0);
  EXPECT_FALSE((*th)[0].holdsBackward());
  EXPECT_EQ((*th)[0].first_start_ns, 100);
  EXPECT_EQ((*th)[0].last_end_ns, 350);
  EXPECT_EQ((*th)[1].thread_id, 2);
  EXPECT_EQ((*th)[1].op_count, 2);
  EXPECT_TRUE((*th)[1].holdsBackward());
  EXPECT_EQ((*th)[1].last_end_ns, 280);
  auto other = r->threads(2);
  ASSERT_TRUE(other.isOk());
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ((*other)[0].thread_id, 5);
}

std::vector<int64_t> ids(const std::vector<OpSlice>& v) {
  std::vector<int64_t> out;
  for (const auto& o : v) out.push_back(o.id);
  return out;
}

TEST(TraceReader, TimelineIncludesOpsRunningAtTheWindowStart) {
  auto r = openReader(buildFixture("timeline.db"));
  ASSERT_TRUE(r);
  TimelineQuery q;
  q.run_id = 1;
  q.thread_id = 1;
  q.window = TimeWindow{128, 215};
  auto v = r->timeline(q);
  ASSERT_TRUE(v.isOk()) << v.status().message();
  // linear#1, addmm#3 and empty#4 still run at 128 (outermost first), then relu#5 starts.
  EXPECT_EQ(ids(*v), (std::vector<int64_t>{1, 3, 4, 5}));
  q.window = TimeWindow{131, 215};  // empty#4 ended at 130
  v = r->timeline(q);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(ids(*v), (std::vector<int64_t>{1, 3, 5}));
  const OpSlice& addmm = (*v)[1];
  EXPECT_EQ(addmm.name, "aten::addmm");
  EXPECT_EQ(addmm.parent_id, 1);
  EXPECT_EQ(addmm.depth, 1);
  EXPECT_EQ(addmm.start_ns, 120);
  EXPECT_EQ(addmm.dur_ns, 60);
  EXPECT_EQ(addmm.input_shapes, kS1);
  EXPECT_EQ(addmm.input_dtypes, "float, float");
  EXPECT_EQ(addmm.device, 0);
  EXPECT_EQ(addmm.device_start_ns, 130);
  EXPECT_EQ(addmm.device_dur_ns, 40);
  EXPECT_EQ(addmm.step, 0);
  EXPECT_EQ((*v)[0].seq_nr, 11);
  EXPECT_EQ((*v)[2].input_shapes, "");

  q.window = TimeWindow();
  q.min_dur_ns = 20;
  v = r->timeline(q);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(ids(*v), (std::vector<int64_t>{1, 3, 5, 6, 7}));
  q.limit = 2;
  v = r->timeline(q);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(ids(*v), (std::vector<int64_t>{1, 3}));

  q = TimelineQuery();
  q.run_id = 1;
  q.thread_id = 2;
  v = r->timeline(q);
  ASSERT_TRUE(v.isOk());
  ASSERT_EQ(v->size(), 2u);
  EXPECT_TRUE((*v)[0].is_backward);
  EXPECT_EQ((*v)[1].parent_id, 8);
}

TEST(TraceReader, StepsOverflowsAndDumps) {
  auto r = openReader(buildFixture("steps.db"));
  ASSERT_TRUE(r);
  auto s = r->steps(1);
  ASSERT_TRUE(s.isOk());
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].step, 0);
  EXPECT_EQ((*s)[0].start_ns, 90);
  EXPECT_EQ((*s)[0].dur_ns, 200);
  EXPECT_EQ((*s)[0].loss, std::optional<double>(2.5));
  EXPECT_EQ((*s)[0].loss_scale, std::optional<double>(65536));
  EXPECT_EQ((*s)[0].grad_norm, std::optional<double>(1.5));
  EXPECT_FALSE((*s)[1].loss.has_value());
  EXPECT_TRUE((*s)[1].overflow);
  EXPECT_TRUE((*s)[1].skipped);
  EXPECT_FALSE((*s)[1].grad_norm.has_value());
  auto one = r->steps(1, StepRange{1, 1});
  ASSERT_TRUE(one.isOk());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].loss_scale, std::optional<double>(32768));

  auto o = r->overflowEvents(1);
  ASSERT_TRUE(o.isOk());
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[0].ts_ns, 320);  // by time
  EXPECT_EQ((*o)[0].source, "nonfinite_grad");
  EXPECT_EQ((*o)[0].op_name, "");
  EXPECT_EQ((*o)[1].op_name, "aten::addmm");
  EXPECT_EQ((*o)[1].detail, "inf in output");
  EXPECT_EQ((*o)[1].step, 1);

  auto d = r->tensorDumps(1);
  ASSERT_TRUE(d.isOk());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].op_name, "addmm_3");
  EXPECT_EQ((*d)[0].io, "output");
  EXPECT_EQ((*d)[0].op_id, 3);
  EXPECT_EQ((*d)[0].shape, "[2, 4]");
  EXPECT_EQ((*d)[0].format, "ND");
  EXPECT_EQ((*d)[0].data_bytes, 5);
  EXPECT_EQ((*d)[0].max, std::optional<double>(2));
  EXPECT_FALSE((*d)[1].min.has_value());
  auto data = r->tensorDumpData(1);
  ASSERT_TRUE(data.isOk());
  EXPECT_EQ(data->bytes, (std::vector<uint8_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(data->zstd_frame);
  auto z = r->tensorDumpData(2);
  ASSERT_TRUE(z.isOk());
  EXPECT_TRUE(z->zstd_frame);
  EXPECT_EQ(r->tensorDumpData(99).status().code(), StatusCode::kNotFound);
}

TEST(TraceReader, MemorySeriesPerDeviceAndDownsampled) {
  auto r = openReader(buildFixture("memory.db"));
  ASSERT_TRUE(r);
  MemoryQuery q;
  q.run_id = 1;
  auto all = r->memory(q);
  ASSERT_TRUE(all.isOk());
  EXPECT_EQ(all->size(), 200u);
  q.device = 1;
  auto d1 = r->memory(q);
  ASSERT_TRUE(d1.isOk());
  ASSERT_EQ(d1->size(), 100u);
  EXPECT_EQ((*d1)[0].allocated, 7);
  q.device = 0;
  q.window = TimeWindow{120, 130};
  auto w = r->memory(q);
  ASSERT_TRUE(w.isOk());
  ASSERT_EQ(w->size(), 10u);
  EXPECT_EQ(w->front().ts_ns, 120);
  q.window = TimeWindow();
  q.max_points = 10;
  auto ds = r->memory(q);
  ASSERT_TRUE(ds.isOk());
  EXPECT_LE(ds->size(), 10u);
  EXPECT_GE(ds->size(), 9u);
  bool spike = false;
  for (const auto& m : *ds) {
    EXPECT_EQ(m.device, 0);
    spike |= m.allocated == 1000 && m.ts_ns == 150;
  }
  EXPECT_TRUE(spike) << "downsampling must keep the peak";
  EXPECT_EQ(ds->back().reserved, 2099);  // the last bucket's highest reserved value
  q.device.reset();
  auto both = r->memory(q);
  ASSERT_TRUE(both.isOk());
  EXPECT_GE(both->size(), 18u);
  EXPECT_LE(both->size(), 20u);
}

TEST(TraceReader, EarliestTimeAndStrings) {
  auto r = openReader(buildFixture("earliest.db"));
  ASSERT_TRUE(r);
  auto t = r->earliestTime(1);
  ASSERT_TRUE(t.isOk());
  EXPECT_EQ(*t, 50);  // started_ns precedes every record
  auto t2 = r->earliestTime(2);
  ASSERT_TRUE(t2.isOk());
  EXPECT_EQ(*t2, 10);
  EXPECT_EQ(r->stringValue(0), "");
  EXPECT_EQ(r->stringValue(123456), "");
  EXPECT_EQ(r->stringValue(1), "aten::linear");
  EXPECT_TRUE(r->damage().empty()) << r->damage().front();  // a sound file
}

// Damages a closed trace file the way fuzz_trace_file's mutations did: rewrites, in the strings
// table's one leaf page, the rowid `from` of a cell to `to` (both one-byte varints), so that a
// scan of the table returns `to` twice and out of order. SQLite's file format: page 1 starts
// with the 100-byte file header, a leaf table page is type 0x0D, its cell count at +3, its cell
// pointers from +8; a cell is a varint payload size, then the rowid varint.
void rewriteStringRowid(const std::string& path, int from, int to) {
  ASSERT_FALSE(std::filesystem::exists(path + "-wal")) << "the file's pages are expected in the file itself";
  int64_t root = 0, page_size = 0;
  {
    auto db = openTraceDatabase(path, OpenMode::kReadOnly);
    ASSERT_TRUE(db.isOk()) << db.status().message();
    auto st = prepare(db->get(), "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_schema"
                                 " WHERE type = 'table' AND name = 'strings'");
    ASSERT_TRUE(st.isOk());
    ASSERT_EQ(sqlite3_step(st->get()), SQLITE_ROW);
    root = sqlite3_column_int64(st->get(), 0);
    page_size = sqlite3_column_int64(st->get(), 1);
  }
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::vector<unsigned char> page(static_cast<size_t>(page_size));
  const long at = static_cast<long>((root - 1) * page_size);
  ASSERT_EQ(std::fseek(f, at, SEEK_SET), 0);
  ASSERT_EQ(std::fread(page.data(), 1, page.size(), f), page.size());
  const size_t h = root == 1 ? 100 : 0;
  ASSERT_EQ(page[h], 0x0D) << "the strings table is expected to fit one leaf page";
  const int cells = page[h + 3] << 8 | page[h + 4];
  bool rewritten = false;
  for (int c = 0; c < cells && !rewritten; ++c) {
    size_t cell = static_cast<size_t>(page[h + 8 + 2 * c] << 8 | page[h + 9 + 2 * c]);
    while (page[cell] & 0x80) ++cell;  // the payload size
    ++cell;
    if (page[cell] == from) {
      page[cell] = static_cast<unsigned char>(to);
      rewritten = true;
    }
  }
  ASSERT_TRUE(rewritten) << "no string with id " << from;
  ASSERT_EQ(std::fseek(f, at, SEEK_SET), 0);
  ASSERT_EQ(std::fwrite(page.data(), 1, page.size(), f), page.size());
  ASSERT_EQ(std::fclose(f), 0);
}

// A corrupt strings table that returns an id twice: the id keeps its first text (op names handed
// out as views stay valid: overwriting it was a heap-use-after-free, found by fuzz_trace_file),
// the reading goes on, and damage() says what was seen for the front-ends to warn: the rows out
// of order, then the id that a row names and the table lacks.
TEST(TraceReader, StringsOutOfOrderAreDamageAndKeepTheirFirstText) {
  const std::string p = buildFixture("strings_damaged.db");
  // The fixture's strings in the order interned: 1 aten::linear, 2 kS1, 3 "float, float", 4 aten::t.
  rewriteStringRowid(p, 4, 2);
  auto r = openReader(p);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->stringValue(2), kS1);
  EXPECT_EQ(r->stringValue(5), "aten::addmm");  // the rows after it read on
  ASSERT_EQ(r->damage().size(), 1u);
  EXPECT_EQ(r->damage()[0],
            "its strings table returns 1 row out of order (the first, id 2, after id 3): op names and shapes may be wrong");
  EXPECT_EQ(r->stringValue(4), "");  // its row now claims id 2
  ASSERT_EQ(r->damage().size(), 2u);
  EXPECT_EQ(r->damage()[1], "rows name strings that its strings table lacks: those names are empty");
  OpAggregateQuery q;
  q.run_id = 1;
  const OpAggregateTable t = aggregates(*r, q);
  EXPECT_NE(find(t, "aten::addmm"), nullptr);
  EXPECT_NE(find(t, ""), nullptr);  // aten::t lost its name
  EXPECT_EQ(r->damage().size(), 2u);  // reading aten::t's row again adds nothing
}

// A strings table SQLite finds corrupt part-way (an input fuzz_trace_file found: a recorded file,
// mutated): what was read before stays, and damage() says the table cannot be read to the end.
TEST(TraceReader, StringsTableThatCannotBeReadIsDamage) {
  const std::string p = tempPath("strings_unreadable.db");
  std::filesystem::copy_file(std::string(NPUSCOPE_FUZZ_CORPUS) + "/trace_file/timeout-unreadable-strings.db", p);
  auto r = openReader(p);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->stringValue(1), "[[256, 784], [], [], [], [], [], [], []]");  // the first row reads
  ASSERT_EQ(r->damage().size(), 1u);
  EXPECT_EQ(r->damage()[0].rfind("its strings table cannot be read to the end (database disk image is malformed)", 0), 0u)
      << r->damage()[0];
}

// Fuzzer-found files (fuzz/corpus/trace_file/timeout-op-rows-in-a-loop*.db) whose op_events
// b-tree leads a read round in a loop after the queries `npuscope report` and the predicted
// timeline make: a step's ops came back millions of times from a 75 KB file (2 GB, a minute).
// Op rows read in id order must come with rising ids; the first that does not is damage, and the
// read stops there. Each op is read at most once (the file's ids are 1..784).
TEST(TraceReader, OpRowsReadInALoopAreDamageAndReadOnce) {
  for (const char* name : {"timeout-op-rows-in-a-loop.db", "timeout-op-rows-in-a-loop-2.db"}) {
    SCOPED_TRACE(name);
    const std::string p = tempPath(name);
    std::filesystem::copy_file(std::string(NPUSCOPE_FUZZ_CORPUS) + "/trace_file/" + name, p);
    auto r = openReader(p);
    ASSERT_TRUE(r);
    auto runs = r->runs();
    ASSERT_TRUE(runs.isOk() && !runs->empty());
    const int64_t run = runs->front().id;
    // The fuzz target's reads before the predicted timeline: they leave SQLite's page cache as
    // the loop needs it.
    (void)r->steps(run);
    (void)r->overflowEvents(run);
    (void)r->threads(run);
    (void)r->stepDeviceTimes(run);
    (void)r->memoryPeaks(run);
    (void)r->deviceTasks(run, {}, 100);
    (void)r->deviceTaskAggregates(run);
    OpAggregateQuery q;
    q.run_id = run;
    (void)r->opAggregates(q);
    (void)r->collectives(run);
    bool looped = false;
    for (const StepRange range : {StepRange{0, 0}, StepRange{1, 1}, StepRange{0, 1}}) {
      auto ops = r->stepOps(run, range);
      if (!ops.isOk()) continue;  // an error is a fine answer too
      EXPECT_LE(ops->size(), 784u);
      for (size_t i = 1; i < ops->size(); ++i) ASSERT_LT((*ops)[i - 1].id, (*ops)[i].id) << "at " << i;
      for (const std::string& d : r->damage()) looped |= d.rfind("its op_events table returns rows out of id order", 0) == 0;
    }
    EXPECT_TRUE(looped) << "the loop is seen and named";
  }
}

// A TraceWriter of this process keeps the file open and keeps writing; the reader sees each
// commit and the writer is not disturbed.
TEST(TraceReader, ReadsWhileATraceWriterIsWriting) {
  const std::string p = tempPath("live.db");
  auto w = TraceWriter::open(p, TraceWriter::Options{100, 64});
  ASSERT_TRUE(w.isOk()) << w.status().message();
  RunInfo info;
  info.started_ns = nowNs();
  info.model = "live";
  auto run = (*w)->beginRun(info);
  ASSERT_TRUE(run.isOk());
  const uint32_t outer = StringTable::global().intern("live::outer");
  const uint32_t inner = StringTable::global().intern("live::inner");
  int64_t next_id = 1000000;
  auto submitTrees = [&](int n, int64_t t0) {
    auto buf = (*w)->takeBuffer();
    for (int i = 0; i < n; ++i) {
      OpRecord parent;
      parent.id = next_id++;
      parent.start_ns = t0 + i * 100;
      parent.dur_ns = 50;
      parent.thread_id = 1;
      parent.name_id = outer;
      OpRecord child = parent;
      child.id = next_id++;
      child.parent_id = parent.id;
      child.start_ns = parent.start_ns + 10;
      child.dur_ns = 20;
      child.depth = 1;
      child.name_id = inner;
      buf->records[buf->size++] = child;  // the profiler writes children first (they end first)
      buf->records[buf->size++] = parent;
    }
    ASSERT_TRUE((*w)->submit(buf));
    ASSERT_TRUE((*w)->flush().isOk());
  };
  submitTrees(10, 1000);

  auto reader = openReader(p);
  ASSERT_TRUE(reader);
  auto latest = reader->latestRun();
  ASSERT_TRUE(latest.isOk());
  EXPECT_EQ(latest->status, "running");
  OpAggregateQuery q;
  q.run_id = *run;
  OpAggregateTable t = aggregates(*reader, q);
  ASSERT_NE(find(t, "live::outer"), nullptr);
  EXPECT_EQ(find(t, "live::outer")->calls, 10);
  EXPECT_EQ(find(t, "live::outer")->self_ns, 10 * 30);

  submitTrees(5, 5000);  // more ops while the reader is open
  t = aggregates(*reader, q);
  EXPECT_EQ(find(t, "live::outer")->calls, 15);
  EXPECT_EQ(find(t, "live::inner")->self_ns, 15 * 20);
  auto threads = reader->threads(*run);  // a running run is not cached
  ASSERT_TRUE(threads.isOk());
  ASSERT_EQ(threads->size(), 1u);
  EXPECT_EQ((*threads)[0].op_count, 30);
  ASSERT_TRUE((*w)->endRun("completed").isOk());
  EXPECT_TRUE((*w)->error().isOk());
  auto ended = reader->run(*run);
  ASSERT_TRUE(ended.isOk());
  EXPECT_EQ(ended->status, "completed");
  EXPECT_TRUE(reader->damage().empty()) << reader->damage().front();  // a live file is no damaged one
}

// ---------------------------------------------------------------------------------------------
// Step 0 holds ops 1-5, 8, 9 with modeled device time on addmm#3 [130,170) and relu#5 [215,225);
// step 1 holds ops 6, 7 with addmm#7 [320,340).
TEST(TraceReader, DeviceTimePerStep) {
  auto r = openReader(buildFixture("step_device.db"));
  ASSERT_TRUE(r);
  auto t = r->stepDeviceTimes(1);
  ASSERT_TRUE(t.isOk()) << t.status().message();
  ASSERT_EQ(t->size(), 2u);
  const StepDeviceTime& s0 = (*t)[0];
  EXPECT_EQ(s0.step, 0);
  EXPECT_EQ(s0.ops, 7);
  EXPECT_EQ(s0.device_ops, 2);
  EXPECT_EQ(s0.device_busy_ns, 50);
  EXPECT_EQ(s0.device_first_ns, 130);
  EXPECT_EQ(s0.device_last_ns, 225);
  const StepDeviceTime& s1 = (*t)[1];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.ops, 2);
  EXPECT_EQ(s1.device_busy_ns, 20);
  EXPECT_EQ(s1.device_last_ns, 340);
  auto none = r->stepDeviceTimes(2);  // run 2's only op has no step
  ASSERT_TRUE(none.isOk());
  EXPECT_TRUE(none->empty());
}

// A corrupt file's durations near INT64_MAX (fuzz/corpus/trace_file/ubsan-aggregate-sum-overflow.db
// has them): the op table's and the step device time's sums clamp at the int64 range instead of
// overflowing (undefined behaviour; in practice a wrapped, negative figure).
TEST(TraceReader, SumsOfHugeDurationsClampAtTheInt64Range) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  const std::string p = tempPath("huge.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk()) << db.status().message();
    ASSERT_TRUE(execSql(db->get(),
                        "INSERT INTO runs(id, started_ns, wall_start_ns, status, command, model)"
                        " VALUES (1, 0, 0, 'completed', 'train', 'mlp');"
                        "INSERT INTO steps(run_id, step, start_ns, dur_ns, overflow, skipped) VALUES (1, 0, 0, 10, 0, 0);")
                    .isOk());
    insertOps(db->get(), 1,
              {
                  {1, -1, "aten::huge", 0, kMax - 10, 1, 0, 0, nullptr, nullptr, -1, false, 0, 0, kMax - 10},
                  {2, -1, "aten::huge", 10, 100, 1, 0, 0, nullptr, nullptr, -1, false, 0, 5, 100},
                  {3, 2, "aten::negative", 20, kMin + 1, 1, 1, 0},
              });
  }
  auto r = openReader(p);
  ASSERT_TRUE(r);
  OpAggregateQuery q;
  q.run_id = 1;
  const OpAggregateTable t = aggregates(*r, q);
  // huge: total (kMax - 10) + 100 and self that minus a negative child: both clamp at kMax.
  expectRows(t, {{"aten::huge", 2, kMax, kMax, 100, kMax - 10, kMax}, {"aten::negative", 1, kMin + 1, kMin + 1, kMin + 1, kMin + 1, 0}});
  EXPECT_EQ(t.self_sum_ns, 0);  // kMax + (kMin + 1)
  EXPECT_EQ(t.total_device_ns, kMax);
  auto steps = r->stepDeviceTimes(1);
  ASSERT_TRUE(steps.isOk()) << steps.status().message();
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0].device_busy_ns, kMax);
  EXPECT_EQ((*steps)[0].device_last_ns, kMax - 10);
}

TEST(TraceReader, MemoryPeaksPerDevice) {
  auto r = openReader(buildFixture("mem_peaks.db"));
  ASSERT_TRUE(r);
  auto p = r->memoryPeaks(1);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].device, 0);
  EXPECT_EQ((*p)[0].allocated, 1000);
  EXPECT_EQ((*p)[0].reserved, 2099);
  EXPECT_EQ((*p)[0].samples, 100);
  EXPECT_EQ((*p)[1].device, 1);
  EXPECT_EQ((*p)[1].allocated, 7);
  EXPECT_EQ((*p)[1].reserved, 8);
}

// The op table over a generated file of NPUSCOPE_LARGE_OPS ops: correctness at scale (the time
// target is bench_profiler's report_seconds_10m_ops). NPUSCOPE_LARGE_TRACE names the file (kept and reused when it already exists).

int64_t scalar(sqlite3* db, const char* sql) {
  auto st = prepare(db, sql);
  if (!st.isOk() || sqlite3_step(st->get()) != SQLITE_ROW) return -1;
  return sqlite3_column_int64(st->get(), 0);
}

// Trees like a training step makes: a top-level op with three children, the middle one with two
// children of its own; ids increase from parent to child like the profiler's; two threads.
void generateLargeTrace(const std::string& path, int64_t ops) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  auto db = openTraceDatabase(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.isOk()) << db.status().message();
  sqlite3* d = db->get();
  ASSERT_TRUE(execSql(d, "PRAGMA synchronous=OFF; INSERT INTO runs(id, started_ns, wall_start_ns, status)"
                         " VALUES (1, 0, 0, 'completed')")
                  .isOk());
  std::vector<int64_t> names, shapes;
  for (int i = 0; i < 40; ++i) names.push_back(internString(d, ("aten::op_" + std::to_string(i)).c_str()));
  for (int i = 0; i < 100; ++i) {
    shapes.push_back(internString(d, ("[[" + std::to_string(i + 1) + ", 64], [64, 64]]").c_str()));
  }
  auto st = prepare(d,
                    "INSERT INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth, parent_id,"
                    " seq_nr, is_backward, shapes_id, dtypes_id, device, device_start_ns, device_dur_ns)"
                    " VALUES (?1,1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,NULL,?12,?13,?14)");
  ASSERT_TRUE(st.isOk());
  std::mt19937 rng(7);
  ASSERT_TRUE(execSql(d, "BEGIN").isOk());
  int64_t id = 0, t = 1000, dev_t = 1000;
  auto add = [&](int64_t parent, int64_t start, int64_t dur, int64_t thread, int depth, bool leaf) {
    sqlite3_stmt* s = st->get();
    sqlite3_reset(s);
    ++id;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, id / 20000);
    sqlite3_bind_int64(s, 3, names[rng() % names.size()]);
    sqlite3_bind_int64(s, 4, start);
    sqlite3_bind_int64(s, 5, dur);
    sqlite3_bind_int64(s, 6, thread);
    sqlite3_bind_int64(s, 7, depth);
    if (parent > 0) sqlite3_bind_int64(s, 8, parent); else sqlite3_bind_null(s, 8);
    if (depth == 0) sqlite3_bind_int64(s, 9, id); else sqlite3_bind_null(s, 9);
    sqlite3_bind_int64(s, 10, thread == 2);
    sqlite3_bind_int64(s, 11, shapes[rng() % shapes.size()]);
    if (leaf) {
      sqlite3_bind_int64(s, 12, 0);
      sqlite3_bind_int64(s, 13, dev_t);
      sqlite3_bind_int64(s, 14, dur / 2);
      dev_t += dur / 2;
    } else {
      for (int c = 12; c <= 14; ++c) sqlite3_bind_null(s, c);
    }
    EXPECT_EQ(sqlite3_step(s), SQLITE_DONE);
    return id;
  };
  while (id < ops) {
    for (int64_t thread = 1; thread <= 2 && id < ops; ++thread) {
      const int64_t top = add(0, t, 1000, thread, 0, false);
      for (int c = 0; c < 3; ++c) {
        const int64_t start = t + 10 + c * 300;
        const int64_t child = add(top, start, 250, thread, 1, c != 1);
        if (c == 1) {
          for (int g = 0; g < 2; ++g) add(child, start + 5 + g * 100, 90, thread, 2, true);
        }
      }
      t += 1100;
    }
    if (id % 1000000 < 12) {
      ASSERT_TRUE(execSql(d, "COMMIT; BEGIN").isOk());
    }
  }
  ASSERT_TRUE(execSql(d, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE)").isOk());
}

TEST(TraceReaderLarge, OpTableOnAGeneratedFile) {
  const char* n = std::getenv("NPUSCOPE_LARGE_OPS");
  if (!n) GTEST_SKIP() << "set NPUSCOPE_LARGE_OPS=<ops> (and optionally NPUSCOPE_LARGE_TRACE=<file>) to run";
  const int64_t ops = std::atoll(n);
  const char* file = std::getenv("NPUSCOPE_LARGE_TRACE");
  const std::string path = file ? file : testing::TempDir() + "/npuscope_tr_large.db";
  bool reuse = false;
  {
    auto existing = TraceReader::open(path);
    reuse = existing.isOk() && scalar((*existing)->db(), "SELECT count(*) FROM op_events") >= ops;
  }
  if (!reuse) {
    const auto g0 = std::chrono::steady_clock::now();
    generateLargeTrace(path, ops);
    std::printf("generated %lld ops in %.1f s\n", static_cast<long long>(ops),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count());
  }
  auto r = openReader(path);
  ASSERT_TRUE(r);
  const int64_t count = scalar(r->db(), "SELECT count(*) FROM op_events WHERE run_id=1");
  for (OpGroupBy g : {OpGroupBy::kName, OpGroupBy::kNameAndShapes}) {
    OpAggregateQuery q;
    q.run_id = 1;
    q.group_by = g;
    const auto t0 = std::chrono::steady_clock::now();
    const OpAggregateTable t = aggregates(*r, q);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("op table (%s) over %lld ops: %.3f s, %lld groups\n",
                g == OpGroupBy::kName ? "by name" : "by name and shapes", static_cast<long long>(count), s,
                static_cast<long long>(t.group_count));
    EXPECT_EQ(t.op_count, count);
    int64_t top_level = 0;
    {
      auto st = prepare(r->db(), "SELECT sum(dur_ns) FROM op_events WHERE run_id=1 AND parent_id IS NULL");
      ASSERT_TRUE(st.isOk());
      ASSERT_EQ(sqlite3_step(st->get()), SQLITE_ROW);
      top_level = sqlite3_column_int64(st->get(), 0);
    }
    EXPECT_EQ(t.self_sum_ns, top_level);  // self times partition the top-level ops' time
    RecordProperty(g == OpGroupBy::kName ? "op_table_seconds" : "op_table_by_shapes_seconds", std::to_string(s));
  }
  // A small window (the GUI's area selection) goes through the thread index.
  OpAggregateQuery q;
  q.run_id = 1;
  q.window = TimeWindow{1000000, 2000000};
  const auto t0 = std::chrono::steady_clock::now();
  const OpAggregateTable t = aggregates(*r, q);
  std::printf("op table of a 1 ms window: %.4f s, %lld ops\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              static_cast<long long>(t.op_count));
  const auto t1 = std::chrono::steady_clock::now();
  auto th = r->threads(1);
  ASSERT_TRUE(th.isOk());
  std::printf("threads: %.3f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
}

}  // namespace
}  // namespace npuscope
