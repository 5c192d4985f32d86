#include "npuscope/store/trace_reader.h"

#include <sqlite3.h>
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "npuscope/store/database.h"
#include "npuscope/store/op_aggregator.h"
#include "npuscope/store/saturating.h"

namespace npuscope {
namespace {

constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

// Resets a cached statement when the scope ends, so no statement keeps a read transaction
// open between calls (an open read would keep a live writer from checkpointing its WAL).
class StmtUse {
 public:
  explicit StmtUse(sqlite3_stmt* st) : st_(st) {}
  ~StmtUse() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  StmtUse(const StmtUse&) = delete;
  StmtUse& operator=(const StmtUse&) = delete;

 private:
  sqlite3_stmt* st_;
};

// Ends a snapshot when the scope ends.
class SnapshotScope {
 public:
  explicit SnapshotScope(TraceReader* r) : r_(r) { status_ = r_->beginSnapshot(); }
  ~SnapshotScope() {
    if (status_.isOk()) (void)r_->endSnapshot();
  }
  const Status& status() const { return status_; }

 private:
  TraceReader* r_;
  Status status_;
};

int64_t colInt(sqlite3_stmt* st, int col, int64_t none = -1) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? none : sqlite3_column_int64(st, col);
}

std::optional<int64_t> colOptInt(sqlite3_stmt* st, int col) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(st, col);
}

std::optional<double> colOptDouble(sqlite3_stmt* st, int col) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(st, col);
}

std::string colText(sqlite3_stmt* st, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, col));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st, col))) : std::string();
}

Status stepError(sqlite3* db, const char* what) { return ioError(std::string(what) + ": " + sqlite3_errmsg(db)); }

// Runs a statement expected to yield one integer; `none` when it yields no row or NULL.
StatusOr<int64_t> scalarInt(sqlite3* db, sqlite3_stmt* st, int64_t none, const char* what) {
  StmtUse use(st);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) return colInt(st, 0, none);
  if (rc == SQLITE_DONE) return none;
  return stepError(db, what);
}

const char kRunColumns[] =
    "id, started_ns, ended_ns, wall_start_ns, status, command, model, opt_level, optimizer, device, config_json,"
    " results_json, dropped_records, source, source_path, rank, world_size, job";

RunRow readRun(sqlite3_stmt* st) {
  RunRow r;
  r.id = sqlite3_column_int64(st, 0);
  r.started_ns = sqlite3_column_int64(st, 1);
  r.ended_ns = colOptInt(st, 2);
  r.wall_start_ns = sqlite3_column_int64(st, 3);
  r.status = colText(st, 4);
  r.command = colText(st, 5);
  r.model = colText(st, 6);
  r.opt_level = colText(st, 7);
  r.optimizer = colText(st, 8);
  r.device = colText(st, 9);
  r.config_json = colText(st, 10);
  r.results_json = colText(st, 11);
  r.dropped_records = colInt(st, 12, 0);
  r.source = colText(st, 13);
  r.source_path = colText(st, 14);
  r.rank = colInt(st, 15, -1);
  r.world_size = colInt(st, 16, -1);
  r.job = colText(st, 17);
  return r;
}

// The columns OpCursor reads, in this order.
const char kOpColumns[] =
    "id, parent_id, start_ns, dur_ns, thread_id, step, seq_nr, device_start_ns, device_dur_ns, depth, device,"
    " is_backward, name_id, shapes_id, dtypes_id, host_sync";

void readOpIds(sqlite3_stmt* st, OpSlice* o) {
  o->id = sqlite3_column_int64(st, 0);
  o->parent_id = colInt(st, 1);
  o->start_ns = sqlite3_column_int64(st, 2);
  o->dur_ns = sqlite3_column_int64(st, 3);
  o->thread_id = sqlite3_column_int64(st, 4);
  o->step = colInt(st, 5);
  o->seq_nr = colInt(st, 6);
  o->device_start_ns = colInt(st, 7);
  o->device_dur_ns = colInt(st, 8);
  o->depth = static_cast<int32_t>(sqlite3_column_int64(st, 9));
  o->device = static_cast<int32_t>(colInt(st, 10));
  o->is_backward = sqlite3_column_int64(st, 11) != 0;
  o->name_id = sqlite3_column_int64(st, 12);
  o->shapes_id = colInt(st, 13, 0);
  o->dtypes_id = colInt(st, 14, 0);
  o->host_sync = colInt(st, 15, 0) != 0;
}

// The columns of an aggregation scan, in this order. NULLs come as -1 (0 for shapes) from SQL,
// which saves a sqlite3_column_type call per column and row: at 10M rows every call counts.
const char kAggColumnsByName[] =
    "rowid, coalesce(parent_id, -1), name_id, 0, dur_ns, coalesce(device_dur_ns, -1), start_ns";
const char kAggColumnsByShapes[] =
    "rowid, coalesce(parent_id, -1), name_id, coalesce(shapes_id, 0), dur_ns, coalesce(device_dur_ns, -1), start_ns";

// Feeds every row of an aggregation scan to `agg`; rows starting at or after `end_ns` count
// only as children. Without a window end (and no `max_end` wanted) the start is not even read.
Status feedAggregator(sqlite3* db, sqlite3_stmt* st, bool by_shapes, int64_t end_ns, OpAggregator* agg,
                      int64_t* max_end) {
  const bool windowed = end_ns != kMaxTime || max_end;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const int64_t dur = sqlite3_column_int64(st, 4);
    bool selected = true;
    if (windowed) {
      const int64_t start = sqlite3_column_int64(st, 6);
      selected = start < end_ns;
      if (selected && max_end) *max_end = std::max(*max_end, saturatingAdd(start, dur));
    }
    agg->add(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
             by_shapes ? sqlite3_column_int64(st, 3) : 0, dur, sqlite3_column_int64(st, 5), selected);
  }
  if (rc != SQLITE_DONE) return stepError(db, "reading ops");
  return Status::ok();
}

// Splits ranges of op ids into parts of about equal width read in parallel: one per core (at
// most 4), or a single part when they hold too few rows to gain from threads.
std::vector<std::vector<OpIdRange>> splitRanges(const std::vector<OpIdRange>& ranges) {
  auto width = [](const OpIdRange& r) { return static_cast<double>(r.hi) - static_cast<double>(r.lo) + 1.0; };
  double rows = 0;
  for (const OpIdRange& r : ranges) rows += width(r);
  const size_t k = rows < 400000.0 ? 1 : std::max(1u, std::min(std::thread::hardware_concurrency(), 4u));
  std::vector<std::vector<OpIdRange>> parts(1);
  if (k == 1) {
    parts[0] = ranges;
    return parts;
  }
  const double per_part = rows / static_cast<double>(k);
  double filled = 0;
  for (OpIdRange r : ranges) {
    while (parts.size() < k && filled + width(r) > per_part) {
      const auto take = static_cast<int64_t>(per_part - filled);
      if (take > 0) {
        parts.back().push_back(OpIdRange{r.lo, r.lo + take - 1});
        r.lo += take;
      }
      parts.emplace_back();
      filled = 0;
    }
    parts.back().push_back(r);
    filled += width(r);
  }
  return parts;
}

