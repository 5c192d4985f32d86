// The reader finds ops through op_blocks, not indexes: a trace written by the TraceWriter the way
// the profiler writes it (ids taken at op start from one counter, records handed over in end
// order in per-thread buffers, part-full buffers at step ends, three threads interleaving, a
// run-long op that ends last) is read back through every reader query and compared with the same
// query answered by brute force over the records themselves. Also: rows inserted without blocks
// are still read, and a schema-1 file is migrated to blocks.
#include <sqlite3.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <random>

#include "npuscope/store/database.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "schema_downgrade.h"
#include "npuscope/store/trace_writer.h"
#include "support/scratch_db.h"

namespace npuscope {
namespace {

using testing_support::tempPath;
using testing_support::scalar;

// Simulates the recorder: events pick a random thread, which starts an op (id from one counter)
// or ends its innermost one (the record goes to the thread's buffer).
struct Simulation {
  std::vector<OpRecord> all;  // every record, in end order
  int64_t last_step = 0;

  void run(TraceWriter* w, int64_t target_ops, uint32_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> names;
    for (int i = 0; i < 12; ++i) names.push_back(StringTable::global().intern("aten::blk_op_" + std::to_string(i)));
    const uint32_t epoch_name = StringTable::global().intern("epoch");
    struct Thread {
      uint64_t tid;
      std::vector<OpRecord> stack;
      std::unique_ptr<OpBuffer> buf;
    };
    std::vector<Thread> threads;
    for (uint64_t tid : {1, 2, 3}) threads.push_back(Thread{tid, {}, w->takeBuffer()});
    int64_t next_id = 1, t = 1000, step = 0, events = 0;
    auto start = [&](Thread& th, uint32_t name) {
      OpRecord r;
      r.id = next_id++;
      r.parent_id = th.stack.empty() ? -1 : th.stack.back().id;
      r.start_ns = t;
      r.thread_id = th.tid;
      r.depth = static_cast<int16_t>(th.stack.size());
      r.name_id = name;
      r.is_backward = th.tid != 1;
      th.stack.push_back(r);
    };
    auto finish = [&](Thread& th) {
      OpRecord r = th.stack.back();
      th.stack.pop_back();
      r.dur_ns = t - r.start_ns;
      r.step = static_cast<int32_t>(step);
      if (r.id % 3 == 0) {
        r.device = 0;
        r.device_start_ns = r.start_ns + r.dur_ns;
        r.device_dur_ns = 1 + r.id % 50;
      }
      all.push_back(r);
      th.buf->records[th.buf->size++] = r;
      if (th.buf->full()) {
        ASSERT_TRUE(w->submit(th.buf));
      }
    };
    start(threads[0], epoch_name);  // ends last: its id is far from every other op of thread 1
    while (static_cast<int64_t>(all.size()) < target_ops) {
      // Thread 1 does most work; threads 2 and 3 interleave op by op, like backward threads.
      const size_t pick = rng() % 10 < 6 ? 0 : 1 + rng() % 2;
      Thread& th = threads[pick];
      t += 1 + static_cast<int64_t>(rng() % 40);
      const size_t floor = pick == 0 ? 1 : 0;  // the epoch op stays open
      if (th.stack.size() > floor && (th.stack.size() >= 5 || rng() % 2)) {
        finish(th);
      } else {
        start(th, names[rng() % names.size()]);
      }
      if (++events % 5000 == 0) {  // a step boundary: every thread hands its part-full buffer over
        ++step;
        for (Thread& x : threads) ASSERT_TRUE(w->submit(x.buf));
        w->waitForBacklog(1 << 16);
      }
    }
    for (Thread& th : threads) {
      while (!th.stack.empty()) {
        t += 7;
        finish(th);
      }
      ASSERT_TRUE(w->submit(th.buf));
    }
    last_step = step;
  }
};

class OpBlocks : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(tempPath("sim.db"));
    sim_ = new Simulation();
    TraceWriter::Options options;
    options.max_queued_buffers = 4096;
    auto w = TraceWriter::open(*path_, options);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    ASSERT_TRUE((*w)->beginRun(RunInfo{}).isOk());
    // Enough ops that whole-run reads split into parts read in parallel (from 400k rows).
    sim_->run(w->get(), 450000, 7);
    ASSERT_TRUE((*w)->flush().isOk());
    ASSERT_EQ((*w)->droppedRecords(), 0u);
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  static void TearDownTestSuite() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((*path_ + suffix).c_str());
    delete sim_;
    delete path_;
  }
  void SetUp() override {
    auto r = TraceReader::open(*path_);
    ASSERT_TRUE(r.isOk()) << r.status().message();
    reader_ = std::move(*r);
  }
  static std::string* path_;
  static Simulation* sim_;
  std::unique_ptr<TraceReader> reader_;
};
std::string* OpBlocks::path_ = nullptr;
Simulation* OpBlocks::sim_ = nullptr;

