#include "npuscope/core/trace_reader.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "npuscope/core/database.h"

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
    " results_json, dropped_records";

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
  return r;
}

// The columns OpCursor reads, in this order.
const char kOpColumns[] =
    "id, parent_id, start_ns, dur_ns, thread_id, step, seq_nr, device_start_ns, device_dur_ns, depth, device,"
    " is_backward, name_id, shapes_id, dtypes_id";

void readOpIds(sqlite3_stmt* st, OpSlice* o, int64_t* name_id, int64_t* shapes_id, int64_t* dtypes_id) {
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
  *name_id = sqlite3_column_int64(st, 12);
  *shapes_id = colInt(st, 13, 0);
  *dtypes_id = colInt(st, 14, 0);
}

// Maps op ids to the aggregate group of the op, for subtracting a child's duration from its
// parent's group. Ids are mostly dense and increasing, so pages of a flat array (allocated where
// ids occur) beat a hash map of 10M entries by far.
class IdGroupMap {
 public:
  void set(int64_t id, int32_t group) {
    int32_t* p = page(id >> kPageBits, /*create=*/true);
    p[id & kPageMask] = group;
  }
  // -1 when the id was never set.
  int32_t get(int64_t id) {
    const int32_t* p = page(id >> kPageBits, /*create=*/false);
    return p ? p[id & kPageMask] : -1;
  }

 private:
  static constexpr int kPageBits = 12;
  static constexpr int64_t kPageSize = int64_t{1} << kPageBits;
  static constexpr int64_t kPageMask = kPageSize - 1;

  int32_t* page(int64_t index, bool create) {
    if (index == last_index_) return last_page_;
    auto it = pages_.find(index);
    if (it == pages_.end()) {
      if (!create) return nullptr;
      auto fresh = std::make_unique<int32_t[]>(kPageSize);
      std::fill_n(fresh.get(), kPageSize, -1);
      it = pages_.emplace(index, std::move(fresh)).first;
    }
    last_index_ = index;
    last_page_ = it->second.get();
    return last_page_;
  }

  std::unordered_map<int64_t, std::unique_ptr<int32_t[]>> pages_;
  int64_t last_index_ = kMinTime;
  int32_t* last_page_ = nullptr;
};

// One pass over op rows in any order builds the key_averages table: per group count, total,
// min, max and device time; self time is total minus the durations of direct children, whose
// parents are found through IdGroupMap (children met before their parent wait in `pending_`).
class OpAggregator {
 public:
  explicit OpAggregator(bool by_shapes) : by_shapes_(by_shapes) {}

  struct Group {
    int64_t name_id = 0, shapes_id = 0;
    int64_t calls = 0, total = 0, self = 0, min = kMaxTime, max = kMinTime, device = 0, device_calls = 0;
  };

  // `selected`: the op counts in the table; otherwise it only matters as a child of a selected op.
  void add(int64_t id, int64_t parent_id, int64_t name_id, int64_t shapes_id, int64_t dur, int64_t device_dur,
           bool selected) {
    if (selected) {
      const int32_t g = groupOf(name_id, shapes_id);
      Group& gr = groups_[static_cast<size_t>(g)];
      ++gr.calls;
      gr.total += dur;
      gr.self += dur;
      gr.min = std::min(gr.min, dur);
      gr.max = std::max(gr.max, dur);
      if (device_dur >= 0) {
        gr.device += device_dur;
        ++gr.device_calls;
      }
      ids_.set(id, g);
      ++selected_;
    }
    if (parent_id >= 0) {
      const int32_t pg = ids_.get(parent_id);
      if (pg >= 0) {
        groups_[static_cast<size_t>(pg)].self -= dur;
      } else {
        pending_.emplace_back(parent_id, dur);
      }
    }
  }

  // Settles children whose parent came after them; children whose parent this aggregator never
  // saw stay in pending() (their parent may be in another part of a split scan, or unselected).
  void finish() {
    std::vector<std::pair<int64_t, int64_t>> left;
    for (const auto& [parent, dur] : pending_) {
      const int32_t pg = ids_.get(parent);
      if (pg >= 0) {
        groups_[static_cast<size_t>(pg)].self -= dur;
      } else {
        left.emplace_back(parent, dur);
      }
    }
    pending_.swap(left);
  }
  const std::vector<std::pair<int64_t, int64_t>>& pending() const { return pending_; }