// Runs `sql` (whose ?1 and ?2 bound the op id) over every range of every part, all parts at
// once: part 0 on the reader's connection (inside its snapshot), the others each on a read-only
// connection of its own. `consume(i, db, stmt)` reads one range of part i. Connections opened
// later may see a few more rows of a file that is still being written; that is the price of
// reading it in parallel.
Status scanRanges(sqlite3* main_db, const std::string& path, const std::string& sql,
                  const std::vector<std::vector<OpIdRange>>& parts, const std::function<void(sqlite3_stmt*)>& bind,
                  const std::function<Status(size_t, sqlite3*, sqlite3_stmt*)>& consume) {
  std::vector<Status> results(parts.size());
  auto job = [&](size_t i) {
    ScopedDb own;
    sqlite3* db = main_db;
    if (i > 0) {
      sqlite3* raw = nullptr;
      const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
      own = ScopedDb(raw);
      if (rc != SQLITE_OK) {
        results[i] = ioError(path + ": cannot open for a parallel read: " + (raw ? sqlite3_errmsg(raw) : "out of memory"));
        return;
      }
      sqlite3_busy_timeout(raw, 5000);
      db = raw;
    }
    auto st = prepare(db, sql);
    if (!st.isOk()) {
      results[i] = st.status();
      return;
    }
    // A read transaction over all of the part's ranges: one snapshot for the part.
    const bool txn = i > 0 && execSql(db, "BEGIN").isOk();
    for (const OpIdRange& r : parts[i]) {
      sqlite3_reset(st->get());
      sqlite3_bind_int64(st->get(), 1, r.lo);
      sqlite3_bind_int64(st->get(), 2, r.hi);
      bind(st->get());
      results[i] = consume(i, db, st->get());
      if (!results[i].isOk()) break;
    }
    sqlite3_reset(st->get());
    if (txn) (void)execSql(db, "COMMIT");
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < parts.size(); ++i) threads.emplace_back(job, i);
  job(0);
  for (auto& t : threads) t.join();
  for (const Status& r : results) RETURN_IF_ERROR(r);
  return Status::ok();
}

void bindStepFilter(sqlite3_stmt* st, int first_col, const std::optional<StepRange>& steps) {
  sqlite3_bind_int(st, first_col, steps ? 1 : 0);
  sqlite3_bind_int64(st, first_col + 1, steps ? steps->first : 0);
  sqlite3_bind_int64(st, first_col + 2, steps ? steps->last : 0);
}

}  // namespace

// Which op_blocks to read: blocks of the run (and thread) holding an op that starts in
// [start_from, start_before) and one that ends at or after end_from, in the step range.
struct TraceReader::BlockFilter {
  int64_t run_id = 0;
  std::optional<int64_t> thread_id;
  int64_t start_from = kMinTime;
  int64_t start_before = kMaxTime;
  int64_t end_from = kMinTime;
  std::optional<StepRange> steps;
};

StatusOr<int64_t> TraceReader::maxOpId() {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("max_op_id", "SELECT max(rowid) FROM op_events"));
  return scalarInt(db_.get(), st, kMinTime, "reading op ids");
}

// The op ids past the last block, up to the last op of this snapshot: rows another program
// inserted without blocks (test fixtures, users' own tools). Every query reads them too, with all
// its conditions in SQL.
StatusOr<std::optional<OpIdRange>> TraceReader::unblockedOps() {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("blocks_last_id", "SELECT max(last_id) FROM op_blocks"));
  ASSIGN_OR_RETURN(int64_t covered, scalarInt(db_.get(), st, kMinTime, "reading op blocks"));
  ASSIGN_OR_RETURN(int64_t max_id, maxOpId());
  if (max_id == kMinTime || max_id <= covered) return std::optional<OpIdRange>();
  if (covered == kMinTime) {
    ASSIGN_OR_RETURN(sqlite3_stmt * lo, cached("min_op_id", "SELECT min(rowid) FROM op_events"));
    ASSIGN_OR_RETURN(covered, scalarInt(db_.get(), lo, 1, "reading op ids"));
    covered = saturatingSub(covered, 1);
  }
  return std::optional<OpIdRange>(OpIdRange{covered + 1, max_id});
}

StatusOr<std::vector<OpIdRange>> TraceReader::opRanges(const BlockFilter& f) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("op_blocks",
                          "SELECT first_id, last_id FROM op_blocks WHERE run_id=?1 AND thread_id BETWEEN ?2 AND ?3"
                          " AND max_start_ns>=?4 AND min_start_ns<?5 AND max_end_ns>=?6"
                          " AND (?7=0 OR (max_step>=?8 AND min_step<=?9)) ORDER BY first_id"));
  // Blocks closer than this many ids are read as one range: skipping a few rows costs less than
  // another seek.
  constexpr int64_t kJoinGap = 256;
  std::vector<OpIdRange> blocks;
  {
    StmtUse use(st);
    sqlite3_bind_int64(st, 1, f.run_id);
    sqlite3_bind_int64(st, 2, f.thread_id ? *f.thread_id : kMinTime);
    sqlite3_bind_int64(st, 3, f.thread_id ? *f.thread_id : kMaxTime);
    sqlite3_bind_int64(st, 4, f.start_from);
    sqlite3_bind_int64(st, 5, f.start_before);
    sqlite3_bind_int64(st, 6, f.end_from);
    bindStepFilter(st, 7, f.steps);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      blocks.push_back(OpIdRange{sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1)});
    }
    if (rc != SQLITE_DONE) return stepError(db_.get(), "reading op blocks");
  }
  // In id order and disjoint even when a corrupt index returns blocks out of order: each op is
  // read once, and ids rise from range to range.
  const auto by_first_id = [](const OpIdRange& a, const OpIdRange& b) { return a.lo < b.lo; };
  if (!std::is_sorted(blocks.begin(), blocks.end(), by_first_id)) std::sort(blocks.begin(), blocks.end(), by_first_id);
  std::vector<OpIdRange> out;
  for (const OpIdRange& b : blocks) {
    if (!out.empty() && b.lo <= saturatingAdd(out.back().hi, kJoinGap)) {
      out.back().hi = std::max(out.back().hi, b.hi);
    } else {
      out.push_back(b);
    }
  }
  ASSIGN_OR_RETURN(std::optional<OpIdRange> tail, unblockedOps());
  if (tail) {
    while (!out.empty() && out.back().hi >= tail->lo) {  // cannot happen with ordered ids; be safe
      tail->lo = std::min(tail->lo, out.back().lo);
      out.pop_back();
    }
    out.push_back(*tail);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Opening, statements, strings, snapshots

StatusOr<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path) {
  ASSIGN_OR_RETURN(ScopedDb db, openTraceDatabase(path, OpenMode::kReadOnly));
  return std::unique_ptr<TraceReader>(new TraceReader(path, std::move(db)));
}

TraceReader::TraceReader(std::string path, ScopedDb db) : path_(std::move(path)), db_(std::move(db)) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_.get(), "PRAGMA user_version", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    schema_ = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
}

TraceReader::~TraceReader() {
  statements_.clear();  // finalize before the connection closes
  if (snapshot_depth_ > 0) (void)execSql(db_.get(), "COMMIT");
}

StatusOr<sqlite3_stmt*> TraceReader::cached(const char* key, const std::string& sql) {
  auto it = statements_.find(key);
  if (it == statements_.end()) {
    ASSIGN_OR_RETURN(ScopedStmt st, prepare(db_.get(), sql));
    it = statements_.emplace(key, std::move(st)).first;
  }
  return it->second.get();
}

Status TraceReader::beginSnapshot() {
  if (snapshot_depth_ == 0) RETURN_IF_ERROR(execSql(db_.get(), "BEGIN"));
  ++snapshot_depth_;
  return Status::ok();
}

Status TraceReader::endSnapshot() {
  if (snapshot_depth_ == 0) return failedPrecondition("endSnapshot without beginSnapshot");
  if (--snapshot_depth_ == 0) return execSql(db_.get(), "COMMIT");
  return Status::ok();
}

Status TraceReader::loadStrings() {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("strings", "SELECT id, value FROM strings WHERE id > ?1 ORDER BY id"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, max_string_id_);
  int rc;
  int64_t previous = max_string_id_, out_of_order = 0, first_bad = 0, first_bad_after = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const int64_t id = sqlite3_column_int64(st, 0);
    // Ids come in rising order from a sound file (they are the table's rowids). A row whose id
    // is not above the one before is damage: the names read may be wrong.
    if (id <= previous && out_of_order++ == 0) {
      first_bad = id;
      first_bad_after = previous;
    }
    previous = id;
    // An id already read keeps its value: the views stringValue() handed out point into it. (A
    // corrupt strings table can return an id twice; overwriting it freed what an op's name still
    // viewed: found by fuzz_trace_file.)
    strings_.try_emplace(id, colText(st, 1));
    max_string_id_ = std::max(max_string_id_, id);
  }
  if (out_of_order > 0) {
    noteDamage("its strings table returns " + std::to_string(out_of_order) + (out_of_order == 1 ? " row" : " rows") +
               " out of order (the first, id " + std::to_string(first_bad) + ", after id " +
               std::to_string(first_bad_after) + "): op names and shapes may be wrong");
  }
  if (rc != SQLITE_DONE) {
    // A corrupt table is not read again for every unknown id: that made reading a corrupt
    // file's ops quadratic (found by fuzz_trace_file). Other errors (a busy or failing disk)
    // are no damage: the next unknown id tries again.
    const int code = sqlite3_extended_errcode(db_.get()) & 0xff;
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
      strings_unreadable_ = true;
      noteDamage(std::string("its strings table cannot be read to the end (") + sqlite3_errmsg(db_.get()) +
                 "): op names may be missing");
    }
    return stepError(db_.get(), "reading strings");
  }
  return Status::ok();
}