TEST_F(OpBlocks, EveryOpIsInExactlyOneBlockOfItsThread) {
  sqlite3* db = reader_->db();
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM op_events"), static_cast<int64_t>(sim_->all.size()));
  EXPECT_EQ(scalar(db, "SELECT sum(ops) FROM op_blocks"), static_cast<int64_t>(sim_->all.size()));
  // Each op lies in the id range of a block of its thread whose bounds hold it (every 16th op:
  // the check is a query per op).
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM op_events e WHERE e.id % 16 = 0 AND NOT EXISTS (SELECT 1 FROM op_blocks b"
                       " WHERE b.run_id = e.run_id AND b.thread_id = e.thread_id AND e.id BETWEEN b.first_id AND"
                       " b.last_id AND e.start_ns BETWEEN b.min_start_ns AND b.max_start_ns AND"
                       " e.start_ns + e.dur_ns <= b.max_end_ns AND e.step BETWEEN b.min_step AND b.max_step)"),
            0);
  // Blocks are few and tight: the run-long op (id 1) is a block of its own instead of stretching
  // one over the whole run, and the blocks' id ranges add up to about one pass per thread (the
  // three threads here interleave op by op, the worst case).
  const int64_t blocks = scalar(db, "SELECT count(*) FROM op_blocks");
  EXPECT_LT(blocks, static_cast<int64_t>(sim_->all.size()) / 100);
  EXPECT_EQ(scalar(db, "SELECT ops FROM op_blocks WHERE first_id = 1"), 1);
  EXPECT_LT(scalar(db, "SELECT sum(last_id - first_id + 1) FROM op_blocks"),
            35 * static_cast<int64_t>(sim_->all.size()) / 10);
  // No secondary index is left on op_events.
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'op_events'"), 0);
}

TEST_F(OpBlocks, ThreadsMatchTheRecords) {
  std::map<int64_t, ThreadSummary> want;
  for (const OpRecord& r : sim_->all) {
    auto [it, fresh] = want.try_emplace(static_cast<int64_t>(r.thread_id));
    ThreadSummary& t = it->second;
    if (fresh) {
      t.thread_id = static_cast<int64_t>(r.thread_id);
      t.first_start_ns = r.start_ns;
      t.last_end_ns = r.start_ns + r.dur_ns;
    }
    ++t.op_count;
    t.backward_op_count += r.is_backward;
    t.first_start_ns = std::min(t.first_start_ns, r.start_ns);
    t.last_end_ns = std::max(t.last_end_ns, r.start_ns + r.dur_ns);
  }
  auto got = reader_->threads(1);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  ASSERT_EQ(got->size(), want.size());
  for (const ThreadSummary& t : *got) {
    const ThreadSummary& w = want.at(t.thread_id);
    EXPECT_EQ(t.op_count, w.op_count) << t.thread_id;
    EXPECT_EQ(t.backward_op_count, w.backward_op_count) << t.thread_id;
    EXPECT_EQ(t.first_start_ns, w.first_start_ns) << t.thread_id;
    EXPECT_EQ(t.last_end_ns, w.last_end_ns) << t.thread_id;
  }
}