  // The group of a selected op seen by this aggregator, or -1.
  int32_t groupOfOp(int64_t id) { return ids_.get(id); }
  void subtractChild(int32_t group, int64_t dur) { groups_[static_cast<size_t>(group)].self -= dur; }

  // Adds the groups of `part` (another part of a split scan) to this one; returns the index here
  // of each of part's groups.
  std::vector<int32_t> absorb(const OpAggregator& part) {
    std::vector<int32_t> map;
    map.reserve(part.groups_.size());
    for (const Group& g : part.groups_) {
      const int32_t here = groupOf(g.name_id, g.shapes_id);
      Group& h = groups_[static_cast<size_t>(here)];
      h.calls += g.calls;
      h.total += g.total;
      h.self += g.self;
      h.min = std::min(h.min, g.min);
      h.max = std::max(h.max, g.max);
      h.device += g.device;
      h.device_calls += g.device_calls;
      map.push_back(here);
    }
    selected_ += part.selected_;
    return map;
  }

  std::vector<Group>& groups() { return groups_; }
  int64_t selected() const { return selected_; }

 private:
  int32_t groupOf(int64_t name_id, int64_t shapes_id) {
    if (!by_shapes_ && name_id >= 0 && name_id < kDenseNames) {
      const auto n = static_cast<size_t>(name_id);
      if (n >= by_name_.size()) by_name_.resize(n + 1, -1);
      int32_t& g = by_name_[n];
      if (g < 0) g = newGroup(name_id, 0);
      return g;
    }
    const int64_t s = by_shapes_ ? shapes_id : 0;
    return by_key_.findOrAdd(name_id, s, [&] { return newGroup(name_id, s); });
  }

  int32_t newGroup(int64_t name_id, int64_t shapes_id) {
    Group g;
    g.name_id = name_id;
    g.shapes_id = shapes_id;
    groups_.push_back(g);
    return static_cast<int32_t>(groups_.size() - 1);
  }

  // (name id, shapes id) -> group: open addressing with linear probing, a few thousand keys
  // looked up once per op, where std::unordered_map's node chasing showed in profiles.
  class KeyTable {
   public:
    template <typename Make>
    int32_t findOrAdd(int64_t a, int64_t b, Make make) {
      if ((used_ + 1) * 2 > slots_.size()) grow();
      size_t i = hash(a, b) & (slots_.size() - 1);
      for (;; i = (i + 1) & (slots_.size() - 1)) {
        Slot& s = slots_[i];
        if (s.group < 0) {
          s = Slot{a, b, make()};
          ++used_;
          return s.group;
        }
        if (s.a == a && s.b == b) return s.group;
      }
    }

   private:
    struct Slot {
      int64_t a = 0, b = 0;
      int32_t group = -1;
    };
    static size_t hash(int64_t a, int64_t b) {
      uint64_t h = static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(b) * 0xC2B2AE3D27D4EB4Full;
      return static_cast<size_t>(h ^ (h >> 29));
    }
    void grow() {
      std::vector<Slot> old = std::move(slots_);
      slots_.assign(old.empty() ? 64 : old.size() * 2, Slot());
      used_ = 0;
      for (const Slot& s : old) {
        if (s.group >= 0) findOrAdd(s.a, s.b, [&] { return s.group; });
      }
    }
    std::vector<Slot> slots_;
    size_t used_ = 0;
  };

  static constexpr int64_t kDenseNames = int64_t{1} << 24;
  bool by_shapes_;
  std::vector<Group> groups_;
  std::vector<int32_t> by_name_;
  KeyTable by_key_;
  IdGroupMap ids_;
  std::vector<std::pair<int64_t, int64_t>> pending_;
  int64_t selected_ = 0;
};

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
      if (selected && max_end) *max_end = std::max(*max_end, start + dur);
    }
    agg->add(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
             by_shapes ? sqlite3_column_int64(st, 3) : 0, dur, sqlite3_column_int64(st, 5), selected);
  }
  if (rc != SQLITE_DONE) return stepError(db, "reading ops");
  return Status::ok();
}