void TraceReader::noteDamage(std::string what) {
  if (std::find(damage_.begin(), damage_.end(), what) == damage_.end()) damage_.push_back(std::move(what));
}

std::string_view TraceReader::stringValue(int64_t id) {
  if (id <= 0) return {};
  auto it = strings_.find(id);
  if (it == strings_.end() && id > max_string_id_ && !strings_unreadable_) {
    // A live file has grown: read the new strings. An unknown id stays "".
    (void)loadStrings();
    it = strings_.find(id);
  }
  if (it != strings_.end()) return it->second;
  // Below the largest id read, every id of a sound file is there (strings are written with, or
  // before, the rows that name them): a row names a string the table lacks.
  if (id <= max_string_id_ && !missing_string_noted_) {
    missing_string_noted_ = true;
    // No id in the sentence: the readers of one file (the GUI reads with several) say it alike.
    noteDamage("rows name strings that its strings table lacks: those names are empty");
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Runs and threads

StatusOr<std::vector<RunRow>> TraceReader::runs() {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("runs", std::string("SELECT ") + kRunColumns +
                                      " FROM runs ORDER BY wall_start_ns DESC, id DESC"));
  StmtUse use(st);
  std::vector<RunRow> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) out.push_back(readRun(st));
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading runs");
  return out;
}

StatusOr<RunRow> TraceReader::run(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("run", std::string("SELECT ") + kRunColumns + " FROM runs WHERE id=?1"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) return readRun(st);
  if (rc == SQLITE_DONE) return notFound(path_ + ": no run " + std::to_string(run_id));
  return stepError(db_.get(), "reading a run");
}

StatusOr<RunRow> TraceReader::latestRun() {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("latest_run", std::string("SELECT ") + kRunColumns +
                                            " FROM runs ORDER BY wall_start_ns DESC, id DESC LIMIT 1"));
  StmtUse use(st);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) return readRun(st);
  if (rc == SQLITE_DONE) return notFound(path_ + ": the file holds no run");
  return stepError(db_.get(), "reading runs");
}

StatusOr<std::vector<OpBlockSummary>> TraceReader::opBlocks(int64_t run_id) {
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("op_blocks_summary",
                          "SELECT thread_id, ops, min_start_ns, max_end_ns FROM op_blocks"
                          " WHERE run_id=?1 ORDER BY thread_id, first_id"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<OpBlockSummary> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    OpBlockSummary b;
    b.thread_id = sqlite3_column_int64(st, 0);
    b.ops = sqlite3_column_int64(st, 1);
    b.min_start_ns = sqlite3_column_int64(st, 2);
    b.max_end_ns = sqlite3_column_int64(st, 3);
    out.push_back(b);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading op blocks");
  return out;
}

// The threads of a run from its op blocks (and any ops past the last block).
StatusOr<std::vector<ThreadSummary>> TraceReader::threads(int64_t run_id) {
  auto hit = finished_run_threads_.find(run_id);
  if (hit != finished_run_threads_.end()) return hit->second;
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  ASSIGN_OR_RETURN(RunRow r, run(run_id));
  std::unordered_map<int64_t, ThreadSummary> merged;
  auto read = [&](sqlite3_stmt* st) -> Status {
    StmtUse use(st);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const int64_t tid = sqlite3_column_int64(st, 0);
      auto [it, fresh] = merged.try_emplace(tid);
      ThreadSummary& t = it->second;
      if (fresh) {
        t.thread_id = tid;
        t.first_start_ns = kMaxTime;
        t.last_end_ns = kMinTime;
      }
      t.op_count += sqlite3_column_int64(st, 1);
      t.backward_op_count += sqlite3_column_int64(st, 2);
      t.first_start_ns = std::min<int64_t>(t.first_start_ns, sqlite3_column_int64(st, 3));
      t.last_end_ns = std::max<int64_t>(t.last_end_ns, sqlite3_column_int64(st, 4));
    }
    if (rc != SQLITE_DONE) return stepError(db_.get(), "reading threads");
    return Status::ok();
  };
  ASSIGN_OR_RETURN(sqlite3_stmt * blocks,
                   cached("thread_blocks",
                          "SELECT thread_id, sum(ops), sum(backward_ops), min(min_start_ns), max(max_end_ns)"
                          " FROM op_blocks WHERE run_id=?1 GROUP BY thread_id"));
  sqlite3_bind_int64(blocks, 1, run_id);
  RETURN_IF_ERROR(read(blocks));
  ASSIGN_OR_RETURN(std::optional<OpIdRange> tail, unblockedOps());
  if (tail) {
    ASSIGN_OR_RETURN(sqlite3_stmt * rows,
                     cached("thread_rows",
                            "SELECT thread_id, count(*), sum(is_backward != 0), min(start_ns), max(start_ns + dur_ns)"
                            " FROM op_events WHERE rowid>=?1 AND run_id=?2 GROUP BY thread_id"));
    sqlite3_bind_int64(rows, 1, tail->lo);
    sqlite3_bind_int64(rows, 2, run_id);
    RETURN_IF_ERROR(read(rows));
  }
  std::vector<ThreadSummary> out;
  out.reserve(merged.size());
  for (auto& [tid, t] : merged) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const ThreadSummary& a, const ThreadSummary& b) {
    return a.first_start_ns != b.first_start_ns ? a.first_start_ns < b.first_start_ns : a.thread_id < b.thread_id;
  });
  if (r.status != "running" && r.ended_ns) finished_run_threads_[run_id] = out;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Op aggregates

