#include "npuscope/store/trace_writer.h"

#include <sqlite3.h>
#include <nlohmann/json.hpp>
#include <zstd.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>

#include "npuscope/store/clock.h"
#include "npuscope/store/database.h"
#include "npuscope/store/disk_faults.h"
#include "npuscope/store/format.h"
#include "npuscope/store/op_aggregator.h"
#include "npuscope/store/string_table.h"

namespace npuscope {
namespace {

using Clock = std::chrono::steady_clock;

// zstd level of dumped payloads. The test CNN's dumped step (60 MB, `zstd -b`, one core here):
// level 1 stores 2.6x smaller at 490 MB/s, -3 2.16x at 860 MB/s, -5 2.15x at 1,020 MB/s, -7
// 2.06x at 1,130 MB/s. With -3 against 1 the whole dumped step took 123-132 ms against 151-173.
constexpr int kDumpZstdLevel = -5;
// Stored tensor-dump bytes after which the writer commits without waiting for its interval.
constexpr size_t kDumpBytesPerCommit = size_t{8} << 20;

}  // namespace

// A stored payload starting with the zstd magic is a frame and anything else is raw, so a raw
// payload that itself starts with the magic is always stored as a frame.
bool encodeDumpPayload(const uint8_t* data, size_t size, std::vector<uint8_t>* frame) {
  if (size == 0) return false;
  const bool raw_looks_like_frame = size >= 4 && data[0] == 0x28 && data[1] == 0xB5 && data[2] == 0x2F && data[3] == 0xFD;
  // One compression context and scratch buffer per calling thread: ZSTD_compress() would set a
  // context up per payload, which costs more than compressing a small tensor.
  static thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  static thread_local std::vector<uint8_t> scratch;
  const size_t bound = ZSTD_compressBound(size);
  if (scratch.size() < bound) scratch.resize(bound);
  auto compress = [&](size_t n) {
    return cctx ? ZSTD_compressCCtx(cctx.get(), scratch.data(), bound, data, n, kDumpZstdLevel)
                : ZSTD_compress(scratch.data(), bound, data, n, kDumpZstdLevel);
  };
  // Large payloads: a 64 KiB sample that saves under 10 % predicts the rest (dense float data
  // barely compresses), and skipping it keeps the writer near disk speed. Tiny payloads are
  // stored as they are.
  constexpr size_t kSample = 64 << 10, kTiny = 256;
  bool worth = size > kTiny || raw_looks_like_frame;
  if (size > 4 * kSample && !raw_looks_like_frame) {
    const size_t m = compress(kSample);
    worth = !ZSTD_isError(m) && m < kSample * 9 / 10;
  }
  if (!worth) return false;
  const size_t n = compress(size);
  if (ZSTD_isError(n) || (n >= size && !raw_looks_like_frame)) return false;
  frame->assign(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(n));
  return true;
}

namespace {

Status stepStatement(sqlite3* db, sqlite3_stmt* st) {
  const int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return ioError(sqlite3_errmsg(db));
  return Status::ok();
}

// For statements whose parameters a TraceWriter::BoundInts tracks: bindings stay.
Status stepKeepingBindings(sqlite3* db, sqlite3_stmt* st) {
  const int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return ioError(sqlite3_errmsg(db));
  return Status::ok();
}

void bindOptionalInt(sqlite3_stmt* st, int col, int64_t v, int64_t none) {
  if (v == none) {
    sqlite3_bind_null(st, col);
  } else {
    sqlite3_bind_int64(st, col, v);
  }
}

void bindText(sqlite3_stmt* st, int col, const std::string& s) {
  if (s.empty()) {
    sqlite3_bind_null(st, col);
  } else {
    sqlite3_bind_text(st, col, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
}

}  // namespace

namespace {

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

// Runs of this host left `running` by a process that no longer exists (SIGKILL, a crash, a
// disk too full to end them) end as failed, keeping what they committed.
Status endOrphanedRuns(sqlite3* db) {
  ASSIGN_OR_RETURN(ScopedStmt find, prepare(db, "SELECT id, pid FROM runs WHERE status='running' AND pid IS NOT NULL"
                                                " AND host=?"));
  const std::string host = hostName();
  sqlite3_bind_text(find.get(), 1, host.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::pair<int64_t, int64_t>> orphans;
  while (sqlite3_step(find.get()) == SQLITE_ROW) {
    const int64_t pid = sqlite3_column_int64(find.get(), 1);
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) orphans.emplace_back(sqlite3_column_int64(find.get(), 0), pid);
  }
  for (const auto& [run, pid] : orphans) {
    ASSIGN_OR_RETURN(ScopedStmt end, prepare(db,
        "UPDATE runs SET status='failed', ended_ns=coalesce(ended_ns, (SELECT max(start_ns + dur_ns) FROM op_events"
        " WHERE run_id=?1), started_ns), results_json=json_object('error', ?2) WHERE id=?1 AND status='running'"));
    const std::string why = "the recording process (pid " + std::to_string(pid) + " on " + host +
                            ") ended without ending the run (killed, crashed, or its disk was full); what it "
                            "committed is kept";
    sqlite3_bind_int64(end.get(), 1, run);
    sqlite3_bind_text(end.get(), 2, why.c_str(), -1, SQLITE_TRANSIENT);
    RETURN_IF_ERROR(stepStatement(db, end.get()));
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& path, Options options) {
  // Injected full disks (tests): both connections open the file through the faults' VFS.
  ASSIGN_OR_RETURN(DiskFaults* faults, DiskFaults::fromEnvironment());
  const char* vfs = faults != nullptr ? faults->sqliteVfs() : nullptr;
  ASSIGN_OR_RETURN(ScopedDb db, openTraceDatabase(path, OpenMode::kReadWrite, vfs));
  RETURN_IF_ERROR(endOrphanedRuns(db.get()));
  // The indexes of a long run outgrow SQLite's default 2 MB page cache; 64 MB keeps their hot
  // right-hand pages in memory.
  RETURN_IF_ERROR(execSql(db.get(), "PRAGMA cache_size=-" + std::to_string(options.page_cache_kib)));
  bool unsynced = false;
  if (!options.sync_new_file) {
    ASSIGN_OR_RETURN(const int64_t runs, queryInt(db.get(), "SELECT count(*) FROM runs"));
    unsynced = runs == 0;
    if (unsynced) RETURN_IF_ERROR(execSql(db.get(), "PRAGMA synchronous=OFF"));
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(std::move(db), options));
  w->faults_ = faults;
  const char* name = sqlite3_db_filename(w->db_.get(), "main");
  w->file_ = name != nullptr ? name : "";  // "" for an in-memory database
  RETURN_IF_ERROR(w->prepareStatements());
  w->holdReserve();
  // A second connection for checkpoints; without one (it cannot open, or the file is not in WAL
  // mode), SQLite's own checkpoints in the writer's commits remain.
  sqlite3* cdb = nullptr;
  const bool opened = !w->file_.empty() && sqlite3_open_v2(w->file_.c_str(), &cdb, SQLITE_OPEN_READWRITE, vfs) == SQLITE_OK;
  ScopedDb checkpoint_db(cdb);
  // Reading the journal mode also makes the new connection find the WAL it is to checkpoint.
  bool wal = false;
  if (opened) {
    auto st = prepare(checkpoint_db.get(), "PRAGMA journal_mode");
    wal = st.isOk() && sqlite3_step(st->get()) == SQLITE_ROW &&
          std::string(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 0))) == "wal";
  }
  if (wal) {
    if (unsynced) (void)execSql(checkpoint_db.get(), "PRAGMA synchronous=OFF");  // its checkpoints' syncs
    w->startCheckpointer(std::move(checkpoint_db));
  }
  for (size_t i = 0; i < options.prepared_buffers; ++i) w->free_buffers_.push_back(std::make_unique<OpBuffer>());
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

// SQLite's default checkpoint threshold, in WAL frames (pages).
constexpr int kCheckpointFrames = 1000;

void TraceWriter::startCheckpointer(ScopedDb db) {
  checkpoint_db_ = std::move(db);
  sqlite3_busy_timeout(checkpoint_db_.get(), 1000);
  // Replaces the writer connection's automatic checkpoints (also a WAL hook).
  sqlite3_wal_hook(db_.get(), &TraceWriter::walHook, this);
  checkpoint_thread_ = std::thread([this] { checkpointLoop(); });
}

int TraceWriter::walHook(void* self, sqlite3*, const char*, int frames) {
  auto* w = static_cast<TraceWriter*>(self);
  if (frames >= kCheckpointFrames) {
    {
      std::lock_guard<std::mutex> lock(w->checkpoint_mu_);
      w->checkpoint_wanted_ = true;
    }
    w->checkpoint_cv_.notify_one();
  }
  return SQLITE_OK;
}

void TraceWriter::checkpointLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(checkpoint_mu_);
      checkpoint_cv_.wait(lock, [&] { return checkpoint_wanted_ || checkpoint_stop_; });
      if (checkpoint_stop_) return;
      checkpoint_wanted_ = false;
    }
    // PASSIVE: copies what no reader still needs, without blocking the writer; the WAL starts
    // over at the writer's next transaction once all of it is copied.
    sqlite3_wal_checkpoint_v2(checkpoint_db_.get(), "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
}

TraceWriter::TraceWriter(ScopedDb db, Options options)
    : db_(std::move(db)), options_(options), totals_(std::make_unique<OpTotals>()) {}

TraceWriter::~TraceWriter() { (void)close(); }

Status TraceWriter::close() {
  if (closed_) return Status::ok();
  closed_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (checkpoint_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(checkpoint_mu_);
      checkpoint_stop_ = true;
    }
    checkpoint_cv_.notify_one();
    checkpoint_thread_.join();
  }
  // The checkpointer's connection closes first: the writer's, closing last, checkpoints the
  // whole WAL and removes it. That checkpoint is tried here first, to tell a person when it
  // cannot be done: a checkpoint that fails on close is silent in SQLite and leaves the WAL.
  // The reserve goes back before it: the room is the checkpoint's now.
  checkpoint_db_.reset();
  releaseReserve();
  Status result = Status::ok();
  const std::string file = path();
  if (db_ && !file.empty()) {
    const int rc = sqlite3_wal_checkpoint_v2(db_.get(), "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    // BUSY/LOCKED: another connection (a reader, another rank's writer) holds the WAL; its last
    // writer checkpoints it. Anything else that fails leaves the pages in the WAL.
    const int primary = rc & 0xff;
    if (primary != SQLITE_OK && primary != SQLITE_BUSY && primary != SQLITE_LOCKED) {
      std::error_code ec;
      const uintmax_t wal_bytes = std::filesystem::file_size(file + "-wal", ec);
      const std::string wal = file + "-wal" + (ec ? std::string() : " (" + formatBytes(wal_bytes) + ")");
      const std::string until = "keep the two files together until a writer with room copies it into the file (the "
                                "next npuscope run on the file, or sqlite3 " + file + " 'PRAGMA wal_checkpoint')";
      if (!failure_.empty() || !error().isOk()) {
        // Continues the write error the caller reports (TraceWriter::error, endRun).
        result = Status(StatusCode::kIoError, "what was committed stays in " + wal + ": " + until);
      } else {
        const std::string why = primary == SQLITE_FULL
                                    ? fullDiskLine() + ": the last checkpoint found no room"
                                    : file + ": the last checkpoint failed (" + sqlite3_errstr(rc) + ")";
        result = Status(StatusCode::kIoError, why + ", so " + wal +
                                                  " holds committed pages the file does not have yet; nothing is "
                                                  "lost: " + until);
      }
    }
  }
  // The statements first, so that the connection really closes here (sqlite3_close_v2 would
  // otherwise wait for them as a zombie).
  statements_ = Statements();
  db_.reset();
  return result;
}

std::string TraceWriter::fullDiskLine() const {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::absolute(path()).parent_path();
  const auto space = std::filesystem::space(dir, ec);
  std::string line = path() + ": the filesystem of " + dir.string() + " is full";
  if (faults_ != nullptr && (faults_->governs(DiskFaults::kTraceDb) || faults_->governs(DiskFaults::kTraceWal))) {
    line += " (injected: " + faults_->describe() + ")";  // the real disk may have room
  } else if (!ec) {
    line += " (" + formatBytes(space.available) + " free)";
  }
  return line;
}

// Enough for the WAL frames of the one-row update that marks a run failed: the WAL header and
// three frames of a trace file's 16 KiB pages (the runs row's page, an interior page, room over).
constexpr uint64_t kReserveBytes = 64 * 1024;

// `<file>-reserve-<pid>-<n>`: one per writer, so writers of the same file (ranks of a job, two
// processes) never take each other's. Those of processes that are gone (killed) are removed.
void TraceWriter::holdReserve() {
  const std::string file = path();
  if (file.empty()) return;  // an in-memory database
  const std::filesystem::path fp(file);
  const std::string prefix = fp.filename().string() + "-reserve-";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(fp.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(e.path(), ec);
  }
  static std::atomic<int> writers{0};
  reserve_path_ = file + "-reserve-" + std::to_string(::getpid()) + "-" + std::to_string(++writers);
  const int fd = ::open(reserve_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;  // no reserve: marking a run failed on a full disk waits for room, as before
  uint64_t held = 0;
  if (faults_ != nullptr && faults_->governs(DiskFaults::kTraceWal)) {
    static const char zeros[kReserveBytes] = {};
    iovec v{const_cast<char*>(zeros), sizeof zeros};
    const ssize_t n = faults_->writev(DiskFaults::kTraceWal, fd, &v, 1);
    held = n > 0 ? static_cast<uint64_t>(n) : 0;
  } else if (::posix_fallocate(fd, 0, static_cast<off_t>(kReserveBytes)) == 0) {
    held = kReserveBytes;  // blocks allocated now, not at the first write
  }
  ::close(fd);
  reserve_bytes_ = held;
  if (held < kReserveBytes) releaseReserve();  // too little room even for this: none
}

void TraceWriter::releaseReserve() {
  if (reserve_path_.empty()) return;
  ::unlink(reserve_path_.c_str());
  if (faults_ != nullptr && reserve_bytes_ > 0) faults_->giveBack(DiskFaults::kTraceWal, reserve_bytes_);
  reserve_bytes_ = 0;
  reserve_path_.clear();
}

Status TraceWriter::prepareStatements() {
  sqlite3* db = db_.get();
  // One row per statement for a batch's last few rows, kOpsPerInsert (kMemoryPerInsert) rows
  // for the others: SQLite's per-statement work (VDBE setup, reset, journal checks) is a good
  // part of a row's cost.
  auto insertRows = [](const char* head, int columns, size_t rows) {
    std::string one = "(?";
    for (int c = 1; c < columns; ++c) one += ",?";
    one += ")";
    std::string sql = head;
    for (size_t i = 0; i < rows; ++i) sql += (i ? "," : " VALUES ") + one;
    return sql;
  };
  const char* ops =
      "INSERT OR FAIL INTO op_events(id, run_id, step, name_id, start_ns, dur_ns, thread_id, depth, parent_id, seq_nr,"
      " is_backward, shapes_id, dtypes_id, device, device_start_ns, device_dur_ns, host_sync)";
  const char* memory = "INSERT OR FAIL INTO memory(run_id, ts_ns, device, allocated, reserved)";
  ASSIGN_OR_RETURN(statements_.insert_op_, prepare(db, insertRows(ops, 17, 1)));
  ASSIGN_OR_RETURN(statements_.insert_ops_, prepare(db, insertRows(ops, 17, kOpsPerInsert)));
  op_bound_[0].reset(17);
  op_bound_[1].reset(17 * kOpsPerInsert);
  ASSIGN_OR_RETURN(statements_.insert_memory_, prepare(db, insertRows(memory, 5, 1)));
  ASSIGN_OR_RETURN(statements_.insert_memories_, prepare(db, insertRows(memory, 5, kMemoryPerInsert)));
  memory_bound_[0].reset(5);
  memory_bound_[1].reset(5 * kMemoryPerInsert);
  const char* blocks =
      "INSERT OR FAIL INTO memory_blocks(run_id, device, alloc_seq, free_seq, alloc_ns, free_ns, size, requested, category,"
      " op_id, step, address, owner)";
  ASSIGN_OR_RETURN(statements_.insert_mem_block_, prepare(db, insertRows(blocks, 13, 1)));
  ASSIGN_OR_RETURN(statements_.insert_mem_blocks_, prepare(db, insertRows(blocks, 13, kMemoryPerInsert)));
  ASSIGN_OR_RETURN(statements_.insert_mem_device_, prepare(db,
      "INSERT INTO memory_devices(run_id, device, start_seq, end_seq, peak_seq, peak_ns, peak_allocated, peak_reserved,"
      " largest_cached, peak_op_id, peak_step, capacity) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_oom_, prepare(db,
      "INSERT INTO memory_ooms(run_id, device, seq, ts_ns, requested, op_id, step, message) VALUES (?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.update_mem_block_, prepare(db,
      "UPDATE memory_blocks SET free_seq=?1, free_ns=?2, category=?3 WHERE run_id=?4 AND device=?5 AND alloc_seq=?6"
      " AND address=?7 AND free_seq IS NULL"));
  ASSIGN_OR_RETURN(statements_.insert_component_, prepare(db,
      "INSERT INTO memory_components(run_id, device, component, ts_ns, reserved) VALUES (?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_block_, prepare(db,
      "INSERT INTO op_blocks(run_id, thread_id, first_id, last_id, ops, backward_ops, min_start_ns, max_start_ns,"
      " max_end_ns, min_step, max_step) VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_totals_, prepare(db,
      "INSERT INTO op_totals(run_id, name_id, shapes_id, calls, total_ns, self_ns, min_ns, max_ns, device_ns,"
      " device_calls) VALUES (?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.delete_totals_, prepare(db, "DELETE FROM op_totals WHERE run_id=?1"));
  ASSIGN_OR_RETURN(statements_.insert_step_, prepare(db,
      "INSERT OR REPLACE INTO steps(run_id, step, start_ns, dur_ns, loss, loss_scale, overflow, skipped, lr, grad_norm)"
      " VALUES (?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_overflow_, prepare(db,
      "INSERT INTO overflow_events(run_id, step, ts_ns, source, op_name, detail, op_id) VALUES (?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_collective_, prepare(db,
      "INSERT INTO collectives(run_id, step, op_id, grp, seq, kind, bytes, dtype, group_size, start_ns, end_ns)"
      " VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_dump_, prepare(db,
      "INSERT INTO tensor_dumps(run_id, step, op_id, op_name, op_type, io, idx, dtype, shape, format, min, max, mean,"
      " l2norm, nan_count, inf_count, data, data_ref, arg) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.insert_entry_,
                   prepare(db, "INSERT INTO dump_entries(run_id, step, name, parent, stack, op_id) VALUES (?,?,?,?,?,?)"));
  const char* tasks =
      "INSERT OR FAIL INTO device_tasks(run_id, step, op_id, device, stream, name_id, type_id, start_ns, dur_ns, correlation,"
      " shapes_id, bytes, comm_group)";
  ASSIGN_OR_RETURN(statements_.insert_task_, prepare(db, insertRows(tasks, 13, 1)));
  ASSIGN_OR_RETURN(statements_.insert_tasks_, prepare(db, insertRows(tasks, 13, kTasksPerInsert)));
  task_bound_[0].reset(13);
  task_bound_[1].reset(13 * kTasksPerInsert);
  ASSIGN_OR_RETURN(statements_.insert_string_, prepare(db,
      "INSERT INTO strings(value) VALUES (?) ON CONFLICT(value) DO UPDATE SET value=excluded.value RETURNING id"));
  ASSIGN_OR_RETURN(statements_.insert_run_, prepare(db,
      "INSERT INTO runs(started_ns, wall_start_ns, status, command, model, opt_level, optimizer, device, config_json,"
      " pid, host, source, source_path, rank, world_size, job) VALUES (?,?,'running',?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(statements_.end_run_, prepare(db,
      "UPDATE runs SET ended_ns=?, status=?, results_json=coalesce(?, results_json), dropped_records=? WHERE id=?"));
  ASSIGN_OR_RETURN(statements_.begin_, prepare(db, "BEGIN"));
  ASSIGN_OR_RETURN(statements_.commit_, prepare(db, "COMMIT"));
  return Status::ok();
}

void TraceWriter::enqueue(Item item, bool wake) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;  // closed: nothing is written any more
    queue_.push_back(std::move(item));
    ++enqueued_seq_;
    if (!wake) return;  // written at the writer's next wake, at the latest its commit interval
    wake_ = true;
  }
  cv_.notify_one();
}

Status TraceWriter::enqueueAndWait(Item item) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return failedPrecondition(file_ + ": the trace writer is closed");
  queue_.push_back(std::move(item));
  const uint64_t seq = ++enqueued_seq_;
  wake_ = true;
  cv_.notify_one();
  done_cv_.wait(lock, [&] { return committed_seq_ >= seq || !error_.isOk(); });
  return error_;
}

bool TraceWriter::submit(std::unique_ptr<OpBuffer>& buffer) {
  if (!buffer || buffer->size == 0) return true;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {  // closed: counted as lost, like a full queue's
      dropped_.fetch_add(buffer->size);
      buffer->size = 0;
      return false;
    }
    // A partial buffer (a step boundary's flush) joins the newest queued buffer when it fits,
    // even past step or memory records queued after that one: it is then written in the same
    // or an earlier transaction, never later. So many short steps take the queue room of their
    // records, not a buffer each.
    if (open_tail_ && open_tail_->size + buffer->size <= OpBuffer::kCapacity) {
      std::copy(buffer->records, buffer->records + buffer->size, open_tail_->records + open_tail_->size);
      open_tail_->size += buffer->size;
      pending_records_ += buffer->size;
      buffer->size = 0;
      return true;  // the caller keeps its (now empty) buffer; the writer is already due to wake
    }
    if (queued_buffers_ < options_.max_queued_buffers) {
      ++queued_buffers_;
      pending_records_ += buffer->size;
      // A full buffer wakes the writer; a step boundary's partial one waits for the next wake
      // (a full buffer, a command, the commit interval) unless the queue is filling up. So a
      // training loop does not wake the writer, and take a core from it, at every step.
      wake = buffer->full() || queued_buffers_ * 2 >= options_.max_queued_buffers;
      wake_ = wake_ || wake;
      open_tail_ = buffer.get();
      queue_.push_back(std::move(buffer));
      ++enqueued_seq_;
      buffer = nullptr;
    }
  }
  if (buffer) {  // the queue is full: count the loss, hand the buffer back empty
    dropped_.fetch_add(buffer->size);
    buffer->size = 0;
    return false;
  }
  if (wake) cv_.notify_one();
  buffer = takeBuffer();
  return true;
}

int64_t TraceWriter::waitForBacklog(size_t max_records) {
  std::unique_lock<std::mutex> lock(mu_);
  if (pending_records_ <= max_records || !error_.isOk()) return 0;
  const int64_t t0 = nowNs();
  wake_ = true;
  cv_.notify_one();
  done_cv_.wait(lock, [&] { return pending_records_ <= max_records || !error_.isOk() || stop_; });
  return nowNs() - t0;
}

std::unique_ptr<OpBuffer> TraceWriter::takeBuffer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_buffers_.empty()) {
      auto b = std::move(free_buffers_.back());
      free_buffers_.pop_back();
      b->size = 0;
      return b;
    }
  }
  return std::make_unique<OpBuffer>();
}