// An inclusive range of op_events rowids.
struct RowidRange {
  int64_t lo, hi;
};

// Splits the table's rowids [min_id, max_id] into ranges read in parallel: one per core (at
// most 4), or a single one for tables too small to gain from threads. The first and last range
// are open-ended so rows added meanwhile are not lost.
std::vector<RowidRange> rowidRanges(int64_t min_id, int64_t max_id) {
  const double rows = static_cast<double>(max_id) - static_cast<double>(min_id) + 1.0;
  unsigned k = std::max(1u, std::min(std::thread::hardware_concurrency(), 4u));
  if (max_id < min_id || rows < 400000.0 || rows > 4e18) k = 1;
  std::vector<RowidRange> out;
  const int64_t per_range = k > 1 ? (max_id - min_id + 1) / static_cast<int64_t>(k) : 0;
  int64_t lo = kMinTime;
  for (unsigned i = 0; i < k; ++i) {
    const int64_t hi = i + 1 == k ? kMaxTime : min_id + per_range * static_cast<int64_t>(i + 1) - 1;
    out.push_back(RowidRange{lo, hi});
    if (i + 1 < k) lo = hi + 1;  // the last hi is kMaxTime: nothing follows it
  }
  return out;
}

// Runs `sql` (whose ?1 and ?2 bound the rowid) once per range, all ranges at once: range 0 on the
// reader's connection (inside its snapshot), the others each on a read-only connection of its
// own. `consume(i, db, stmt)` reads range i. Connections opened later may see a few more rows
// of a file that is still being written; that is the price of reading it in parallel.
Status scanRanges(sqlite3* main_db, const std::string& path, const std::string& sql,
                  const std::vector<RowidRange>& ranges, const std::function<void(sqlite3_stmt*)>& bind,
                  const std::function<Status(size_t, sqlite3*, sqlite3_stmt*)>& consume) {
  std::vector<Status> results(ranges.size());
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
    sqlite3_bind_int64(st->get(), 1, ranges[i].lo);
    sqlite3_bind_int64(st->get(), 2, ranges[i].hi);
    bind(st->get());
    results[i] = consume(i, db, st->get());
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < ranges.size(); ++i) threads.emplace_back(job, i);
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

// ---------------------------------------------------------------------------------------------
// Opening, statements, strings, snapshots

StatusOr<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path) {
  ASSIGN_OR_RETURN(ScopedDb db, openTraceDatabase(path, OpenMode::kReadOnly));
  return std::unique_ptr<TraceReader>(new TraceReader(path, std::move(db)));
}

TraceReader::TraceReader(std::string path, ScopedDb db) : path_(std::move(path)), db_(std::move(db)) {}

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
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const int64_t id = sqlite3_column_int64(st, 0);
    strings_[id] = colText(st, 1);
    max_string_id_ = std::max(max_string_id_, id);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading strings");
  return Status::ok();
}

std::string_view TraceReader::stringValue(int64_t id) {
  if (id <= 0) return {};
  auto it = strings_.find(id);
  if (it == strings_.end() && id > max_string_id_) {
    (void)loadStrings();  // a live file has grown: an unknown id stays "" on failure
    it = strings_.find(id);
  }
  return it == strings_.end() ? std::string_view() : std::string_view(it->second);
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

// Distinct thread ids of a run by skipping through the (run_id, thread_id, start_ns) index:
// one seek per thread instead of a pass over every op.
StatusOr<std::vector<int64_t>> TraceReader::threadIds(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("next_thread",
                          "SELECT thread_id FROM op_events INDEXED BY op_events_run_thread_start"
                          " WHERE run_id=?1 AND thread_id>?2 ORDER BY thread_id LIMIT 1"));
  std::vector<int64_t> out;
  int64_t after = kMinTime;
  for (;;) {
    StmtUse use(st);
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, after);
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return stepError(db_.get(), "listing threads");
    after = sqlite3_column_int64(st, 0);
    out.push_back(after);
  }
  return out;
}