StatusOr<OpAggregateTable> TraceReader::opAggregates(const OpAggregateQuery& q) {
  if (q.window.begin_ns >= q.window.end_ns) return invalidArgument("empty time window");
  if (q.steps && q.steps->first > q.steps->last) return invalidArgument("empty step range");
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());

  const bool by_shapes = q.group_by == OpGroupBy::kNameAndShapes;
  if (!q.window.bounded() && !q.steps) {
    // The whole run: the table its writer stored when it ended, if it did.
    ASSIGN_OR_RETURN(std::optional<OpAggregateTable> stored, storedOpTable(q, by_shapes));
    if (stored) return std::move(*stored);
  }
  BlockFilter f;
  f.run_id = q.run_id;
  f.steps = q.steps;
  if (q.window.bounded()) {
    // The window's ops and their descendants, which start before the last of those ends; later
    // ops are not read at all.
    ASSIGN_OR_RETURN(sqlite3_stmt * st,
                     cached("window_reach",
                            "SELECT max(max_end_ns) FROM op_blocks WHERE run_id=?1 AND max_start_ns>=?2"
                            " AND min_start_ns<?3"));
    sqlite3_bind_int64(st, 1, q.run_id);
    sqlite3_bind_int64(st, 2, q.window.begin_ns);
    sqlite3_bind_int64(st, 3, q.window.end_ns);
    ASSIGN_OR_RETURN(int64_t reach, scalarInt(db_.get(), st, kMinTime, "reading op blocks"));
    f.start_from = q.window.begin_ns;
    f.start_before = std::max(q.window.end_ns, reach == kMinTime || reach == kMaxTime ? reach : reach + 1);
  }
  ASSIGN_OR_RETURN(std::vector<OpIdRange> ranges, opRanges(f));
  const std::vector<std::vector<OpIdRange>> parts = splitRanges(ranges);

  // Ops starting after the window are still read (no upper time bound in SQL), as children of
  // ops in it; the aggregator counts them only as such.
  std::string sql = std::string("SELECT ") + (by_shapes ? kAggColumnsByShapes : kAggColumnsByName) +
                    " FROM op_events WHERE rowid BETWEEN ?1 AND ?2 AND run_id=?3";
  if (q.window.begin_ns != kMinTime) sql += " AND start_ns>=?4";
  if (q.steps) sql += " AND step BETWEEN ?5 AND ?6";
  std::vector<OpAggregator> aggs;
  for (size_t i = 0; i < parts.size(); ++i) aggs.emplace_back(by_shapes);
  RETURN_IF_ERROR(scanRanges(
      db_.get(), path_, sql, parts,
      [&](sqlite3_stmt* st) {
        // Parameters the statement does not use are refused by SQLite, harmlessly.
        sqlite3_bind_int64(st, 3, q.run_id);
        sqlite3_bind_int64(st, 4, q.window.begin_ns);
        sqlite3_bind_int64(st, 5, q.steps ? q.steps->first : 0);
        sqlite3_bind_int64(st, 6, q.steps ? q.steps->last : 0);
      },
      [&](size_t i, sqlite3* db, sqlite3_stmt* st) {
        return feedAggregator(db, st, by_shapes, q.window.end_ns, &aggs[i], nullptr);
      }));
  for (OpAggregator& a : aggs) a.finish();
  // Merge the parts, then settle children whose parent was read in another part.
  OpAggregator agg(by_shapes);
  std::vector<std::vector<int32_t>> to_merged;
  for (const OpAggregator& part : aggs) to_merged.push_back(agg.absorb(part));
  for (const OpAggregator& part : aggs) {
    for (const auto& [parent, dur] : part.pending()) {
      for (size_t j = 0; j < parts.size(); ++j) {
        const auto id = parent;  // C++17 lambdas cannot capture a structured binding (clang refuses)
        const bool holds = std::any_of(parts[j].begin(), parts[j].end(),
                                       [&](const OpIdRange& r) { return id >= r.lo && id <= r.hi; });
        if (!holds) continue;
        const int32_t g = aggs[j].groupOfOp(parent);
        if (g >= 0) agg.subtractChild(to_merged[j][static_cast<size_t>(g)], dur);
        break;
      }
    }
  }

  OpAggregateTable table = agg.table([&](int64_t id) { return std::string(stringValue(id)); }, q.sort, q.descending);
  if (q.top_n > 0 && table.rows.size() > q.top_n) table.rows.resize(q.top_n);
  return table;
}

// A run's op_totals rows (schema 13) as its op table; none when the run has no rows.
StatusOr<std::optional<OpAggregateTable>> TraceReader::storedOpTable(const OpAggregateQuery& q, bool by_shapes) {
  if (schema_ < 13) return std::optional<OpAggregateTable>();
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("op_totals", "SELECT name_id, shapes_id, calls, total_ns, self_ns, min_ns, max_ns, device_ns,"
                                       " device_calls FROM op_totals WHERE run_id=?1"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, q.run_id);
  OpAggregator agg(by_shapes);
  bool any = false;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    OpAggregator::Group g;
    g.name_id = sqlite3_column_int64(st, 0);
    g.shapes_id = sqlite3_column_int64(st, 1);
    g.calls = sqlite3_column_int64(st, 2);
    g.total = sqlite3_column_int64(st, 3);
    g.self = sqlite3_column_int64(st, 4);
    g.min = sqlite3_column_int64(st, 5);
    g.max = sqlite3_column_int64(st, 6);
    g.device = sqlite3_column_int64(st, 7);
    g.device_calls = sqlite3_column_int64(st, 8);
    agg.absorbGroup(g);
    any = true;
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading op totals");
  if (!any) return std::optional<OpAggregateTable>();
  // Rows other programs added since (past the blocks, or blocks of their own) are not in it:
  // then the ops are read.
  ASSIGN_OR_RETURN(std::optional<OpIdRange> tail, unblockedOps());
  if (tail) return std::optional<OpAggregateTable>();
  ASSIGN_OR_RETURN(sqlite3_stmt * count, cached("run_block_ops", "SELECT coalesce(sum(ops), 0) FROM op_blocks WHERE run_id=?1"));
  sqlite3_bind_int64(count, 1, q.run_id);
  ASSIGN_OR_RETURN(int64_t blocked, scalarInt(db_.get(), count, 0, "reading op blocks"));
  if (blocked != agg.selected()) return std::optional<OpAggregateTable>();
  OpAggregateTable table = agg.table([&](int64_t id) { return std::string(stringValue(id)); }, q.sort, q.descending);
  if (q.top_n > 0 && table.rows.size() > q.top_n) table.rows.resize(q.top_n);
  return std::optional<OpAggregateTable>(std::move(table));
}

// ---------------------------------------------------------------------------------------------
// Timeline and cursors

OpSlice TraceReader::opSliceAt(sqlite3_stmt* st) {
  OpSlice o;
  readOpIds(st, &o);
  o.name = stringValue(o.name_id);
  o.input_shapes = stringValue(o.shapes_id);
  o.input_dtypes = stringValue(o.dtypes_id);
  return o;
}

bool TraceReader::opInOrder(int64_t id, int64_t* last_id) {
  if (id > *last_id) {
    *last_id = id;
    return true;
  }
  noteDamage("its op_events table returns rows out of id order: the ops after such a row are not read");
  return false;
}

bool OpCursor::next(OpSlice* out) {
  while (status_.isOk() && stmt_.get()) {
    int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_ROW && !reader_->opInOrder(sqlite3_column_int64(stmt_.get(), 0), &last_id_)) rc = SQLITE_DONE;
    if (rc == SQLITE_ROW) {
      *out = reader_->opSliceAt(stmt_.get());
      return true;
    }
    if (rc != SQLITE_DONE) {
      status_ = ioError(std::string("reading ops: ") + sqlite3_errmsg(sqlite3_db_handle(stmt_.get())));
      break;
    }
    if (++next_range_ >= ranges_.size()) break;
    sqlite3_reset(stmt_.get());  // the next range; the other parameters stay bound
    sqlite3_bind_int64(stmt_.get(), 1, ranges_[next_range_].lo);
    sqlite3_bind_int64(stmt_.get(), 2, ranges_[next_range_].hi);
  }
  stmt_.reset();  // ends the statement's read as soon as the stream is exhausted
  return false;
}

// Within a thread, op ids increase with start time, so the thread's ranges read in id order
// stream its ops in start order.
StatusOr<OpCursor> TraceReader::openOpCursor(int64_t run_id, int64_t thread_id, const TimeWindow& window) {
  BlockFilter f;
  f.run_id = run_id;
  f.thread_id = thread_id;
  f.start_from = window.begin_ns;
  f.start_before = window.end_ns;
  std::vector<OpIdRange> ranges;
  {
    SnapshotScope snap(this);
    RETURN_IF_ERROR(snap.status());
    ASSIGN_OR_RETURN(ranges, opRanges(f));
  }
  ASSIGN_OR_RETURN(ScopedStmt st,
                   prepare(db_.get(), std::string("SELECT ") + kOpColumns +
                                          " FROM op_events WHERE rowid BETWEEN ?1 AND ?2 AND run_id=?3"
                                          " AND thread_id=?4 AND start_ns>=?5 AND start_ns<?6 ORDER BY rowid"));
  if (!ranges.empty()) {
    sqlite3_bind_int64(st.get(), 1, ranges[0].lo);
    sqlite3_bind_int64(st.get(), 2, ranges[0].hi);
  } else {
    sqlite3_bind_int64(st.get(), 1, 1);  // no rows
    sqlite3_bind_int64(st.get(), 2, 0);
  }
  sqlite3_bind_int64(st.get(), 3, run_id);
  sqlite3_bind_int64(st.get(), 4, thread_id);
  sqlite3_bind_int64(st.get(), 5, window.begin_ns);
  sqlite3_bind_int64(st.get(), 6, window.end_ns);
  return OpCursor(this, std::move(st), std::move(ranges));
}