// Small records wait for the writer's next wake.
void TraceWriter::addStep(const StepRecord& r) { enqueue(r, false); }
void TraceWriter::addOverflow(const OverflowRecord& r) { enqueue(r, false); }
void TraceWriter::addCollective(const CollectiveRecord& r) { enqueue(r, false); }
void TraceWriter::addMemory(const MemoryRecord& r) { enqueue(r, false); }
void TraceWriter::addMemory(std::vector<MemoryRecord>&& batch) {
  if (!batch.empty()) enqueue(std::move(batch), false);
}
void TraceWriter::addMemoryBlocks(std::vector<MemoryBlockRecord>&& batch) {
  if (!batch.empty()) enqueue(std::move(batch), false);
}
void TraceWriter::addMemoryDevice(const MemoryDeviceRecord& r) { enqueue(r, false); }
void TraceWriter::addMemoryOom(const MemoryOomRecord& r) { enqueue(r, true); }
void TraceWriter::addMemoryComponents(std::vector<MemoryComponentRecord>&& batch) {
  if (!batch.empty()) enqueue(std::move(batch), false);
}
void TraceWriter::addDumpEntries(std::vector<DumpEntryRecord>&& batch) {
  if (batch.empty()) return;
  enqueue(std::move(batch));
}

void TraceWriter::addTensorDumps(std::vector<TensorDumpRecord>&& batch) {
  if (batch.empty()) return;
  size_t bytes = 0;
  for (auto& d : batch) {
    // Here, beside the writer thread's SQLite work.
    std::vector<uint8_t> frame;
    if (!d.data_encoded && encodeDumpPayload(d.data.data(), d.data.size(), &frame)) d.data = std::move(frame);
    d.data_encoded = true;
    bytes += d.data.size();
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded memory: wait for the writer, unless a single op alone exceeds the bound.
    done_cv_.wait(lock, [&] {
      return pending_dump_bytes_ == 0 || pending_dump_bytes_ + bytes <= options_.max_queued_dump_bytes ||
             !error_.isOk() || stop_;
    });
    pending_dump_bytes_ += bytes;
    queue_.push_back(std::move(batch));
    ++enqueued_seq_;
    wake_ = true;
  }
  cv_.notify_one();
}