// How a run's ops are read in one pass: by scanning the table in rowid order (sequential pages,
// split into ranges read in parallel) when the run is a large share of the file, or through the
// (run_id, step) index (a random row lookup per op) when it is a small part of it. SQLite's
// planner, having no statistics, would always take the index.
struct TraceReader::ScanPlan {
  bool use_run_index = false;
  bool only_run = false;  // no other run has ops: rows need no run_id test
  int64_t min_rowid = 0, max_rowid = -1;

  // "FROM op_events ... WHERE <rowid range ?1..?2> [AND run_id=?3]"; more conditions may follow.
  std::string from() const {
    std::string s = use_run_index ? " FROM op_events INDEXED BY op_events_run_step" : " FROM op_events NOT INDEXED";
    s += " WHERE rowid BETWEEN ?1 AND ?2";
    if (!only_run) s += " AND run_id=?3";
    return s;
  }
  std::vector<RowidRange> ranges() const {
    return use_run_index ? std::vector<RowidRange>{RowidRange{kMinTime, kMaxTime}} : rowidRanges(min_rowid, max_rowid);
  }
};

StatusOr<TraceReader::ScanPlan> TraceReader::scanPlan(int64_t run_id) {
  ScanPlan plan;
  ASSIGN_OR_RETURN(sqlite3_stmt * lo, cached("min_rowid", "SELECT min(rowid) FROM op_events"));
  ASSIGN_OR_RETURN(plan.min_rowid, scalarInt(db_.get(), lo, 0, "planning a scan"));
  ASSIGN_OR_RETURN(sqlite3_stmt * hi, cached("max_rowid", "SELECT max(rowid) FROM op_events"));
  ASSIGN_OR_RETURN(plan.max_rowid, scalarInt(db_.get(), hi, -1, "planning a scan"));
  ASSIGN_OR_RETURN(sqlite3_stmt * other,
                   cached("other_run",
                          "SELECT EXISTS(SELECT 1 FROM op_events INDEXED BY op_events_run_step WHERE run_id<?1)"
                          " OR EXISTS(SELECT 1 FROM op_events INDEXED BY op_events_run_step WHERE run_id>?1)"));
  sqlite3_bind_int64(other, 1, run_id);
  ASSIGN_OR_RETURN(int64_t others, scalarInt(db_.get(), other, 0, "planning a scan"));
  if (!others) {
    plan.only_run = true;
    return plan;
  }
  ASSIGN_OR_RETURN(sqlite3_stmt * count,
                   cached("run_op_count", "SELECT count(*) FROM op_events INDEXED BY op_events_run_step WHERE run_id=?1"));
  sqlite3_bind_int64(count, 1, run_id);
  ASSIGN_OR_RETURN(int64_t in_run, scalarInt(db_.get(), count, 0, "planning a scan"));
  const double table_rows = static_cast<double>(plan.max_rowid) - static_cast<double>(plan.min_rowid) + 1.0;
  plan.use_run_index = static_cast<double>(in_run) * 4.0 < table_rows;
  return plan;
}