TEST_F(OpBlocks, TimelinesAndCursorsMatchTheRecords) {
  std::vector<OpRecord> by_id = sim_->all;
  std::sort(by_id.begin(), by_id.end(), [](const OpRecord& a, const OpRecord& b) { return a.id < b.id; });
  const int64_t t0 = by_id.front().start_ns, t1 = by_id.back().start_ns;
  std::mt19937_64 rng(11);
  for (int q = 0; q < 24; ++q) {
    const int64_t tid = 1 + static_cast<int64_t>(rng() % 3);
    const int64_t span = q % 3 == 0 ? 2000 : (q % 3 == 1 ? 200000 : 3000000);
    const int64_t b = t0 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t1 - t0));
    const int64_t e = b + span;
    const int64_t min_dur = q % 4 == 0 ? 60 : 0;
    std::vector<int64_t> want_tl, want_cur;
    for (const OpRecord& r : by_id) {
      if (static_cast<int64_t>(r.thread_id) != tid) continue;
      const bool in = r.start_ns >= b && r.start_ns < e;
      if ((in && r.dur_ns >= min_dur) || (r.start_ns < b && r.start_ns + r.dur_ns > b)) want_tl.push_back(r.id);
      if (in) want_cur.push_back(r.id);
    }
    TimelineQuery tq;
    tq.run_id = 1;
    tq.thread_id = tid;
    tq.window = TimeWindow{b, e};
    tq.min_dur_ns = min_dur;
    auto tl = reader_->timeline(tq);
    ASSERT_TRUE(tl.isOk()) << tl.status().message();
    std::vector<int64_t> got_tl;
    for (const OpSlice& s : *tl) got_tl.push_back(s.id);
    EXPECT_EQ(got_tl, want_tl) << "query " << q << " thread " << tid << " window " << b << ".." << e;
    // Start order: ids and starts both ascend.
    for (size_t i = 1; i < tl->size(); ++i) EXPECT_LE((*tl)[i - 1].start_ns, (*tl)[i].start_ns);

    auto cur = reader_->openOpCursor(1, tid, TimeWindow{b, e});
    ASSERT_TRUE(cur.isOk());
    std::vector<int64_t> got_cur;
    OpSlice s;
    while (cur->next(&s)) got_cur.push_back(s.id);
    ASSERT_TRUE(cur->status().isOk()) << cur->status().message();
    EXPECT_EQ(got_cur, want_cur) << "query " << q;
  }
  // A whole thread through the cursor: every op, in start order.
  auto cur = reader_->openOpCursor(1, 2, TimeWindow{});
  ASSERT_TRUE(cur.isOk());
  int64_t n = 0, last = std::numeric_limits<int64_t>::min();
  OpSlice s;
  while (cur->next(&s)) {
    EXPECT_GE(s.start_ns, last);
    last = s.start_ns;
    ++n;
  }
  EXPECT_EQ(n, std::count_if(by_id.begin(), by_id.end(), [](const OpRecord& r) { return r.thread_id == 2; }));
}

// Brute-force op table: selected ops start in the window and lie in the step range; self time
// subtracts the direct children the same filter reads (a child starts after its parent, so only
// the step filter can leave one out).
struct WantRow {
  int64_t calls = 0, total = 0, self = 0, device = 0;
};
std::map<std::string, WantRow> bruteForceTable(const std::vector<OpRecord>& all, const TimeWindow& w,
                                               const std::optional<StepRange>& steps, int64_t* selected) {
  auto inSteps = [&](const OpRecord& r) { return !steps || (r.step >= steps->first && r.step <= steps->last); };
  std::unordered_map<int64_t, int64_t> child_dur;
  for (const OpRecord& r : all) {
    if (r.parent_id >= 0 && r.start_ns >= w.begin_ns && inSteps(r)) child_dur[r.parent_id] += r.dur_ns;
  }
  const std::vector<std::string> names = StringTable::global().since(1);  // id i is names[i - 1]
  std::map<std::string, WantRow> out;
  *selected = 0;
  for (const OpRecord& r : all) {
    if (!w.contains(r.start_ns) || !inSteps(r)) continue;
    WantRow& row = out[names[r.name_id - 1]];
    ++row.calls;
    row.total += r.dur_ns;
    row.self += r.dur_ns - child_dur[r.id];
    row.device += r.device_dur_ns > 0 ? r.device_dur_ns : 0;
    ++*selected;
  }
  return out;
}