Status TraceWriter::flush() { return enqueueAndWait(FlushCmd{}); }

StatusOr<int64_t> TraceWriter::beginRun(const RunInfo& info) {
  RETURN_IF_ERROR(enqueueAndWait(BeginCmd{info}));
  return run_id_.load();
}

Status TraceWriter::endRun(const std::string& status, const std::string& results_json, int64_t ended_ns) {
  return enqueueAndWait(EndCmd{status, results_json, ended_ns});
}

std::string TraceWriter::path() const { return file_; }

Status TraceWriter::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status TraceWriter::writeString(uint32_t id) {
  // The table's string ids differ from the ids in this file: map them.
  const StringTable& table = options_.strings != nullptr ? *options_.strings : StringTable::global();
  if (id > table.size()) return Status::ok();  // not the table's: unmapped, as id 0
  const std::string s = table.value(id);
  sqlite3_stmt* st = statements_.insert_string_.get();
  sqlite3_bind_text(st, 1, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);  // bindings outlive `s`
  const int rc = sqlite3_step(st);
  const int64_t file_id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_reset(st);
  if (file_id < 0) return ioError(std::string("writing strings: ") + sqlite3_errmsg(db_.get()));
  if (id > string_ids_.size()) string_ids_.resize(id, 0);
  string_ids_[id - 1] = file_id;
  return Status::ok();
}