StatusOr<std::vector<OpSlice>> TraceReader::timeline(const TimelineQuery& q) {
  if (q.window.begin_ns >= q.window.end_ns) return invalidArgument("empty time window");
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  // The ops starting in the window (at least min_dur_ns long), and those that began before it
  // and still run in it (its first op's ancestors, whatever their length), in start order.
  BlockFilter f;
  f.run_id = q.run_id;
  f.thread_id = q.thread_id;
  f.start_before = q.window.end_ns;
  f.end_from = q.window.begin_ns;
  ASSIGN_OR_RETURN(std::vector<OpIdRange> ranges, opRanges(f));
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("tl_window", std::string("SELECT ") + kOpColumns +
                                           " FROM op_events WHERE rowid BETWEEN ?1 AND ?2 AND run_id=?3"
                                           " AND thread_id=?4 AND start_ns<?5 AND ((start_ns>=?6 AND dur_ns>=?7)"
                                           " OR (start_ns<?6 AND start_ns+dur_ns>?6)) ORDER BY rowid"));
  std::vector<OpSlice> out;
  int64_t last_id = kMinTime;
  for (const OpIdRange& r : ranges) {
    StmtUse use(st);
    sqlite3_bind_int64(st, 1, r.lo);
    sqlite3_bind_int64(st, 2, r.hi);
    sqlite3_bind_int64(st, 3, q.run_id);
    sqlite3_bind_int64(st, 4, q.thread_id);
    sqlite3_bind_int64(st, 5, q.window.end_ns);
    sqlite3_bind_int64(st, 6, q.window.begin_ns);
    sqlite3_bind_int64(st, 7, q.min_dur_ns);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && opInOrder(sqlite3_column_int64(st, 0), &last_id)) {
      if (q.limit != 0 && out.size() >= q.limit) return out;
      out.push_back(opSliceAt(st));
    }
    if (rc == SQLITE_ROW) continue;  // out of order: damage, noted
    if (rc != SQLITE_DONE) return stepError(db_.get(), "reading the timeline");
  }
  return out;
}

StatusOr<OpSlice> TraceReader::opById(int64_t id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("op_by_id", std::string("SELECT ") + kOpColumns +
                                                             " FROM op_events WHERE rowid=?1"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, id);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return notFound(path_ + ": no op " + std::to_string(id));
  if (rc != SQLITE_ROW) return stepError(db_.get(), "reading an op");
  return opSliceAt(st);
}

StatusOr<std::vector<OpSlice>> TraceReader::stepOps(int64_t run_id, const StepRange& range) {
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  BlockFilter f;
  f.run_id = run_id;
  f.steps = range;
  ASSIGN_OR_RETURN(std::vector<OpIdRange> ranges, opRanges(f));
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("step_ops", std::string("SELECT ") + kOpColumns +
                                          " FROM op_events WHERE rowid BETWEEN ?1 AND ?2 AND run_id=?3"
                                          " AND step BETWEEN ?4 AND ?5 ORDER BY rowid"));
  std::vector<OpSlice> out;
  int64_t last_id = kMinTime;
  for (const OpIdRange& r : ranges) {
    StmtUse use(st);
    sqlite3_bind_int64(st, 1, r.lo);
    sqlite3_bind_int64(st, 2, r.hi);
    sqlite3_bind_int64(st, 3, run_id);
    sqlite3_bind_int64(st, 4, range.first);
    sqlite3_bind_int64(st, 5, range.last);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && opInOrder(sqlite3_column_int64(st, 0), &last_id)) {
      out.push_back(opSliceAt(st));
    }
    if (rc == SQLITE_ROW) continue;  // out of order: damage, noted
    if (rc != SQLITE_DONE) return stepError(db_.get(), "reading a step's ops");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Steps, overflow events, memory

StatusOr<std::vector<StepRow>> TraceReader::steps(int64_t run_id, const std::optional<StepRange>& range) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("steps",
                          "SELECT step, start_ns, dur_ns, loss, loss_scale, overflow, skipped, lr, grad_norm"
                          " FROM steps WHERE run_id=?1 AND step BETWEEN ?2 AND ?3 ORDER BY step"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, range ? range->first : kMinTime);
  sqlite3_bind_int64(st, 3, range ? range->last : kMaxTime);
  std::vector<StepRow> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    StepRow s;
    s.step = sqlite3_column_int64(st, 0);
    s.start_ns = sqlite3_column_int64(st, 1);
    s.dur_ns = sqlite3_column_int64(st, 2);
    s.loss = colOptDouble(st, 3);
    s.loss_scale = colOptDouble(st, 4);
    s.overflow = sqlite3_column_int64(st, 5) != 0;
    s.skipped = sqlite3_column_int64(st, 6) != 0;
    s.lr = colOptDouble(st, 7);
    s.grad_norm = colOptDouble(st, 8);
    out.push_back(s);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading steps");
  return out;
}

StatusOr<std::vector<OverflowEventRow>> TraceReader::overflowEvents(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("overflows",
                          "SELECT id, step, ts_ns, source, op_name, detail, op_id FROM overflow_events"
                          " WHERE run_id=?1 ORDER BY ts_ns, id"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<OverflowEventRow> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    OverflowEventRow o;
    o.id = sqlite3_column_int64(st, 0);
    o.step = colInt(st, 1);
    o.ts_ns = sqlite3_column_int64(st, 2);
    o.source = colText(st, 3);
    o.op_name = colText(st, 4);
    o.detail = colText(st, 5);
    o.op_id = colInt(st, 6);
    out.push_back(std::move(o));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading overflow events");
  return out;
}

StatusOr<int64_t> TraceReader::deviceTaskCount(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("task_count", "SELECT count(*) FROM device_tasks WHERE run_id=?1"));
  sqlite3_bind_int64(st, 1, run_id);
  return scalarInt(db_.get(), st, 0, "counting device tasks");
}

StatusOr<std::vector<DeviceTaskRow>> TraceReader::deviceTasks(int64_t run_id, const TimeWindow& window, size_t limit) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("tasks",
                          "SELECT t.id, t.step, t.op_id, t.device, t.stream, n.value, y.value, t.start_ns, t.dur_ns,"
                          " t.correlation, s.value, t.bytes, t.comm_group FROM device_tasks t"
                          " JOIN strings n ON n.id = t.name_id JOIN strings y ON y.id = t.type_id"
                          " LEFT JOIN strings s ON s.id = t.shapes_id"
                          " WHERE t.run_id=?1 AND t.start_ns >= ?2 AND t.start_ns < ?3 ORDER BY t.start_ns, t.id"
                          " LIMIT ?4"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, window.begin_ns);
  sqlite3_bind_int64(st, 3, window.end_ns);
  sqlite3_bind_int64(st, 4, limit == 0 ? -1 : static_cast<int64_t>(limit));
  std::vector<DeviceTaskRow> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    DeviceTaskRow t;
    t.id = sqlite3_column_int64(st, 0);
    t.step = colInt(st, 1);
    t.op_id = colInt(st, 2);
    t.device = sqlite3_column_int(st, 3);
    t.stream = sqlite3_column_int(st, 4);
    t.name = colText(st, 5);
    t.type = colText(st, 6);
    t.start_ns = sqlite3_column_int64(st, 7);
    t.dur_ns = sqlite3_column_int64(st, 8);
    t.correlation = colInt(st, 9);
    t.input_shapes = colText(st, 10);
    t.bytes = colInt(st, 11);
    t.comm_group = colText(st, 12);
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading device tasks");
  return out;
}