StatusOr<std::vector<ThreadSummary>> TraceReader::threads(int64_t run_id) {
  auto hit = finished_run_threads_.find(run_id);
  if (hit != finished_run_threads_.end()) return hit->second;
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  ASSIGN_OR_RETURN(RunRow r, run(run_id));
  ASSIGN_OR_RETURN(ScanPlan plan, scanPlan(run_id));
  const std::string sql = "SELECT thread_id, is_backward, start_ns, start_ns + dur_ns" + plan.from();
  const std::vector<RowidRange> ranges = plan.ranges();
  std::vector<std::unordered_map<int64_t, ThreadSummary>> parts(ranges.size());
  RETURN_IF_ERROR(scanRanges(
      db_.get(), path_, sql, ranges, [&](sqlite3_stmt* st) { sqlite3_bind_int64(st, 3, run_id); },
      [&](size_t i, sqlite3* db, sqlite3_stmt* st) -> Status {
        auto& part = parts[i];
        int64_t last_thread = kMinTime;
        ThreadSummary* t = nullptr;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
          const int64_t tid = sqlite3_column_int64(st, 0);
          if (tid != last_thread || !t) {
            auto [it, fresh] = part.try_emplace(tid);
            t = &it->second;
            if (fresh) {
              t->thread_id = tid;
              t->first_start_ns = kMaxTime;
              t->last_end_ns = kMinTime;
            }
            last_thread = tid;
          }
          ++t->op_count;
          t->backward_op_count += sqlite3_column_int64(st, 1) != 0;
          t->first_start_ns = std::min<int64_t>(t->first_start_ns, sqlite3_column_int64(st, 2));
          t->last_end_ns = std::max<int64_t>(t->last_end_ns, sqlite3_column_int64(st, 3));
        }
        if (rc != SQLITE_DONE) return stepError(db, "reading threads");
        return Status::ok();
      }));
  std::unordered_map<int64_t, ThreadSummary> merged;
  for (auto& part : parts) {
    for (auto& [tid, t] : part) {
      auto [it, fresh] = merged.try_emplace(tid, t);
      if (fresh) continue;
      ThreadSummary& m = it->second;
      m.op_count += t.op_count;
      m.backward_op_count += t.backward_op_count;
      m.first_start_ns = std::min(m.first_start_ns, t.first_start_ns);
      m.last_end_ns = std::max(m.last_end_ns, t.last_end_ns);
    }
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
  OpAggregator agg(by_shapes);
  // A window that covers little of the run is read per thread through the
  // (run_id, thread_id, start_ns) index; otherwise one pass over all the run's ops.
  bool per_thread = false;
  std::vector<int64_t> thread_list;
  if (q.window.bounded()) {
    ASSIGN_OR_RETURN(thread_list, threadIds(q.run_id));
    ASSIGN_OR_RETURN(sqlite3_stmt * first,
                     cached("thread_first_start",
                            "SELECT min(start_ns) FROM op_events WHERE run_id=?1 AND thread_id=?2"));
    ASSIGN_OR_RETURN(sqlite3_stmt * last,
                     cached("thread_last_start",
                            "SELECT max(start_ns) FROM op_events WHERE run_id=?1 AND thread_id=?2"));
    int64_t span_begin = kMaxTime, span_end = kMinTime;
    for (int64_t tid : thread_list) {
      sqlite3_bind_int64(first, 1, q.run_id);
      sqlite3_bind_int64(first, 2, tid);
      ASSIGN_OR_RETURN(int64_t b, scalarInt(db_.get(), first, kMaxTime, "reading a thread's span"));
      sqlite3_bind_int64(last, 1, q.run_id);
      sqlite3_bind_int64(last, 2, tid);
      ASSIGN_OR_RETURN(int64_t e, scalarInt(db_.get(), last, kMinTime, "reading a thread's span"));
      span_begin = std::min(span_begin, b);
      span_end = std::max(span_end, e);
    }
    if (span_end > span_begin) {
      const double covered = static_cast<double>(std::min(span_end, q.window.end_ns)) -
                             static_cast<double>(std::max(span_begin, q.window.begin_ns));
      per_thread = covered < 0.2 * (static_cast<double>(span_end) - static_cast<double>(span_begin));
    }
  }

  if (per_thread) {
    ASSIGN_OR_RETURN(sqlite3_stmt * st,
                     cached(by_shapes ? "agg_thread_shapes" : "agg_thread",
                            std::string("SELECT ") + (by_shapes ? kAggColumnsByShapes : kAggColumnsByName) +
                                              " FROM op_events INDEXED BY op_events_run_thread_start"
                                              " WHERE run_id=?1 AND thread_id=?2 AND start_ns>=?3 AND start_ns<?4"
                                              " AND (?5=0 OR step BETWEEN ?6 AND ?7)"));
    for (int64_t tid : thread_list) {
      // The window's ops, then the children of those that reach past its end.
      int64_t max_end = kMinTime;
      {
        StmtUse use(st);
        sqlite3_bind_int64(st, 1, q.run_id);
        sqlite3_bind_int64(st, 2, tid);
        sqlite3_bind_int64(st, 3, q.window.begin_ns);
        sqlite3_bind_int64(st, 4, q.window.end_ns);
        bindStepFilter(st, 5, q.steps);
        RETURN_IF_ERROR(feedAggregator(db_.get(), st, by_shapes, q.window.end_ns, &agg, &max_end));
      }
      if (max_end > q.window.end_ns) {
        StmtUse use(st);
        sqlite3_bind_int64(st, 1, q.run_id);
        sqlite3_bind_int64(st, 2, tid);
        sqlite3_bind_int64(st, 3, q.window.end_ns);
        sqlite3_bind_int64(st, 4, max_end);
        bindStepFilter(st, 5, q.steps);
        RETURN_IF_ERROR(feedAggregator(db_.get(), st, by_shapes, q.window.end_ns, &agg, nullptr));
      }
    }
    agg.finish();
  } else {
    // One pass over the run's ops, split into rowid ranges read in parallel. No upper time bound
    // in SQL: ops starting after the window are still read, as children of ops in it.
    ASSIGN_OR_RETURN(ScanPlan plan, scanPlan(q.run_id));
    std::string sql = std::string("SELECT ") + (by_shapes ? kAggColumnsByShapes : kAggColumnsByName) + plan.from();
    if (q.window.begin_ns != kMinTime) sql += " AND start_ns>=?4";
    if (q.steps) sql += " AND step BETWEEN ?5 AND ?6";
    const std::vector<RowidRange> ranges = plan.ranges();
    std::vector<OpAggregator> parts;
    for (size_t i = 0; i < ranges.size(); ++i) parts.emplace_back(by_shapes);
    RETURN_IF_ERROR(scanRanges(
        db_.get(), path_, sql, ranges,
        [&](sqlite3_stmt* st) {
          // Parameters the statement does not use are refused by SQLite, harmlessly.
          sqlite3_bind_int64(st, 3, q.run_id);
          sqlite3_bind_int64(st, 4, q.window.begin_ns);
          sqlite3_bind_int64(st, 5, q.steps ? q.steps->first : 0);
          sqlite3_bind_int64(st, 6, q.steps ? q.steps->last : 0);
        },
        [&](size_t i, sqlite3* db, sqlite3_stmt* st) {
          Status s = feedAggregator(db, st, by_shapes, q.window.end_ns, &parts[i], nullptr);
          if (s.isOk()) parts[i].finish();
          return s;
        }));
    // Merge the parts, then settle children whose parent was read in another range.
    std::vector<std::vector<int32_t>> to_merged;
    for (const OpAggregator& part : parts) to_merged.push_back(agg.absorb(part));
    for (const OpAggregator& part : parts) {
      for (const auto& [parent, dur] : part.pending()) {
        for (size_t j = 0; j < ranges.size(); ++j) {
          if (parent < ranges[j].lo || parent > ranges[j].hi) continue;
          const int32_t g = parts[j].groupOfOp(parent);
          if (g >= 0) agg.subtractChild(to_merged[j][static_cast<size_t>(g)], dur);
          break;
        }
      }
    }
  }

  OpAggregateTable table;
  table.op_count = agg.selected();
  auto& groups = agg.groups();
  table.group_count = static_cast<int64_t>(groups.size());
  for (const auto& g : groups) {
    table.self_sum_ns += g.self;
    table.total_device_ns += g.device;
  }
  table.rows.reserve(groups.size());
  for (const auto& g : groups) {
    table.rows.push_back(makeOpAggregate(std::string(stringValue(g.name_id)),
                                         q.group_by == OpGroupBy::kNameAndShapes ? std::string(stringValue(g.shapes_id))
                                                                                 : std::string(),
                                         g.calls, g.total, g.self, g.min, g.max, g.device, g.device_calls,
                                         table.self_sum_ns));
  }
  sortOpTable(&table.rows, q.sort, q.descending);
  if (q.top_n > 0 && table.rows.size() > q.top_n) table.rows.resize(q.top_n);
  return table;
}