void TraceWriter::BoundInts::reset(size_t params) {
  value.assign(params + 1, 0);  // parameters are numbered from 1
  state.assign(params + 1, 0);
}
void TraceWriter::BoundInts::integer(sqlite3_stmt* st, int col, int64_t v) {
  const size_t i = static_cast<size_t>(col);
  if (state[i] == 2 && value[i] == v) return;
  sqlite3_bind_int64(st, col, v);
  state[i] = 2;
  value[i] = v;
}
void TraceWriter::BoundInts::null(sqlite3_stmt* st, int col) {
  const size_t i = static_cast<size_t>(col);
  if (state[i] == 1) return;
  sqlite3_bind_null(st, col);
  state[i] = 1;
}

Status TraceWriter::writeOps(const OpBuffer& b) {
  for (size_t i = 0; i < b.size; ++i) RETURN_IF_ERROR(mapStrings(b.records[i].name_id, b.records[i].shapes_id, b.records[i].dtypes_id));
  // Rows go in in id order: a buffer holds its ops in the order they ended (children before
  // parents); id order appends to the table's B-tree instead of splitting pages in its middle.
  op_order_.resize(b.size);
  for (size_t i = 0; i < b.size; ++i) op_order_[i] = static_cast<uint32_t>(i);
  auto by_id = [&](uint32_t x, uint32_t y) { return b.records[x].id < b.records[y].id; };
  if (!std::is_sorted(op_order_.begin(), op_order_.end(), by_id)) std::sort(op_order_.begin(), op_order_.end(), by_id);
  const int64_t run = run_id_.load();
  if (op_max_id_ < 0) {
    ASSIGN_OR_RETURN(op_max_id_, queryInt(db_.get(), "SELECT coalesce(max(rowid), 0) FROM op_events"));
  }
  auto bindOp = [&](BoundInts& bound, sqlite3_stmt* st, int base, const OpRecord& r) {
    const int64_t id = r.id + id_offset_;
    if (id == op_max_id_ + 1) {
      bound.null(st, base + 1);  // the id SQLite gives the next row (max + 1)
    } else {
      bound.integer(st, base + 1, id);
    }
    if (id > op_max_id_) op_max_id_ = id;
    bound.integer(st, base + 2, run);
    bound.optional(st, base + 3, r.step, -1);
    bound.optional(st, base + 4, fileStringId(r.name_id), -1);
    bound.integer(st, base + 5, r.start_ns);
    bound.integer(st, base + 6, r.dur_ns);
    bound.integer(st, base + 7, static_cast<int64_t>(r.thread_id));
    bound.integer(st, base + 8, r.depth);
    bound.optional(st, base + 9, r.parent_id < 0 ? -1 : r.parent_id + id_offset_, -1);
    bound.optional(st, base + 10, r.seq_nr, -1);
    bound.integer(st, base + 11, r.is_backward);
    bound.optional(st, base + 12, fileStringId(r.shapes_id), -1);
    bound.optional(st, base + 13, fileStringId(r.dtypes_id), -1);
    bound.optional(st, base + 14, r.device, -1);
    bound.optional(st, base + 15, r.device_start_ns, -1);
    bound.optional(st, base + 16, r.device_dur_ns, -1);
    bound.optional(st, base + 17, r.host_sync ? 1 : 0, 0);
  };
  for (size_t at = 0; at < op_order_.size();) {
    const size_t rows = op_order_.size() - at >= kOpsPerInsert ? kOpsPerInsert : 1;
    sqlite3_stmt* st = rows > 1 ? statements_.insert_ops_.get() : statements_.insert_op_.get();
    BoundInts& bound = op_bound_[rows > 1 ? 1 : 0];
    for (size_t k = 0; k < rows; ++k) bindOp(bound, st, static_cast<int>(k * 17), b.records[op_order_[at + k]]);
    at += rows;
    if (sqlite3_step(st) != SQLITE_DONE) {
      op_max_id_ = -1;  // unknown: the failed statement's rows may or may not be in
      Status s = ioError(std::string("writing ops: ") + sqlite3_errmsg(db_.get()));
      sqlite3_reset(st);
      return s;
    }
    sqlite3_reset(st);
  }
  RETURN_IF_ERROR(writeOpBlocks(b));
  // The run's op table, in file ids as the rows have them (no string: 0; no parent: -1).
  if (totals_stored_) RETURN_IF_ERROR(dropStoredTotals());
  auto fileString = [&](uint32_t id) { return std::max<int64_t>(fileStringId(id), 0); };  // none: 0
  for (uint32_t i : op_order_) {
    const OpRecord& r = b.records[i];
    totals_->add(r.id + id_offset_, r.parent_id < 0 ? -1 : r.parent_id + id_offset_, fileString(r.name_id),
                fileString(r.shapes_id), r.dur_ns, r.device_dur_ns);
  }
  written_ops_.fetch_add(b.size);
  return Status::ok();
}