StatusOr<std::vector<CollectiveRow>> TraceReader::collectives(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("collectives",
                          "SELECT id, step, op_id, grp, seq, kind, dtype, bytes, group_size, start_ns, end_ns"
                          " FROM collectives WHERE run_id=? ORDER BY start_ns, id"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<CollectiveRow> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    CollectiveRow c;
    c.id = sqlite3_column_int64(st, 0);
    c.step = colInt(st, 1, -1);
    c.op_id = colInt(st, 2, -1);
    c.group = colInt(st, 3, 0);
    c.seq = colInt(st, 4, 0);
    c.kind = colText(st, 5);
    c.dtype = colText(st, 6);
    c.bytes = colInt(st, 7, 0);
    c.group_size = colInt(st, 8, 0);
    c.start_ns = sqlite3_column_int64(st, 9);
    c.end_ns = colInt(st, 10, -1);
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading collectives");
  return out;
}

StatusOr<std::vector<DeviceTaskAggregate>> TraceReader::deviceTaskAggregates(int64_t run_id, bool by_type) {
  const std::string key = by_type ? "y.value" : "n.value";
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached(by_type ? "task_agg_type" : "task_agg_name",
                          "SELECT " + key + ", min(y.value), count(*), sum(t.dur_ns), min(t.dur_ns), max(t.dur_ns)"
                          " FROM device_tasks t JOIN strings n ON n.id = t.name_id JOIN strings y ON y.id = t.type_id"
                          " WHERE t.run_id=?1 GROUP BY " + key + " ORDER BY 4 DESC, 1"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<DeviceTaskAggregate> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    DeviceTaskAggregate a;
    a.name = colText(st, 0);
    a.type = colText(st, 1);
    a.calls = sqlite3_column_int64(st, 2);
    a.total_ns = sqlite3_column_int64(st, 3);
    a.min_ns = sqlite3_column_int64(st, 4);
    a.max_ns = sqlite3_column_int64(st, 5);
    out.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading device tasks");
  return out;
}

// Per step, a run's real device tasks: busy time as the union of task intervals on each device
// (a CUDA stream waiting on an event, cuda_sync, is not busy).
StatusOr<std::vector<StepDeviceTime>> TraceReader::stepTaskTimes(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("step_tasks",
                          "SELECT step, device, start_ns, dur_ns FROM device_tasks WHERE run_id=?1 AND step IS NOT NULL"
                          " AND type_id NOT IN (SELECT id FROM strings WHERE value = 'cuda_sync')"
                          " ORDER BY step, device, start_ns"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<StepDeviceTime> out;
  int64_t device = -1, covered_to = INT64_MIN;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const int64_t step = sqlite3_column_int64(st, 0), dev = sqlite3_column_int64(st, 1);
    const int64_t start = sqlite3_column_int64(st, 2), end = saturatingAdd(start, sqlite3_column_int64(st, 3));
    if (out.empty() || out.back().step != step) {
      out.emplace_back();
      out.back().step = step;
      device = -1;
    }
    StepDeviceTime& t = out.back();
    if (dev != device) {
      device = dev;
      covered_to = INT64_MIN;
    }
    ++t.device_ops;
    if (end > covered_to) {
      t.device_busy_ns = saturatingAdd(t.device_busy_ns, saturatingSub(end, std::max(start, covered_to)));
      covered_to = end;
    }
    t.device_first_ns = t.device_first_ns < 0 ? start : std::min(t.device_first_ns, start);
    t.device_last_ns = std::max(t.device_last_ns, end);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading device tasks per step");
  return out;
}

StatusOr<std::vector<StepDeviceTime>> TraceReader::stepDeviceTimes(int64_t run_id) {
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  ASSIGN_OR_RETURN(const int64_t tasks, deviceTaskCount(run_id));
  BlockFilter f;
  f.run_id = run_id;
  f.steps = StepRange{};  // every step, no op outside one
  ASSIGN_OR_RETURN(std::vector<OpIdRange> ranges, opRanges(f));
  const std::vector<std::vector<OpIdRange>> parts = splitRanges(ranges);
  std::vector<std::unordered_map<int64_t, StepDeviceTime>> per_part(parts.size());
  RETURN_IF_ERROR(scanRanges(
      db_.get(), path_,
      "SELECT step, device_start_ns, device_dur_ns FROM op_events WHERE rowid BETWEEN ?1 AND ?2 AND run_id=?3"
      " AND step IS NOT NULL",
      parts, [&](sqlite3_stmt* st) { sqlite3_bind_int64(st, 3, run_id); },
      [&](size_t i, sqlite3* db, sqlite3_stmt* st) -> Status {
        auto& steps = per_part[i];
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
          const int64_t step = sqlite3_column_int64(st, 0);
          auto [it, fresh] = steps.try_emplace(step);
          StepDeviceTime& t = it->second;
          if (fresh) t.step = step;
          ++t.ops;
          if (sqlite3_column_type(st, 2) == SQLITE_NULL) continue;
          const int64_t start = sqlite3_column_int64(st, 1), dur = sqlite3_column_int64(st, 2);
          ++t.device_ops;
          t.device_busy_ns = saturatingAdd(t.device_busy_ns, dur);
          t.device_first_ns = t.device_first_ns < 0 ? start : std::min(t.device_first_ns, start);
          t.device_last_ns = std::max(t.device_last_ns, saturatingAdd(start, dur));
        }
        if (rc != SQLITE_DONE) return stepError(db, "reading device time per step");
        return Status::ok();
      }));
  std::map<int64_t, StepDeviceTime> merged;
  for (auto& steps : per_part) {
    for (auto& [step, t] : steps) {
      auto [it, fresh] = merged.try_emplace(step, t);
      if (fresh) continue;
      StepDeviceTime& m = it->second;
      m.ops += t.ops;
      m.device_ops += t.device_ops;
      m.device_busy_ns = saturatingAdd(m.device_busy_ns, t.device_busy_ns);
      if (t.device_first_ns >= 0) {
        m.device_first_ns = m.device_first_ns < 0 ? t.device_first_ns : std::min(m.device_first_ns, t.device_first_ns);
      }
      m.device_last_ns = std::max(m.device_last_ns, t.device_last_ns);
    }
  }
  if (tasks > 0) {
    // The real device lane: busy time from the tasks, op counts from the host ops.
    ASSIGN_OR_RETURN(std::vector<StepDeviceTime> real, stepTaskTimes(run_id));
    for (auto& [step, m] : merged) m.device_ops = m.device_busy_ns = 0, m.device_first_ns = m.device_last_ns = -1;
    for (const StepDeviceTime& t : real) {
      StepDeviceTime& m = merged.try_emplace(t.step).first->second;
      m.step = t.step;
      m.device_ops = t.device_ops;
      m.device_busy_ns = t.device_busy_ns;
      m.device_first_ns = t.device_first_ns;
      m.device_last_ns = t.device_last_ns;
    }
  }
  std::vector<StepDeviceTime> out;
  out.reserve(merged.size());
  for (auto& [step, t] : merged) out.push_back(t);
  return out;
}

StatusOr<std::vector<MemoryPeak>> TraceReader::memoryPeaks(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("memory_peaks",
                          "SELECT device, max(allocated), max(reserved), count(*) FROM memory"
                          " WHERE run_id=?1 GROUP BY device ORDER BY device"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<MemoryPeak> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    MemoryPeak p;
    p.device = static_cast<int32_t>(sqlite3_column_int64(st, 0));
    p.allocated = sqlite3_column_int64(st, 1);
    p.reserved = sqlite3_column_int64(st, 2);
    p.samples = sqlite3_column_int64(st, 3);
    out.push_back(p);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading memory peaks");
  return out;
}

bool MemoryCursor::next(MemorySample* out) {
  if (!status_.isOk() || !stmt_.get()) return false;
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) {
    out->ts_ns = sqlite3_column_int64(stmt_.get(), 0);
    out->device = static_cast<int32_t>(sqlite3_column_int64(stmt_.get(), 1));
    out->allocated = sqlite3_column_int64(stmt_.get(), 2);
    out->reserved = sqlite3_column_int64(stmt_.get(), 3);
    return true;
  }
  if (rc != SQLITE_DONE) {
    status_ = ioError(std::string("reading memory: ") + sqlite3_errmsg(sqlite3_db_handle(stmt_.get())));
  }
  stmt_.reset();
  return false;
}

StatusOr<MemoryCursor> TraceReader::openMemoryCursor(int64_t run_id, const TimeWindow& window) {
  ASSIGN_OR_RETURN(ScopedStmt st, prepare(db_.get(),
                                          "SELECT ts_ns, device, allocated, reserved FROM memory"
                                          " INDEXED BY memory_run_ts WHERE run_id=?1 AND ts_ns>=?2 AND ts_ns<?3"
                                          " ORDER BY ts_ns"));
  sqlite3_bind_int64(st.get(), 1, run_id);
  sqlite3_bind_int64(st.get(), 2, window.begin_ns);
  sqlite3_bind_int64(st.get(), 3, window.end_ns);
  return MemoryCursor(std::move(st));
}

StatusOr<std::vector<MemorySample>> TraceReader::memory(const MemoryQuery& q) {
  if (q.window.begin_ns >= q.window.end_ns) return invalidArgument("empty time window");
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  TimeWindow w = q.window;
  if (q.max_points > 0) {
    // Buckets span the samples actually present when the window is open-ended.
    ASSIGN_OR_RETURN(sqlite3_stmt * lo, cached("mem_first",
                                              "SELECT min(ts_ns) FROM memory WHERE run_id=?1 AND ts_ns>=?2 AND ts_ns<?3"));
    ASSIGN_OR_RETURN(sqlite3_stmt * hi, cached("mem_last",
                                              "SELECT max(ts_ns) FROM memory WHERE run_id=?1 AND ts_ns>=?2 AND ts_ns<?3"));
    for (sqlite3_stmt* st : {lo, hi}) {
      sqlite3_bind_int64(st, 1, q.run_id);
      sqlite3_bind_int64(st, 2, q.window.begin_ns);
      sqlite3_bind_int64(st, 3, q.window.end_ns);
    }
    ASSIGN_OR_RETURN(int64_t first, scalarInt(db_.get(), lo, kMaxTime, "reading memory"));
    ASSIGN_OR_RETURN(int64_t last, scalarInt(db_.get(), hi, kMinTime, "reading memory"));
    if (first > last) return std::vector<MemorySample>();
    w.begin_ns = first;
    w.end_ns = last == kMaxTime ? last : last + 1;
  }
  ASSIGN_OR_RETURN(MemoryCursor cur, openMemoryCursor(q.run_id, w));
  std::vector<MemorySample> out;
  MemorySample m;
  if (q.max_points == 0) {
    while (cur.next(&m)) {
      if (!q.device || m.device == *q.device) out.push_back(m);
    }
    RETURN_IF_ERROR(cur.status());
    return out;
  }
  // Per device: the bucket being filled and its best sample so far.
  struct Bucket {
    int64_t index = -1;
    MemorySample peak;
    int64_t max_reserved = 0;
  };
  std::unordered_map<int32_t, Bucket> open;
  const double span = static_cast<double>(w.end_ns) - static_cast<double>(w.begin_ns);
  const double per_bucket = span / static_cast<double>(q.max_points);
  auto flush = [&](Bucket& b) {
    if (b.index < 0) return;
    MemorySample s = b.peak;
    s.reserved = b.max_reserved;
    out.push_back(s);
  };
  while (cur.next(&m)) {
    if (q.device && m.device != *q.device) continue;
    auto idx = static_cast<int64_t>((static_cast<double>(m.ts_ns) - static_cast<double>(w.begin_ns)) / per_bucket);
    idx = std::min<int64_t>(idx, static_cast<int64_t>(q.max_points) - 1);
    Bucket& b = open[m.device];
    if (idx != b.index) {
      flush(b);
      b.index = idx;
      b.peak = m;
      b.max_reserved = m.reserved;
    } else {
      if (m.allocated > b.peak.allocated) b.peak = m;
      b.max_reserved = std::max(b.max_reserved, m.reserved);
    }
  }
  RETURN_IF_ERROR(cur.status());
  for (auto& [dev, b] : open) flush(b);
  std::sort(out.begin(), out.end(), [](const MemorySample& a, const MemorySample& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.device < b.device;
  });
  return out;
}

StatusOr<int64_t> TraceReader::earliestTime(int64_t run_id) {
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  ASSIGN_OR_RETURN(RunRow r, run(run_id));
  int64_t t = r.started_ns;
  ASSIGN_OR_RETURN(std::vector<ThreadSummary> threads_of_run, threads(run_id));
  for (const ThreadSummary& th : threads_of_run) t = std::min(t, th.first_start_ns);
  ASSIGN_OR_RETURN(sqlite3_stmt * others,
                   cached("earliest_others",
                          "SELECT min(coalesce((SELECT min(start_ns) FROM steps WHERE run_id=?1), ?2),"
                          " coalesce((SELECT min(ts_ns) FROM memory WHERE run_id=?1), ?2),"
                          " coalesce((SELECT min(ts_ns) FROM overflow_events WHERE run_id=?1), ?2),"
                          " coalesce((SELECT min(start_ns) FROM device_tasks WHERE run_id=?1), ?2))"));
  sqlite3_bind_int64(others, 1, run_id);
  sqlite3_bind_int64(others, 2, kMaxTime);
  ASSIGN_OR_RETURN(int64_t o, scalarInt(db_.get(), others, kMaxTime, "reading the run's start"));
  return std::min(t, o);
}

// ---------------------------------------------------------------------------------------------
// Tensor dumps

StatusOr<std::vector<TensorDumpInfo>> TraceReader::tensorDumps(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("dumps",
                          std::string("SELECT d.id, d.step, d.op_id, d.op_name, d.op_type, d.io, d.idx, d.dtype, d.shape,"
                                      " d.format, d.min, d.max, d.mean, d.l2norm, d.nan_count, d.inf_count,"
                                      " length(coalesce(d.data, r.data)), d.data_ref, ") +
                              (schema_ >= 9 ? "d.arg" : "NULL") +
                              " FROM tensor_dumps d LEFT JOIN tensor_dumps r ON r.id = d.data_ref"
                              " WHERE d.run_id=?1 ORDER BY d.id"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<TensorDumpInfo> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    TensorDumpInfo d;
    d.id = sqlite3_column_int64(st, 0);
    d.step = colInt(st, 1);
    d.op_id = colInt(st, 2);
    d.op_name = colText(st, 3);
    d.op_type = colText(st, 4);
    d.io = colText(st, 5);
    d.idx = sqlite3_column_int64(st, 6);
    d.dtype = colText(st, 7);
    d.shape = colText(st, 8);
    d.format = colText(st, 9);
    d.min = colOptDouble(st, 10);
    d.max = colOptDouble(st, 11);
    d.mean = colOptDouble(st, 12);
    d.l2norm = colOptDouble(st, 13);
    d.nan_count = colOptInt(st, 14);
    d.inf_count = colOptInt(st, 15);
    d.data_bytes = colInt(st, 16, 0);
    d.data_ref = colInt(st, 17, -1);
    d.arg = colText(st, 18);
    out.push_back(std::move(d));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading tensor dumps");
  return out;
}

StatusOr<std::vector<DumpEntryRow>> TraceReader::dumpEntries(int64_t run_id) {
  if (schema_ < 9) return std::vector<DumpEntryRow>{};  // a file of schema 8, read as it is
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("dump_entries", schema_ < 12 ? "SELECT step, name, parent, stack, NULL FROM dump_entries WHERE run_id=?1 ORDER BY id"
                                                       : "SELECT step, name, parent, stack, op_id FROM dump_entries WHERE run_id=?1 ORDER BY id"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<DumpEntryRow> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    DumpEntryRow e;
    e.step = colInt(st, 0);
    e.name = colText(st, 1);
    e.parent = colText(st, 2);
    e.stack = colText(st, 3);
    e.op_id = colInt(st, 4);
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading dump entries");
  return out;
}

StatusOr<std::vector<MemoryBlockRecord>> TraceReader::memoryBlocks(int64_t run_id, int device) {
  if (schema_ < 10) return std::vector<MemoryBlockRecord>{};
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("memory_blocks",
                          "SELECT device, alloc_seq, free_seq, alloc_ns, free_ns, size, requested, category, op_id, step,"
                          " address, owner FROM memory_blocks WHERE run_id=?1 AND (?2 < 0 OR device=?2)"
                          " ORDER BY device, alloc_seq"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, device);
  std::vector<MemoryBlockRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    MemoryBlockRecord b;
    b.device = static_cast<int32_t>(sqlite3_column_int64(st, 0));
    b.alloc_seq = sqlite3_column_int64(st, 1);
    b.free_seq = colInt(st, 2);
    b.alloc_ns = sqlite3_column_int64(st, 3);
    b.free_ns = colInt(st, 4);
    b.size = sqlite3_column_int64(st, 5);
    b.requested = sqlite3_column_int64(st, 6);
    const int64_t category = sqlite3_column_int64(st, 7);
    b.category = static_cast<uint8_t>(category >= 0 && category < 10 ? category : 0);
    b.op_id = colInt(st, 8);
    b.step = colInt(st, 9);
    b.address = static_cast<uint64_t>(sqlite3_column_int64(st, 10));
    b.owner = colText(st, 11);
    out.push_back(std::move(b));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading memory blocks");
  return out;
}

StatusOr<std::vector<MemoryDeviceRecord>> TraceReader::memoryDevices(int64_t run_id) {
  if (schema_ < 10) return std::vector<MemoryDeviceRecord>{};
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("memory_devices",
                          "SELECT device, start_seq, end_seq, peak_seq, peak_ns, peak_allocated, peak_reserved,"
                          " largest_cached, peak_op_id, peak_step, capacity FROM memory_devices WHERE run_id=?1"
                          " ORDER BY device"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<MemoryDeviceRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    MemoryDeviceRecord d;
    d.device = static_cast<int32_t>(sqlite3_column_int64(st, 0));
    d.start_seq = sqlite3_column_int64(st, 1);
    d.end_seq = sqlite3_column_int64(st, 2);
    d.peak_seq = colInt(st, 3);
    d.peak_ns = colInt(st, 4);
    d.peak_allocated = colInt(st, 5);
    d.peak_reserved = colInt(st, 6);
    d.largest_cached = colInt(st, 7);
    d.peak_op_id = colInt(st, 8);
    d.peak_step = colInt(st, 9);
    d.capacity = sqlite3_column_int64(st, 10);
    out.push_back(d);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading memory devices");
  return out;
}

StatusOr<std::vector<MemoryOomRecord>> TraceReader::memoryOoms(int64_t run_id) {
  if (schema_ < 10) return std::vector<MemoryOomRecord>{};
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("memory_ooms",
                          "SELECT device, seq, ts_ns, requested, op_id, step, message FROM memory_ooms WHERE run_id=?1"
                          " ORDER BY ts_ns"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<MemoryOomRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    MemoryOomRecord o;
    o.device = static_cast<int32_t>(sqlite3_column_int64(st, 0));
    o.seq = sqlite3_column_int64(st, 1);
    o.ts_ns = sqlite3_column_int64(st, 2);
    o.requested = sqlite3_column_int64(st, 3);
    o.op_id = colInt(st, 4);
    o.step = colInt(st, 5);
    o.message = colText(st, 6);
    out.push_back(std::move(o));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading out-of-memory events");
  return out;
}

StatusOr<std::vector<MemoryComponentRecord>> TraceReader::memoryComponents(int64_t run_id) {
  if (schema_ < 11) return std::vector<MemoryComponentRecord>{};
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("memory_components",
                          "SELECT device, component, ts_ns, reserved FROM memory_components WHERE run_id=?1"
                          " ORDER BY device, component, ts_ns"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<MemoryComponentRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    MemoryComponentRecord c;
    c.device = static_cast<int32_t>(sqlite3_column_int64(st, 0));
    c.component = colText(st, 1);
    c.ts_ns = sqlite3_column_int64(st, 2);
    c.reserved = sqlite3_column_int64(st, 3);
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading memory components");
  return out;
}

StatusOr<TensorDumpData> TraceReader::tensorDumpData(int64_t dump_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("dump_data",
                                             "SELECT coalesce(d.data, r.data) FROM tensor_dumps d"
                                             " LEFT JOIN tensor_dumps r ON r.id = d.data_ref WHERE d.id=?1"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, dump_id);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return notFound(path_ + ": no tensor dump " + std::to_string(dump_id));
  if (rc != SQLITE_ROW) return stepError(db_.get(), "reading a tensor dump");
  TensorDumpData d;
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st, 0));
  const int n = sqlite3_column_bytes(st, 0);
  if (p && n > 0) d.bytes.assign(p, p + n);
  static const uint8_t kZstdMagic[4] = {0x28, 0xB5, 0x2F, 0xFD};
  d.zstd_frame = d.bytes.size() >= 4 && std::memcmp(d.bytes.data(), kZstdMagic, 4) == 0;
  return d;
}

// ---------------------------------------------------------------------------------------------

void sortOpTable(std::vector<OpAggregate>* rows, OpSortKey sort, bool descending) {
  auto metric = [&](const OpAggregate& a) -> double {
    switch (sort) {
      case OpSortKey::kSelfTime: return static_cast<double>(a.self_ns);
      case OpSortKey::kTotalTime: return static_cast<double>(a.total_ns);
      case OpSortKey::kCount: return static_cast<double>(a.calls);
      case OpSortKey::kAvgTime: return a.avg_ns;
      case OpSortKey::kDeviceTime: return static_cast<double>(a.device_ns);
      case OpSortKey::kName: return 0.0;
    }
    return 0.0;
  };
  const bool by_name = sort == OpSortKey::kName;
  std::sort(rows->begin(), rows->end(), [&](const OpAggregate& a, const OpAggregate& b) {
    if (!by_name) {
      const double ma = metric(a), mb = metric(b);
      if (ma != mb) return descending ? ma > mb : ma < mb;
      if (a.name != b.name) return a.name < b.name;
      return a.input_shapes < b.input_shapes;
    }
    if (a.name != b.name) return descending ? a.name > b.name : a.name < b.name;
    return a.input_shapes < b.input_shapes;
  });
}

OpAggregate makeOpAggregate(std::string name, std::string input_shapes, int64_t calls, int64_t total_ns,
                            int64_t self_ns, int64_t min_ns, int64_t max_ns, int64_t device_ns, int64_t device_calls,
                            int64_t self_sum_ns) {
  const double denom = self_sum_ns > 0 ? static_cast<double>(self_sum_ns) : 0.0;
  OpAggregate a;
  a.name = std::move(name);
  a.input_shapes = std::move(input_shapes);
  a.calls = calls;
  a.total_ns = total_ns;
  a.self_ns = self_ns;
  a.min_ns = min_ns;
  a.max_ns = max_ns;
  a.avg_ns = calls ? static_cast<double>(total_ns) / static_cast<double>(calls) : 0.0;
  a.self_pct = denom > 0 ? 100.0 * static_cast<double>(self_ns) / denom : 0.0;
  a.total_pct = denom > 0 ? 100.0 * static_cast<double>(total_ns) / denom : 0.0;
  a.device_ns = device_ns;
  a.device_calls = device_calls;
  return a;
}

StatusOr<OpSortKey> parseOpSortKey(const std::string& text) {
  for (OpSortKey k : {OpSortKey::kSelfTime, OpSortKey::kTotalTime, OpSortKey::kCount, OpSortKey::kAvgTime,
                      OpSortKey::kName, OpSortKey::kDeviceTime}) {
    if (text == opSortKeyName(k)) return k;
  }
  return invalidArgument("unknown sort key '" + text + "' (expected self, total, count, avg, name or device)");
}

const char* opSortKeyName(OpSortKey key) {
  switch (key) {
    case OpSortKey::kSelfTime: return "self";
    case OpSortKey::kTotalTime: return "total";
    case OpSortKey::kCount: return "count";
    case OpSortKey::kAvgTime: return "avg";
    case OpSortKey::kName: return "name";
    case OpSortKey::kDeviceTime: return "device";
  }
  return "?";
}

}  // namespace npuscope