// ---------------------------------------------------------------------------------------------
// Timeline and cursors

bool OpCursor::next(OpSlice* out) {
  if (!status_.isOk() || !stmt_.get()) return false;
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) {
    int64_t name_id, shapes_id, dtypes_id;
    readOpIds(stmt_.get(), out, &name_id, &shapes_id, &dtypes_id);
    out->name = reader_->stringValue(name_id);
    out->input_shapes = reader_->stringValue(shapes_id);
    out->input_dtypes = reader_->stringValue(dtypes_id);
    return true;
  }
  if (rc != SQLITE_DONE) status_ = ioError(std::string("reading ops: ") + sqlite3_errmsg(sqlite3_db_handle(stmt_.get())));
  stmt_.reset();  // ends the statement's read as soon as the stream is exhausted
  return false;
}

StatusOr<OpCursor> TraceReader::openOpCursor(int64_t run_id, int64_t thread_id, const TimeWindow& window) {
  ASSIGN_OR_RETURN(ScopedStmt st,
                   prepare(db_.get(), std::string("SELECT ") + kOpColumns +
                                          " FROM op_events INDEXED BY op_events_run_thread_start"
                                          " WHERE run_id=?1 AND thread_id=?2 AND start_ns>=?3 AND start_ns<?4"
                                          " ORDER BY start_ns"));
  sqlite3_bind_int64(st.get(), 1, run_id);
  sqlite3_bind_int64(st.get(), 2, thread_id);
  sqlite3_bind_int64(st.get(), 3, window.begin_ns);
  sqlite3_bind_int64(st.get(), 4, window.end_ns);
  return OpCursor(this, std::move(st));
}