// The run's op_totals rows, as the run ends: its groups with the children of parents written
// long before them settled by looking the parents up.
Status TraceWriter::storeTotals() {
  const int64_t run = run_id_.load();
  RETURN_IF_ERROR(dropStoredTotals());
  if (totals_->ops() == 0) return Status::ok();
  sqlite3* db = db_.get();
  Status lookup = Status::ok();
  ScopedStmt parent;
  if (!totals_->parents().empty()) {
    ASSIGN_OR_RETURN(parent, prepare(db, "SELECT coalesce(name_id, 0), coalesce(shapes_id, 0) FROM op_events"
                                         " WHERE id=?1 AND run_id=?2"));
  }
  const std::vector<OpAggregator::Group> groups =
      totals_->settledGroups([&](int64_t id, int64_t* name_id, int64_t* shapes_id) {
        sqlite3_stmt* st = parent.get();
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, run);
        const int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
          *name_id = sqlite3_column_int64(st, 0);
          *shapes_id = sqlite3_column_int64(st, 1);
          return true;
        }
        if (rc != SQLITE_DONE && lookup.isOk()) lookup = ioError(std::string("reading ops: ") + sqlite3_errmsg(db));
        return false;
      });
  if (parent.get() != nullptr) sqlite3_reset(parent.get());
  RETURN_IF_ERROR(lookup);
  sqlite3_stmt* st = statements_.insert_totals_.get();
  for (const OpAggregator::Group& g : groups) {
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, g.name_id);
    sqlite3_bind_int64(st, 3, g.shapes_id);
    sqlite3_bind_int64(st, 4, g.calls);
    sqlite3_bind_int64(st, 5, g.total);
    sqlite3_bind_int64(st, 6, g.self);
    sqlite3_bind_int64(st, 7, g.min);
    sqlite3_bind_int64(st, 8, g.max);
    sqlite3_bind_int64(st, 9, g.device);
    sqlite3_bind_int64(st, 10, g.device_calls);
    RETURN_IF_ERROR(stepStatement(db, st));
  }
  totals_stored_ = true;
  return Status::ok();
}

// Ops written to a run after it ended: its stored table no longer covers them (the next end
// stores it again).
Status TraceWriter::dropStoredTotals() {
  totals_stored_ = false;
  sqlite3_stmt* st = statements_.delete_totals_.get();
  sqlite3_bind_int64(st, 1, run_id_.load());
  return stepStatement(db_.get(), st);
}

// Summarises the buffer's ops (op_order_: in id order) as op_blocks rows: per thread, runs of
// ids with no gap wider than kMaxGap. A gap is another thread's ops, or an op that ended much
// later than it started (a long parent, written with a later buffer): a block never spans it,
// so reading a block's id range reads few rows that are not its own.
Status TraceWriter::writeOpBlocks(const OpBuffer& b) {
  constexpr int64_t kMaxGap = 64;
  struct Block {
    uint64_t thread = 0;
    int64_t first = 0, last = 0, ops = 0, backward = 0;
    int64_t min_start = 0, max_start = 0, max_end = 0;
    int32_t min_step = -1, max_step = -1;
  };
  const int64_t run = run_id_.load();
  sqlite3_stmt* st = statements_.insert_block_.get();
  auto emit = [&](const Block& k) -> Status {
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, static_cast<int64_t>(k.thread));
    sqlite3_bind_int64(st, 3, k.first + id_offset_);
    sqlite3_bind_int64(st, 4, k.last + id_offset_);
    sqlite3_bind_int64(st, 5, k.ops);
    sqlite3_bind_int64(st, 6, k.backward);
    sqlite3_bind_int64(st, 7, k.min_start);
    sqlite3_bind_int64(st, 8, k.max_start);
    sqlite3_bind_int64(st, 9, k.max_end);
    bindOptionalInt(st, 10, k.min_step, -1);
    bindOptionalInt(st, 11, k.max_step, -1);
    return stepStatement(db_.get(), st);
  };
  std::vector<Block> open;  // one per thread: buffers hold one thread's ops, or a few when joined
  for (uint32_t i : op_order_) {
    const OpRecord& r = b.records[i];
    Block* k = nullptr;
    for (Block& o : open) {
      if (o.thread == r.thread_id) k = &o;
    }
    if (k && r.id - k->last > kMaxGap) {
      RETURN_IF_ERROR(emit(*k));
      k->ops = 0;
    }
    if (!k) {
      open.emplace_back();
      k = &open.back();
      k->thread = r.thread_id;
    }
    const int64_t end = r.start_ns + r.dur_ns;
    if (k->ops == 0) {
      k->first = r.id;
      k->backward = 0;
      k->min_start = k->max_start = r.start_ns;
      k->max_end = end;
      k->min_step = k->max_step = r.step;
    } else {
      k->min_start = std::min(k->min_start, r.start_ns);
      k->max_start = std::max(k->max_start, r.start_ns);
      k->max_end = std::max(k->max_end, end);
      if (r.step >= 0) {
        k->min_step = k->min_step < 0 ? r.step : std::min(k->min_step, r.step);
        k->max_step = std::max(k->max_step, r.step);
      }
    }
    k->last = r.id;
    ++k->ops;
    k->backward += r.is_backward != 0;
  }
  for (const Block& k : open) RETURN_IF_ERROR(emit(k));
  return Status::ok();
}