TEST_F(OpBlocks, AggregatesMatchTheRecords) {
  std::vector<OpRecord> by_id = sim_->all;
  std::sort(by_id.begin(), by_id.end(), [](const OpRecord& a, const OpRecord& b) { return a.id < b.id; });
  const int64_t t0 = by_id.front().start_ns, t1 = by_id.back().start_ns;
  struct Case {
    TimeWindow window;
    std::optional<StepRange> steps;
  };
  std::vector<Case> cases = {
      {TimeWindow{}, std::nullopt},                                   // the whole run, read in parallel
      {TimeWindow{t0 + (t1 - t0) / 3, t0 + (t1 - t0) / 3 + 50000}, std::nullopt},  // a small window
      {TimeWindow{t0 + (t1 - t0) / 4, t0 + 3 * (t1 - t0) / 4}, std::nullopt},       // half the run
      {TimeWindow{}, StepRange{10, 12}},
      {TimeWindow{t0 + (t1 - t0) / 2, t1 + 1}, StepRange{20, sim_->last_step}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    OpAggregateQuery q;
    q.run_id = 1;
    q.window = cases[c].window;
    q.steps = cases[c].steps;
    auto table = reader_->opAggregates(q);
    ASSERT_TRUE(table.isOk()) << table.status().message();
    int64_t selected = 0;
    auto want = bruteForceTable(sim_->all, q.window, q.steps, &selected);
    EXPECT_EQ(table->op_count, selected) << "case " << c;
    ASSERT_EQ(table->rows.size(), want.size()) << "case " << c;
    for (const OpAggregate& row : table->rows) {
      const WantRow& w = want.at(row.name);
      EXPECT_EQ(row.calls, w.calls) << "case " << c << " " << row.name;
      EXPECT_EQ(row.total_ns, w.total) << "case " << c << " " << row.name;
      EXPECT_EQ(row.self_ns, w.self) << "case " << c << " " << row.name;
      EXPECT_EQ(row.device_ns, w.device) << "case " << c << " " << row.name;
    }
  }
}

TEST_F(OpBlocks, DeviceTimePerStepMatchesTheRecords) {
  std::map<int64_t, StepDeviceTime> want;
  for (const OpRecord& r : sim_->all) {
    StepDeviceTime& t = want[r.step];
    t.step = r.step;
    ++t.ops;
    if (r.device_dur_ns < 0) continue;
    ++t.device_ops;
    t.device_busy_ns += r.device_dur_ns;
    t.device_first_ns = t.device_first_ns < 0 ? r.device_start_ns : std::min(t.device_first_ns, r.device_start_ns);
    t.device_last_ns = std::max(t.device_last_ns, r.device_start_ns + r.device_dur_ns);
  }
  auto got = reader_->stepDeviceTimes(1);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  ASSERT_EQ(got->size(), want.size());
  for (const StepDeviceTime& t : *got) {
    const StepDeviceTime& w = want.at(t.step);
    EXPECT_EQ(t.ops, w.ops) << t.step;
    EXPECT_EQ(t.device_ops, w.device_ops) << t.step;
    EXPECT_EQ(t.device_busy_ns, w.device_busy_ns) << t.step;
    EXPECT_EQ(t.device_first_ns, w.device_first_ns) << t.step;
    EXPECT_EQ(t.device_last_ns, w.device_last_ns) << t.step;
  }
}

// Rows another program inserts without blocks (ids above every block) are read by every query.
TEST(OpBlocksTail, RowsWithoutBlocksAreStillRead) {
  const std::string path = tempPath("tail.db");
  {
    auto w = TraceWriter::open(path, {});
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(RunInfo{}).isOk());
    auto buf = (*w)->takeBuffer();
    const uint32_t name = StringTable::global().intern("aten::written");
    for (int i = 0; i < 10; ++i) {
      OpRecord& r = buf->records[buf->size++];
      r.id = i + 1;
      r.start_ns = 100 + 10 * i;
      r.dur_ns = 5;
      r.thread_id = 1;
      r.name_id = name;
      r.step = 0;
    }
    ASSERT_TRUE((*w)->submit(buf));
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  {
    auto db = openTraceDatabase(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(),
                        "INSERT OR IGNORE INTO strings(value) VALUES ('user::inserted');"
                        "WITH RECURSIVE n(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM n WHERE v < 5)"
                        " INSERT INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth)"
                        " SELECT 100 + v, 1, 0, (SELECT id FROM strings WHERE value = 'user::inserted'),"
                        " 1000 + 10 * v, 5, 1 + v % 2, 0 FROM n")
                    .isOk());
  }
  auto r = TraceReader::open(path);
  ASSERT_TRUE(r.isOk());
  auto threads = (*r)->threads(1);
  ASSERT_TRUE(threads.isOk());
  ASSERT_EQ(threads->size(), 2u);
  EXPECT_EQ((*threads)[0].op_count + (*threads)[1].op_count, 16);
  OpAggregateQuery q;
  q.run_id = 1;
  auto table = (*r)->opAggregates(q);
  ASSERT_TRUE(table.isOk());
  EXPECT_EQ(table->op_count, 16);
  TimelineQuery tq;
  tq.run_id = 1;
  tq.thread_id = 1;
  tq.window = TimeWindow{0, 2000};
  auto tl = (*r)->timeline(tq);
  ASSERT_TRUE(tl.isOk());
  EXPECT_EQ(tl->size(), 13u);  // 10 written + 3 inserted on thread 1
  auto steps = (*r)->stepDeviceTimes(1);
  ASSERT_TRUE(steps.isOk());
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0].ops, 16);
}