StatusOr<std::vector<OpSlice>> TraceReader::timeline(const TimelineQuery& q) {
  if (q.window.begin_ns >= q.window.end_ns) return invalidArgument("empty time window");
  SnapshotScope snap(this);
  RETURN_IF_ERROR(snap.status());
  std::vector<OpSlice> out;
  auto read = [&](sqlite3_stmt* st) {
    OpSlice o;
    int64_t n, s, d;
    readOpIds(st, &o, &n, &s, &d);
    o.name = stringValue(n);
    o.input_shapes = stringValue(s);
    o.input_dtypes = stringValue(d);
    return o;
  };

  // Ops that began before the window and still run in it: with nesting, they are the last op
  // to start before the window and its ancestors (the deepest of equal starts is the one to
  // climb from).
  if (q.window.begin_ns != kMinTime) {
    ASSIGN_OR_RETURN(sqlite3_stmt * last_start,
                     cached("tl_last_start",
                            "SELECT max(start_ns) FROM op_events WHERE run_id=?1 AND thread_id=?2 AND start_ns<?3"));
    sqlite3_bind_int64(last_start, 1, q.run_id);
    sqlite3_bind_int64(last_start, 2, q.thread_id);
    sqlite3_bind_int64(last_start, 3, q.window.begin_ns);
    ASSIGN_OR_RETURN(int64_t before, scalarInt(db_.get(), last_start, kMinTime, "reading the timeline"));
    if (before != kMinTime) {
      ASSIGN_OR_RETURN(sqlite3_stmt * deepest,
                       cached("tl_deepest", std::string("SELECT ") + kOpColumns +
                                                " FROM op_events INDEXED BY op_events_run_thread_start"
                                                " WHERE run_id=?1 AND thread_id=?2 AND start_ns=?3"
                                                " ORDER BY depth DESC LIMIT 1"));
      ASSIGN_OR_RETURN(sqlite3_stmt * by_id,
                       cached("tl_by_id", std::string("SELECT ") + kOpColumns + " FROM op_events WHERE id=?1"));
      std::vector<OpSlice> chain;
      std::optional<OpSlice> cur;
      {
        StmtUse use(deepest);
        sqlite3_bind_int64(deepest, 1, q.run_id);
        sqlite3_bind_int64(deepest, 2, q.thread_id);
        sqlite3_bind_int64(deepest, 3, before);
        const int rc = sqlite3_step(deepest);
        if (rc == SQLITE_ROW) cur = read(deepest);
        else if (rc != SQLITE_DONE) return stepError(db_.get(), "reading the timeline");
      }
      for (int guard = 0; cur && guard < 100000; ++guard) {
        if (cur->start_ns + cur->dur_ns > q.window.begin_ns && cur->thread_id == q.thread_id) chain.push_back(*cur);
        if (cur->parent_id < 0) break;
        StmtUse use(by_id);
        sqlite3_bind_int64(by_id, 1, cur->parent_id);
        const int rc = sqlite3_step(by_id);
        if (rc == SQLITE_ROW) {
          cur = read(by_id);
        } else if (rc == SQLITE_DONE) {
          cur.reset();
        } else {
          return stepError(db_.get(), "reading the timeline");
        }
      }
      out.assign(chain.rbegin(), chain.rend());
    }
  }

  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("tl_window", std::string("SELECT ") + kOpColumns +
                                           " FROM op_events INDEXED BY op_events_run_thread_start"
                                           " WHERE run_id=?1 AND thread_id=?2 AND start_ns>=?3 AND start_ns<?4"
                                           " AND dur_ns>=?5 ORDER BY start_ns"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, q.run_id);
  sqlite3_bind_int64(st, 2, q.thread_id);
  sqlite3_bind_int64(st, 3, q.window.begin_ns);
  sqlite3_bind_int64(st, 4, q.window.end_ns);
  sqlite3_bind_int64(st, 5, q.min_dur_ns);
  int rc = SQLITE_DONE;
  while ((q.limit == 0 || out.size() < q.limit) && (rc = sqlite3_step(st)) == SQLITE_ROW) out.push_back(read(st));
  if (q.limit != 0 && out.size() >= q.limit) {
    out.resize(q.limit);
    return out;
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading the timeline");
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
                          "SELECT id, step, ts_ns, source, op_name, detail FROM overflow_events"
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
    out.push_back(std::move(o));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading overflow events");
  return out;
}

StatusOr<std::vector<StepDeviceTime>> TraceReader::stepDeviceTimes(int64_t run_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st,
                   cached("step_device_times",
                          "SELECT step, count(*), count(device_dur_ns), coalesce(sum(device_dur_ns), 0),"
                          " coalesce(min(device_start_ns), -1), coalesce(max(device_start_ns + device_dur_ns), -1)"
                          " FROM op_events WHERE run_id=?1 AND step IS NOT NULL GROUP BY step ORDER BY step"));
  StmtUse use(st);
  sqlite3_bind_int64(st, 1, run_id);
  std::vector<StepDeviceTime> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    StepDeviceTime t;
    t.step = sqlite3_column_int64(st, 0);
    t.ops = sqlite3_column_int64(st, 1);
    t.device_ops = sqlite3_column_int64(st, 2);
    t.device_busy_ns = sqlite3_column_int64(st, 3);
    t.device_first_ns = sqlite3_column_int64(st, 4);
    t.device_last_ns = sqlite3_column_int64(st, 5);
    out.push_back(t);
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading device time per step");
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
  ASSIGN_OR_RETURN(std::vector<int64_t> tids, threadIds(run_id));
  ASSIGN_OR_RETURN(sqlite3_stmt * first,
                   cached("thread_first_start", "SELECT min(start_ns) FROM op_events WHERE run_id=?1 AND thread_id=?2"));
  for (int64_t tid : tids) {
    sqlite3_bind_int64(first, 1, run_id);
    sqlite3_bind_int64(first, 2, tid);
    ASSIGN_OR_RETURN(int64_t b, scalarInt(db_.get(), first, kMaxTime, "reading a thread's span"));
    t = std::min(t, b);
  }
  ASSIGN_OR_RETURN(sqlite3_stmt * others,
                   cached("earliest_others",
                          "SELECT min(coalesce((SELECT min(start_ns) FROM steps WHERE run_id=?1), ?2),"
                          " coalesce((SELECT min(ts_ns) FROM memory WHERE run_id=?1), ?2),"
                          " coalesce((SELECT min(ts_ns) FROM overflow_events WHERE run_id=?1), ?2))"));
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
                          "SELECT id, step, op_id, op_name, op_type, io, idx, dtype, shape, format, min, max, mean,"
                          " l2norm, nan_count, inf_count, length(data) FROM tensor_dumps WHERE run_id=?1 ORDER BY id"));
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
    out.push_back(std::move(d));
  }
  if (rc != SQLITE_DONE) return stepError(db_.get(), "reading tensor dumps");
  return out;
}

StatusOr<TensorDumpData> TraceReader::tensorDumpData(int64_t dump_id) {
  ASSIGN_OR_RETURN(sqlite3_stmt * st, cached("dump_data", "SELECT data FROM tensor_dumps WHERE id=?1"));
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