Status TraceWriter::write(Item& item) {
  sqlite3* db = db_.get();
  const int64_t run = run_id_.load();
  if (auto* buf = std::get_if<std::unique_ptr<OpBuffer>>(&item)) {
    if (run < 0) return failedPrecondition("op records before beginRun");
    return writeOps(**buf);
  }
  if (auto* s = std::get_if<StepRecord>(&item)) {
    sqlite3_stmt* st = statements_.insert_step_.get();
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, s->step);
    sqlite3_bind_int64(st, 3, s->start_ns);
    sqlite3_bind_int64(st, 4, s->dur_ns);
    sqlite3_bind_double(st, 5, s->loss);
    sqlite3_bind_double(st, 6, s->loss_scale);
    sqlite3_bind_int(st, 7, s->overflow);
    sqlite3_bind_int(st, 8, s->skipped);
    sqlite3_bind_double(st, 9, s->lr);
    if (s->grad_norm >= 0) sqlite3_bind_double(st, 10, s->grad_norm); else sqlite3_bind_null(st, 10);
    txn_step_ = std::max(txn_step_, s->step);
    return stepStatement(db, st);
  }
  if (auto* o = std::get_if<OverflowRecord>(&item)) {
    sqlite3_stmt* st = statements_.insert_overflow_.get();
    sqlite3_bind_int64(st, 1, run);
    bindOptionalInt(st, 2, o->step, -1);
    sqlite3_bind_int64(st, 3, o->ts_ns);
    sqlite3_bind_text(st, 4, o->source.data(), static_cast<int>(o->source.size()), SQLITE_TRANSIENT);
    bindText(st, 5, o->op_name);
    bindText(st, 6, o->detail);
    bindOptionalInt(st, 7, o->op_id < 0 ? -1 : o->op_id + id_offset_, -1);
    return stepStatement(db, st);
  }
  if (auto* c = std::get_if<CollectiveRecord>(&item)) {
    if (run < 0) return failedPrecondition("collectives before beginRun");
    sqlite3_stmt* st = statements_.insert_collective_.get();
    sqlite3_bind_int64(st, 1, run);
    bindOptionalInt(st, 2, c->step, -1);
    bindOptionalInt(st, 3, c->op_id < 0 ? -1 : c->op_id + id_offset_, -1);
    sqlite3_bind_int64(st, 4, c->group);
    sqlite3_bind_int64(st, 5, c->seq);
    bindText(st, 6, c->kind);
    sqlite3_bind_int64(st, 7, c->bytes);
    bindText(st, 8, c->dtype);
    sqlite3_bind_int64(st, 9, c->group_size);
    sqlite3_bind_int64(st, 10, c->start_ns);
    bindOptionalInt(st, 11, c->end_ns, -1);
    return stepStatement(db, st);
  }
  if (auto* m = std::get_if<MemoryRecord>(&item)) return writeMemory(*m);
  if (auto* batch = std::get_if<std::vector<MemoryRecord>>(&item)) {
    // kMemoryPerInsert rows per statement (a training step allocates a hundred times or more).
    size_t at = 0;
    for (; at + kMemoryPerInsert <= batch->size(); at += kMemoryPerInsert) {
      sqlite3_stmt* st = statements_.insert_memories_.get();
      for (size_t i = 0; i < kMemoryPerInsert; ++i) bindMemory(memory_bound_[1], st, static_cast<int>(5 * i), (*batch)[at + i]);
      RETURN_IF_ERROR(stepKeepingBindings(db, st));
    }
    for (; at < batch->size(); ++at) RETURN_IF_ERROR(writeMemory((*batch)[at]));
    return Status::ok();
  }
  if (auto* blocks = std::get_if<std::vector<MemoryBlockRecord>>(&item)) {
    if (run < 0) return failedPrecondition("memory blocks before beginRun");
    // Frees of blocks whose rows were written while live: set on those rows (a row not found,
    // which the recorder's order makes unlikely, is inserted whole).
    const auto updates = std::stable_partition(blocks->begin(), blocks->end(),
                                               [](const MemoryBlockRecord& b) { return !b.update; });
    for (auto it = updates; it != blocks->end(); ++it) {
      sqlite3_stmt* st = statements_.update_mem_block_.get();
      bindOptionalInt(st, 1, it->free_seq, -1);
      bindOptionalInt(st, 2, it->free_ns, -1);
      sqlite3_bind_int(st, 3, it->category);
      sqlite3_bind_int64(st, 4, run);
      sqlite3_bind_int(st, 5, it->device);
      sqlite3_bind_int64(st, 6, it->alloc_seq);
      sqlite3_bind_int64(st, 7, static_cast<int64_t>(it->address));
      RETURN_IF_ERROR(stepStatement(db, st));
      if (sqlite3_changes(db) == 0) {
        bindMemoryBlock(statements_.insert_mem_block_.get(), 0, *it);
        RETURN_IF_ERROR(stepStatement(db, statements_.insert_mem_block_.get()));
      }
    }
    blocks->erase(updates, blocks->end());
    size_t at = 0;
    for (; at + kMemoryPerInsert <= blocks->size(); at += kMemoryPerInsert) {
      sqlite3_stmt* st = statements_.insert_mem_blocks_.get();
      for (size_t i = 0; i < kMemoryPerInsert; ++i) bindMemoryBlock(st, static_cast<int>(13 * i), (*blocks)[at + i]);
      RETURN_IF_ERROR(stepStatement(db, st));
    }
    for (; at < blocks->size(); ++at) {
      bindMemoryBlock(statements_.insert_mem_block_.get(), 0, (*blocks)[at]);
      RETURN_IF_ERROR(stepStatement(db, statements_.insert_mem_block_.get()));
    }
    return Status::ok();
  }
  if (auto* d = std::get_if<MemoryDeviceRecord>(&item)) {
    if (run < 0) return failedPrecondition("memory devices before beginRun");
    sqlite3_stmt* st = statements_.insert_mem_device_.get();
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, d->device);
    sqlite3_bind_int64(st, 3, d->start_seq);
    sqlite3_bind_int64(st, 4, d->end_seq);
    bindOptionalInt(st, 5, d->peak_seq, -1);
    if (d->peak_seq < 0) {
      for (int c = 6; c <= 9; ++c) sqlite3_bind_null(st, c);
    } else {
      sqlite3_bind_int64(st, 6, d->peak_ns);
      sqlite3_bind_int64(st, 7, d->peak_allocated);
      sqlite3_bind_int64(st, 8, d->peak_reserved);
      sqlite3_bind_int64(st, 9, d->largest_cached);
    }
    bindOptionalInt(st, 10, d->peak_op_id < 0 ? -1 : d->peak_op_id + id_offset_, -1);
    bindOptionalInt(st, 11, d->peak_step, -1);
    sqlite3_bind_int64(st, 12, d->capacity);
    return stepStatement(db, st);
  }
  if (auto* o = std::get_if<MemoryOomRecord>(&item)) {
    if (run < 0) return failedPrecondition("an out-of-memory record before beginRun");
    sqlite3_stmt* st = statements_.insert_oom_.get();
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, o->device);
    sqlite3_bind_int64(st, 3, o->seq);
    sqlite3_bind_int64(st, 4, o->ts_ns);
    sqlite3_bind_int64(st, 5, o->requested);
    bindOptionalInt(st, 6, o->op_id < 0 ? -1 : o->op_id + id_offset_, -1);
    bindOptionalInt(st, 7, o->step, -1);
    bindText(st, 8, o->message);
    return stepStatement(db, st);
  }
  if (auto* components = std::get_if<std::vector<MemoryComponentRecord>>(&item)) {
    if (run < 0) return failedPrecondition("memory components before beginRun");
    sqlite3_stmt* st = statements_.insert_component_.get();
    for (const MemoryComponentRecord& c : *components) {
      sqlite3_bind_int64(st, 1, run);
      sqlite3_bind_int(st, 2, c.device);
      bindText(st, 3, c.component);
      sqlite3_bind_int64(st, 4, c.ts_ns);
      sqlite3_bind_int64(st, 5, c.reserved);
      RETURN_IF_ERROR(stepStatement(db, st));
    }
    return Status::ok();
  }
  if (auto* dumps = std::get_if<std::vector<TensorDumpRecord>>(&item)) {
    if (run < 0) return failedPrecondition("tensor dumps before beginRun");
    for (const TensorDumpRecord& d : *dumps) RETURN_IF_ERROR(writeTensorDump(d));
    return Status::ok();
  }
  if (auto* entries = std::get_if<std::vector<DumpEntryRecord>>(&item)) {
    if (run < 0) return failedPrecondition("dump entries before beginRun");
    sqlite3_stmt* st = statements_.insert_entry_.get();
    for (const DumpEntryRecord& e : *entries) {
      sqlite3_bind_int64(st, 1, run);
      bindOptionalInt(st, 2, e.step, -1);
      sqlite3_bind_text(st, 3, e.name.data(), static_cast<int>(e.name.size()), SQLITE_STATIC);
      if (e.parent.empty()) {
        sqlite3_bind_null(st, 4);
      } else {
        sqlite3_bind_text(st, 4, e.parent.data(), static_cast<int>(e.parent.size()), SQLITE_STATIC);
      }
      if (e.stack.empty()) {
        sqlite3_bind_null(st, 5);
      } else {
        sqlite3_bind_text(st, 5, e.stack.data(), static_cast<int>(e.stack.size()), SQLITE_STATIC);
      }
      bindOptionalInt(st, 6, e.op_id, -1);
      RETURN_IF_ERROR(stepStatement(db, st));
    }
    return Status::ok();
  }
  if (auto* tasks = std::get_if<std::vector<DeviceTaskRecord>>(&item)) {
    if (run < 0) return failedPrecondition("device tasks before beginRun");
    for (const DeviceTaskRecord& t : *tasks) RETURN_IF_ERROR(mapStrings(t.name_id, t.type_id, t.shapes_id));
    size_t at = 0;
    for (; at + kTasksPerInsert <= tasks->size(); at += kTasksPerInsert) {
      sqlite3_stmt* st = statements_.insert_tasks_.get();
      for (size_t i = 0; i < kTasksPerInsert; ++i) {
        RETURN_IF_ERROR(bindDeviceTask(task_bound_[1], st, static_cast<int>(13 * i), (*tasks)[at + i]));
      }
      RETURN_IF_ERROR(stepKeepingBindings(db, st));
    }
    for (; at < tasks->size(); ++at) {
      RETURN_IF_ERROR(bindDeviceTask(task_bound_[0], statements_.insert_task_.get(), 0, (*tasks)[at]));
      RETURN_IF_ERROR(stepKeepingBindings(db, statements_.insert_task_.get()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    pending_tasks_ -= tasks->size();
    done_cv_.notify_all();
    return Status::ok();
  }
  if (auto* b = std::get_if<BeginCmd>(&item)) {
    sqlite3_stmt* st = statements_.insert_run_.get();
    sqlite3_bind_int64(st, 1, b->info.started_ns);
    sqlite3_bind_int64(st, 2, b->info.wall_start_ns);
    bindText(st, 3, b->info.command);
    bindText(st, 4, b->info.model);
    bindText(st, 5, b->info.opt_level);
    bindText(st, 6, b->info.optimizer);
    bindText(st, 7, b->info.device);
    bindText(st, 8, b->info.config_json);
    sqlite3_bind_int64(st, 9, static_cast<int64_t>(::getpid()));
    bindText(st, 10, hostName());
    bindText(st, 11, b->info.source);
    bindText(st, 12, b->info.source_path);
    bindOptionalInt(st, 13, b->info.rank, -1);
    bindOptionalInt(st, 14, b->info.world_size, -1);
    bindText(st, 15, b->info.job);
    RETURN_IF_ERROR(stepStatement(db, st));
    run_id_.store(sqlite3_last_insert_rowid(db));
    importing_ = b->info.command == "import";
    // Producers number ops from 1 in every process; a run added to a file that already holds
    // ops continues after them, so op ids (and parents) stay unique across the file's runs.
    ASSIGN_OR_RETURN(id_offset_, queryInt(db, "SELECT coalesce(max(id), 0) FROM op_events"));
    op_max_id_ = id_offset_;
    payload_rows_.clear();
    payload_rows_step_ = INT64_MIN;
    dropped_.store(0);
    totals_->clear();
    totals_stored_ = false;
    return Status::ok();
  }
  if (auto* e = std::get_if<EndCmd>(&item)) {
    end_results_ = e->results;  // should this transaction's commit fail, the failed run keeps them
    RETURN_IF_ERROR(storeTotals());
    sqlite3_stmt* st = statements_.end_run_.get();
    sqlite3_bind_int64(st, 1, e->ended_ns < 0 ? nowNs() : e->ended_ns);
    sqlite3_bind_text(st, 2, e->status.data(), static_cast<int>(e->status.size()), SQLITE_TRANSIENT);
    bindText(st, 3, e->results);
    sqlite3_bind_int64(st, 4, static_cast<int64_t>(dropped_.load()));
    sqlite3_bind_int64(st, 5, run);
    return stepStatement(db, st);
  }
  return Status::ok();  // FlushCmd: only needs the commit
}

void TraceWriter::bindMemory(BoundInts& bound, sqlite3_stmt* st, int first, const MemoryRecord& m) {
  bound.integer(st, first + 1, run_id_.load());
  bound.integer(st, first + 2, m.ts_ns);
  bound.integer(st, first + 3, m.device);
  bound.integer(st, first + 4, static_cast<int64_t>(m.allocated));
  bound.integer(st, first + 5, static_cast<int64_t>(m.reserved));
}

void TraceWriter::bindMemoryBlock(sqlite3_stmt* st, int first, const MemoryBlockRecord& b) {
  sqlite3_bind_int64(st, first + 1, run_id_.load());
  sqlite3_bind_int(st, first + 2, b.device);
  sqlite3_bind_int64(st, first + 3, b.alloc_seq);
  bindOptionalInt(st, first + 4, b.free_seq, -1);
  sqlite3_bind_int64(st, first + 5, b.alloc_ns);
  bindOptionalInt(st, first + 6, b.free_ns, -1);
  sqlite3_bind_int64(st, first + 7, b.size);
  sqlite3_bind_int64(st, first + 8, b.requested);
  sqlite3_bind_int(st, first + 9, b.category);
  bindOptionalInt(st, first + 10, b.op_id < 0 ? -1 : b.op_id + id_offset_, -1);
  bindOptionalInt(st, first + 11, b.step, -1);
  sqlite3_bind_int64(st, first + 12, static_cast<int64_t>(b.address));
  if (b.owner.empty()) {
    sqlite3_bind_null(st, first + 13);
  } else {
    sqlite3_bind_text(st, first + 13, b.owner.data(), static_cast<int>(b.owner.size()), SQLITE_STATIC);
  }
}

Status TraceWriter::writeMemory(const MemoryRecord& m) {
  sqlite3_stmt* st = statements_.insert_memory_.get();
  bindMemory(memory_bound_[0], st, 0, m);
  return stepKeepingBindings(db_.get(), st);
}

Status TraceWriter::bindDeviceTask(BoundInts& bound, sqlite3_stmt* st, int base, const DeviceTaskRecord& t) {
  if (t.name_id == 0 || t.type_id == 0) return invalidArgument("a device task needs a name and a type");
  bound.integer(st, base + 1, run_id_.load());
  bound.optional(st, base + 2, t.step, -1);
  bound.optional(st, base + 3, t.op_id < 0 ? -1 : t.op_id + id_offset_, -1);
  bound.integer(st, base + 4, t.device);
  bound.integer(st, base + 5, t.stream);
  bound.optional(st, base + 6, fileStringId(t.name_id), -1);
  bound.optional(st, base + 7, fileStringId(t.type_id), -1);
  bound.integer(st, base + 8, t.start_ns);
  bound.integer(st, base + 9, t.dur_ns);
  bound.optional(st, base + 10, t.correlation, -1);
  bound.optional(st, base + 11, fileStringId(t.shapes_id), -1);
  bound.optional(st, base + 12, t.bytes, -1);
  if (t.comm_group.empty()) {
    bound.null(st, base + 13);
  } else {
    bindText(st, base + 13, t.comm_group);
    bound.state[static_cast<size_t>(base + 13)] = 0;  // text: not kept
  }
  return Status::ok();
}

void TraceWriter::addDeviceTasks(std::vector<DeviceTaskRecord>&& batch) {
  if (batch.empty()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded memory (kImportBacklog).
    done_cv_.wait(lock, [&] { return pending_tasks_ < kImportBacklog || !error_.isOk() || stop_; });
    pending_tasks_ += batch.size();
    queue_.push_back(std::move(batch));
    ++enqueued_seq_;
    wake_ = true;
  }
  cv_.notify_one();
}

Status TraceWriter::writeTensorDump(const TensorDumpRecord& d) {
  // Payloads shared within a step: keys name rows of the current step only.
  if (d.step != payload_rows_step_) {
    payload_rows_.clear();
    payload_rows_step_ = d.step;
  }
  int64_t data_ref = -1;
  if (d.same_data_as != 0) {
    auto it = payload_rows_.find(d.same_data_as);
    if (it == payload_rows_.end() || !d.data.empty()) {
      return invalidArgument("tensor dump " + d.op_name + " " + d.io + " " + std::to_string(d.idx) +
                             " shares payload " + std::to_string(d.same_data_as) +
                             (d.data.empty() ? ", which no earlier row of its step holds" : " but has data of its own"));
    }
    data_ref = it->second;
  }
  sqlite3_stmt* st = statements_.insert_dump_.get();
  sqlite3_bind_int64(st, 1, run_id_.load());
  bindOptionalInt(st, 2, d.step, -1);
  bindOptionalInt(st, 3, d.op_id < 0 ? -1 : d.op_id + id_offset_, -1);
  auto text = [&](int col, const std::string& s) {
    sqlite3_bind_text(st, col, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  };
  text(4, d.op_name);
  text(5, d.op_type);
  text(6, d.io);
  sqlite3_bind_int64(st, 7, d.idx);
  text(8, d.dtype);
  text(9, d.shape);
  text(10, d.format);
  if (d.has_stats) {
    sqlite3_bind_double(st, 11, d.min);  // NaN binds as NULL (no non-NaN element)
    sqlite3_bind_double(st, 12, d.max);
    sqlite3_bind_double(st, 13, d.mean);
    sqlite3_bind_double(st, 14, d.l2norm);
    bindOptionalInt(st, 15, d.nan_count, -1);  // msprobe's statistics have no counts
    bindOptionalInt(st, 16, d.inf_count, -1);
  }
  // Already in its stored form (addTensorDumps); SQLITE_STATIC: the row outlives the step.
  if (!d.data.empty()) sqlite3_bind_blob64(st, 17, d.data.data(), d.data.size(), SQLITE_STATIC);
  bindOptionalInt(st, 18, data_ref, -1);
  if (d.arg.empty()) {
    sqlite3_bind_null(st, 19);
  } else {
    text(19, d.arg);
  }
  RETURN_IF_ERROR(stepStatement(db_.get(), st));
  if (d.payload_key != 0) payload_rows_[d.payload_key] = sqlite3_last_insert_rowid(db_.get());
  return Status::ok();
}

Status TraceWriter::abandonAfterError(const Status& error) {
  op_max_id_ = -1;  // the rolled-back rows' ids are free again
  if (in_txn_) {
    (void)execSql(db_.get(), "ROLLBACK");  // SQLite may have rolled back already
    in_txn_ = false;
  }
  const int code = sqlite3_errcode(db_.get()) & 0xff;
  if (code != SQLITE_FULL && error.message().find("disk is full") == std::string::npos) {
    failure_ = error.message();  // the run (if one began) ends failed with it
    markRunFailed();
    return error;
  }
  std::string message = fullDiskLine();
  // The run's row itself may have been in the transaction rolled back (a disk full from the
  // start): then the file holds nothing of the run and there is nothing to mark.
  bool run_in_file = false;
  if (run_id_.load() >= 0) {
    auto st = prepare(db_.get(), "SELECT 1 FROM runs WHERE id=?1");
    if (st.isOk()) {
      sqlite3_bind_int64(st->get(), 1, run_id_.load());
      run_in_file = sqlite3_step(st->get()) == SQLITE_ROW;
    }
  }
  if (!run_in_file) {
    message += importing_ ? "; the import stopped before its run was committed: the file holds none of it"
                          : "; recording stopped before its run was committed: the file holds none of it";
    failure_ = message;
    failure_marked_ = true;  // no row to mark
    releaseReserve();
    return Status(error.code(), message);
  }
  if (importing_) {  // an importer writes a run it read whole: any of it may be missing
    message += "; the import stopped: run " + std::to_string(run_id_.load()) +
               " holds part of the trace at most and is marked failed";
  } else {
    message += committed_step_ >= 0
                   ? "; recording stopped after step " + std::to_string(committed_step_) +
                         ": what came later (ops, steps, dumps) is not in the file"
                   : "; recording stopped before the first step was committed";
  }
  failure_ = message;
  releaseReserve();  // room for the update that marks the run failed
  markRunFailed();
  return Status(error.code(), message);
}

void TraceWriter::keepEndResults(const EndCmd& end) {
  end_results_ = end.results;
  failure_marked_ = false;  // marked again, with them
}

// A failed run's results_json: the results it ended with (a JSON object: train's figures, a
// script's exit_status), with "error" the write failure. An "error" of their own (why the run
// itself ended failed: a signal, the script's exception) is kept as "end_error".
std::string TraceWriter::failedResultsJson() const {
  nlohmann::json out = nlohmann::json::object();
  if (!end_results_.empty()) {
    auto results = nlohmann::json::parse(end_results_, nullptr, /*allow_exceptions=*/false);
    if (results.is_object()) out = std::move(results);
  }
  if (out.contains("error")) out["end_error"] = out["error"];
  out["error"] = failure_;
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void TraceWriter::markRunFailed() {
  const int64_t run = run_id_.load();
  if (run < 0 || failure_.empty()) return;
  // ended_ns stays when the recording stopped.
  auto st = prepare(db_.get(),
                    "UPDATE runs SET ended_ns=coalesce(ended_ns, ?1), status='failed', results_json=?2, "
                    "dropped_records=?3 WHERE id=?4");
  if (!st.isOk()) return;
  sqlite3_bind_int64(st->get(), 1, nowNs());
  bindText(st->get(), 2, failedResultsJson());
  sqlite3_bind_int64(st->get(), 3, static_cast<int64_t>(dropped_.load()));
  sqlite3_bind_int64(st->get(), 4, run);
  failure_marked_ = stepStatement(db_.get(), st->get()).isOk();  // autocommit: one small write
}

Status TraceWriter::commit() {
  if (!in_txn_) return Status::ok();
  const int64_t run = run_id_.load();
  if (run >= 0 && dropped_.load() > 0) {
    // A killed run still tells how much it lost.
    RETURN_IF_ERROR(execSql(db_.get(), "UPDATE runs SET dropped_records=" + std::to_string(dropped_.load()) +
                                           " WHERE id=" + std::to_string(run)));
  }
  RETURN_IF_ERROR(stepStatement(db_.get(), statements_.commit_.get()));
  in_txn_ = false;
  committed_step_ = txn_step_;
  return Status::ok();
}

void TraceWriter::run() {
  const auto interval = std::chrono::milliseconds(options_.commit_interval_ms);
  auto last_commit = Clock::now();
  size_t dump_bytes_in_txn = 0;
  for (;;) {
    std::deque<Item> batch;
    uint64_t seq = 0;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto deadline = in_txn_ ? last_commit + interval : Clock::now() + interval;
      cv_.wait_until(lock, deadline, [&] { return stop_ || wake_; });
      wake_ = false;
      batch.swap(queue_);
      queued_buffers_ = 0;
      open_tail_ = nullptr;
      seq = enqueued_seq_;
      stopping = stop_;
    }
    Status s = error();
    const bool had_error = !s.isOk();
    bool command = false;
    size_t batch_records = 0, batch_dump_bytes = 0;
    for (Item& item : batch) {
      if (auto* buf = std::get_if<std::unique_ptr<OpBuffer>>(&item)) batch_records += (*buf)->size;
      if (auto* dumps = std::get_if<std::vector<TensorDumpRecord>>(&item)) {
        for (const auto& d : *dumps) batch_dump_bytes += d.data.size();
      }
      command |= std::holds_alternative<BeginCmd>(item) || std::holds_alternative<EndCmd>(item) ||
                 std::holds_alternative<FlushCmd>(item);
      if (!s.isOk()) {
        if (auto* end = std::get_if<EndCmd>(&item)) keepEndResults(*end);
        continue;
      }
      if (!in_txn_) {
        s = stepStatement(db_.get(), statements_.begin_.get());
        if (!s.isOk()) continue;
        in_txn_ = true;
      }
      s = write(item);
    }
    // Dumped payloads also commit by size: their pages then reach the WAL (and a checkpoint the
    // database) while the dumper is still producing, not all at once when it flushes.
    dump_bytes_in_txn += batch_dump_bytes;
    if (s.isOk() && (command || stopping || Clock::now() - last_commit >= interval ||
                     dump_bytes_in_txn >= kDumpBytesPerCommit)) {
      s = commit();
      last_commit = Clock::now();
      dump_bytes_in_txn = 0;
    }
    if (!s.isOk() && !had_error) {
      s = abandonAfterError(s);
    } else if (had_error && !failure_marked_) {
      markRunFailed();  // space may have come back since (the dumper stopped, a file was removed)
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Item& item : batch) {
        if (auto* buf = std::get_if<std::unique_ptr<OpBuffer>>(&item)) {
          if (free_buffers_.size() < options_.max_queued_buffers) free_buffers_.push_back(std::move(*buf));
        }
      }
      if (!s.isOk() && error_.isOk()) {
        error_ = s;
        failed_.store(true, std::memory_order_release);
      }
      if (!in_txn_) committed_seq_ = seq;
      pending_records_ -= batch_records;
      pending_dump_bytes_ -= batch_dump_bytes;
    }
    done_cv_.notify_all();
    if (stopping) {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) break;
    }
  }
}

}  // namespace npuscope