// A file of schema version 1 (two op_events indexes, no op_blocks) gets blocks when it is opened
// for writing, and reads the same.
TEST(OpBlocksMigration, SchemaOneFileGetsBlocks) {
  const std::string path = tempPath("v1.db");
  {
    auto db = openTraceDatabase(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    // Turn the fresh file back into a schema-1 file holding two threads' ops.
    ASSERT_TRUE(execSql(db->get(),
                        test::downgradeSql(1) +
                            "INSERT INTO runs(started_ns, wall_start_ns, status) VALUES (0, 0, 'completed');"
                            "INSERT INTO strings(value) VALUES ('aten::old');"
                            "INSERT INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth,"
                            " is_backward) VALUES (1, 1, 0, 1, 10, 100, 1, 0, 0), (2, 1, 0, 1, 20, 30, 1, 1, 0),"
                            " (3, 1, 1, 1, 200, 50, 2, 0, 1);")
                    .isOk());
  }
  {
    auto ro = TraceReader::open(path);
    ASSERT_FALSE(ro.isOk());  // read-only opens refuse to migrate
    EXPECT_NE(ro.status().message().find("needs migrating"), std::string::npos) << ro.status().message();
  }
  {
    auto db = openTraceDatabase(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk()) << db.status().message();
    EXPECT_EQ(scalar(db->get(), "PRAGMA user_version"), currentSchemaVersion());
    EXPECT_EQ(scalar(db->get(), "SELECT count(*) FROM op_blocks"), 2);
    EXPECT_EQ(scalar(db->get(), "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'op_events'"),
              0);
  }
  auto r = TraceReader::open(path);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  auto threads = (*r)->threads(1);
  ASSERT_TRUE(threads.isOk());
  ASSERT_EQ(threads->size(), 2u);
  EXPECT_EQ((*threads)[0].op_count, 2);
  EXPECT_EQ((*threads)[1].backward_op_count, 1);
  TimelineQuery tq;
  tq.run_id = 1;
  tq.thread_id = 1;
  tq.window = TimeWindow{25, 1000};
  auto tl = (*r)->timeline(tq);
  ASSERT_TRUE(tl.isOk());
  ASSERT_EQ(tl->size(), 2u);  // both thread-1 ops run at 25
  EXPECT_EQ((*tl)[0].id, 1);
  EXPECT_EQ((*tl)[1].id, 2);
}

// Every field of two op tables, row by row.
void expectSameTable(const OpAggregateTable& got, const OpAggregateTable& want, const std::string& what) {
  EXPECT_EQ(got.op_count, want.op_count) << what;
  EXPECT_EQ(got.group_count, want.group_count) << what;
  EXPECT_EQ(got.self_sum_ns, want.self_sum_ns) << what;
  EXPECT_EQ(got.total_device_ns, want.total_device_ns) << what;
  ASSERT_EQ(got.rows.size(), want.rows.size()) << what;
  for (size_t i = 0; i < got.rows.size(); ++i) {
    const OpAggregate &g = got.rows[i], &w = want.rows[i];
    const std::string row = what + " row " + std::to_string(i) + " " + w.name + " " + w.input_shapes;
    EXPECT_EQ(g.name, w.name) << row;
    EXPECT_EQ(g.input_shapes, w.input_shapes) << row;
    EXPECT_EQ(g.calls, w.calls) << row;
    EXPECT_EQ(g.total_ns, w.total_ns) << row;
    EXPECT_EQ(g.self_ns, w.self_ns) << row;
    EXPECT_EQ(g.min_ns, w.min_ns) << row;
    EXPECT_EQ(g.max_ns, w.max_ns) << row;
    EXPECT_EQ(g.device_ns, w.device_ns) << row;
    EXPECT_DOUBLE_EQ(g.self_pct, w.self_pct) << row;
  }
}

// The whole-run table comes from the op_totals rows the writer stored as the run ended (one per
// name and shapes), and is the table the ops themselves give: a window that holds every op makes
// the reader read them.
TEST_F(OpBlocks, TheWholeRunTableIsStoredAndMatchesTheOps) {
  EXPECT_EQ(scalar(reader_->db(), "SELECT count(*) FROM op_totals WHERE run_id = 1"), 13);  // 12 names + epoch
  EXPECT_EQ(scalar(reader_->db(), "SELECT sum(calls) FROM op_totals WHERE run_id = 1"),
            static_cast<int64_t>(sim_->all.size()));
  for (OpGroupBy by : {OpGroupBy::kName, OpGroupBy::kNameAndShapes}) {
    OpAggregateQuery whole;
    whole.run_id = 1;
    whole.group_by = by;
    OpAggregateQuery scanned = whole;
    scanned.window.begin_ns = std::numeric_limits<int64_t>::min() + 1;  // bounded: every op is read
    auto stored = reader_->opAggregates(whole);
    auto read = reader_->opAggregates(scanned);
    ASSERT_TRUE(stored.isOk() && read.isOk());
    expectSameTable(*stored, *read, by == OpGroupBy::kName ? "by name" : "by shapes");
  }
}

// A file whose stored rows count more calls than its ops (another program's edit, a corrupt
// file): the sums saturate rather than overflow, and the table is read from the ops.
TEST_F(OpBlocks, StoredRowsThatDisagreeWithTheOpsAreNotUsed) {
  const std::string copy = tempPath("sim_edited.db");
  ASSERT_EQ(sqlite3_exec(reader_->db(), ("VACUUM INTO '" + copy + "'").c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(copy.c_str(), &db), SQLITE_OK);
  // A second row for the first name (other shapes), both with the largest count a file can hold.
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO op_totals SELECT run_id, name_id, shapes_id + 1000, calls, total_ns, self_ns,"
                         " min_ns, max_ns, device_ns, device_calls FROM op_totals ORDER BY rowid LIMIT 1;"
                         "UPDATE op_totals SET calls = 9223372036854775807, device_calls = 9223372036854775807"
                         " WHERE name_id = (SELECT name_id FROM op_totals ORDER BY rowid LIMIT 1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto edited = TraceReader::open(copy);
  ASSERT_TRUE(edited.isOk()) << edited.status().message();
  OpAggregateQuery whole;
  whole.run_id = 1;
  auto got = (*edited)->opAggregates(whole);
  auto want = reader_->opAggregates(whole);
  ASSERT_TRUE(got.isOk() && want.isOk());
  expectSameTable(*got, *want, "edited file");
  EXPECT_EQ(got->op_count, static_cast<int64_t>(sim_->all.size()));
  edited->reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((copy + suffix).c_str());
}

// Ops handed over in start order, as an import writes them: parents before their children, some
// 100k ids before (the writer's recent ids no longer hold them: it looks them up at the end), with
// input shapes and device time. The stored table, by name and by shapes, is the one a brute force
// over the records gives, every field.
TEST(OpTotals, ParentsFarBeforeTheirChildrenAndShapes) {
  const std::string path = tempPath("totals.db");
  std::vector<OpRecord> all;
  {
    TraceWriter::Options options;
    options.max_queued_buffers = 1024;
    auto w = TraceWriter::open(path, options);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    ASSERT_TRUE((*w)->beginRun(RunInfo{}).isOk());
    std::vector<uint32_t> names, shapes;
    for (int i = 0; i < 5; ++i) names.push_back(StringTable::global().intern("aten::tot_" + std::to_string(i)));
    for (int i = 0; i < 3; ++i) shapes.push_back(StringTable::global().intern("[[" + std::to_string(i + 1) + "]]"));
    std::mt19937_64 rng(11);
    const int64_t n = 200000;
    for (int64_t id = 1; id <= n; ++id) {
      OpRecord r;
      r.id = id;
      r.thread_id = 1;
      r.start_ns = 10 * id;
      r.dur_ns = 1 + static_cast<int64_t>(rng() % 1000);
      r.name_id = names[static_cast<size_t>(id % 5)];
      r.shapes_id = id % 4 == 0 ? 0 : shapes[static_cast<size_t>(id % 3)];
      if (id > 1) {
        const int64_t kind = id % 10;
        r.parent_id = kind == 0 ? 1 : kind < 4 ? id - 1 - static_cast<int64_t>(rng() % 50)
                                    : kind == 4 && id > 100001 ? id - 100000 : -1;
      }
      if (id % 3 == 0) r.device_dur_ns = static_cast<int64_t>(rng() % 500);
      all.push_back(r);
    }
    auto buf = (*w)->takeBuffer();
    for (const OpRecord& r : all) {
      buf->records[buf->size++] = r;
      if (buf->full()) {
        ASSERT_TRUE((*w)->submit(buf));
      }
    }
    ASSERT_TRUE((*w)->submit(buf));
    ASSERT_TRUE((*w)->flush().isOk());
    ASSERT_EQ((*w)->droppedRecords(), 0u);
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  const std::vector<std::string> strings = StringTable::global().since(1);  // id i is strings[i - 1]
  auto r = TraceReader::open(path);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(scalar((*r)->db(), "SELECT count(*) FROM op_totals WHERE run_id = 1"), 5 * 4);  // each name: 3 shapes + none
  for (OpGroupBy by : {OpGroupBy::kName, OpGroupBy::kNameAndShapes}) {
    struct Want {
      int64_t calls = 0, total = 0, self = 0, min = std::numeric_limits<int64_t>::max(), max = 0, device = 0;
    };
    std::map<std::pair<std::string, std::string>, Want> want;
    std::unordered_map<int64_t, const OpRecord*> by_id;
    for (const OpRecord& o : all) by_id[o.id] = &o;
    auto keyOf = [&](const OpRecord& o) {
      return std::make_pair(strings[o.name_id - 1], by == OpGroupBy::kName || o.shapes_id == 0 ? std::string()
                                                                                            : strings[o.shapes_id - 1]);
    };
    for (const OpRecord& o : all) {
      Want& x = want[keyOf(o)];
      ++x.calls;
      x.total += o.dur_ns;
      x.self += o.dur_ns;
      x.min = std::min(x.min, o.dur_ns);
      x.max = std::max(x.max, o.dur_ns);
      x.device += o.device_dur_ns >= 0 ? o.device_dur_ns : 0;
    }
    for (const OpRecord& o : all) {
      if (o.parent_id >= 0) want[keyOf(*by_id.at(o.parent_id))].self -= o.dur_ns;
    }
    OpAggregateQuery q;
    q.run_id = 1;
    q.group_by = by;
    auto table = (*r)->opAggregates(q);
    ASSERT_TRUE(table.isOk()) << table.status().message();
    EXPECT_EQ(table->op_count, static_cast<int64_t>(all.size()));
    ASSERT_EQ(table->rows.size(), want.size());
    for (const OpAggregate& row : table->rows) {
      const Want& x = want.at({row.name, row.input_shapes});
      const std::string what = row.name + " " + row.input_shapes;
      EXPECT_EQ(row.calls, x.calls) << what;
      EXPECT_EQ(row.total_ns, x.total) << what;
      EXPECT_EQ(row.self_ns, x.self) << what;
      EXPECT_EQ(row.min_ns, x.min) << what;
      EXPECT_EQ(row.max_ns, x.max) << what;
      EXPECT_EQ(row.device_ns, x.device) << what;
    }
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

}  // namespace
}  // namespace npuscope
