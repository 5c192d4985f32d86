// The single writer of a trace file. It owns the only writing SQLite connection and runs on its
// own thread: producers hand it whole buffers and small records and never touch SQLite.
// Everything is written in batched transactions, committed at least every 500 ms and at the
// end, in WAL mode, so a killed process keeps all but the last moments and the file stays
// consistent. When producers outrun it, buffers beyond the queue's bound are counted as
// dropped (stored in runs.dropped_records), never queued without limit nor lost silently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "npuscope/store/records.h"
#include "npuscope/store/sqlite_handles.h"
#include "npuscope/store/status.h"

namespace npuscope {

class DiskFaults;

// How `tensor_dumps.data` stores a raw tensor payload (docs/schema.md): true with the zstd frame
// in `frame` when that saves space; false when the raw bytes are stored as they are.
// Thread-safe; callers that produce many payloads encode them on their own threads and mark the
// records `data_encoded`.
bool encodeDumpPayload(const uint8_t* data, size_t size, std::vector<uint8_t>* frame);

class StringTable;

class OpTotals;  // op_aggregator.h

class TraceWriter {
 public:
  struct Options {
    int commit_interval_ms = 500;
    size_t max_queued_buffers = 256;  // 256 x 4096 op records in flight at most
    // Tensor-dump payload bytes queued at most; addTensorDumps waits beyond it (never drops).
    size_t max_queued_dump_bytes = size_t{256} << 20;
    // SQLite's page cache of the writing connection: the indexes of a long run outgrow the
    // default 2 MB; an importer, which writes no indexed hot path, takes less.
    int64_t page_cache_kib = 65536;
    // The table the records' string ids (op names, task types) are from; null: the process's
    // (StringTable::global(), which recording interns into). It must outlive the writer.
    const StringTable* strings = nullptr;
    // Op buffers made at open, their pages written: a recording's threads then take them at
    // their first op and at the first step's end, instead of zeroing 400 KB each inside the
    // first step (about 0.4 ms of it on the bench's CNN).
    size_t prepared_buffers = 0;
    // false: a file that holds no run yet is written without fsync (SQLite's synchronous=OFF, on
    // both connections). A crash of the process still leaves a consistent file; a crash of the
    // machine within seconds of the writes may not, and then only this writer's runs are at risk.
    // For an importer, whose source can be imported again: its commits and final checkpoint skip
    // two fdatasync calls that took ~35 ms of a 0.34 s import. A file with runs keeps NORMAL.
    bool sync_new_file = true;
  };

  // Opens (creating or migrating) `path` and starts the writer thread. With
  // NPUSCOPE_FAULT_DISK_BYTES set, the file is opened through DiskFaults' VFS (an injected full
  // disk, for tests; npuscope/store/disk_faults.h); a malformed value is refused here.
  static StatusOr<std::unique_ptr<TraceWriter>> open(const std::string& path, Options options);
  static StatusOr<std::unique_ptr<TraceWriter>> open(const std::string& path) { return open(path, Options()); }
  ~TraceWriter();  // close(), its result dropped
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Starts a run and returns its id (waits for the row to be committed).
  StatusOr<int64_t> beginRun(const RunInfo& info);
  // Marks the current run ended with `status` (completed / failed) and optional results JSON,
  // after everything queued before it; waits for the commit.
  // `ended_ns` < 0: now (an imported run gives the end of its trace).
  Status endRun(const std::string& status, const std::string& results_json = "", int64_t ended_ns = -1);

  // Producer side. Never blocks on SQLite. A buffer that does not fit in the queue is counted
  // as dropped and comes back to the caller empty (return false).
  bool submit(std::unique_ptr<OpBuffer>& buffer);
  // Waits while more than `max_records` op records are queued or being written (never called
  // on an op thread: a step boundary may, to bound how far the file lags behind the run).
  // Returns the nanoseconds it waited.
  int64_t waitForBacklog(size_t max_records);
  // What an importer (which hands over millions of records) lets wait for the writer: 16k records
  // are 1-2 MB and ~12 ms of its work. addDeviceTasks waits while that many tasks are queued.
  static constexpr size_t kImportBacklog = size_t{1} << 14;
  // An empty buffer, recycled when possible (no allocation in steady state).
  std::unique_ptr<OpBuffer> takeBuffer();
  void addStep(const StepRecord& r);
  void addOverflow(const OverflowRecord& r);
  // A collective of a multi-rank job (any thread; its op id is a producer id like the ops').
  void addCollective(const CollectiveRecord& r);
  void addMemory(const MemoryRecord& r);
  void addMemory(std::vector<MemoryRecord>&& batch);  // one hand-over for many records
  // Schema 10: device blocks (their op ids are producer ids like the ops'), each device's peak
  // and refused allocations.
  void addMemoryBlocks(std::vector<MemoryBlockRecord>&& batch);
  void addMemoryDevice(const MemoryDeviceRecord& r);
  void addMemoryOom(const MemoryOomRecord& r);
  void addMemoryComponents(std::vector<MemoryComponentRecord>&& batch);
  // The tensors of one dumped op. Payloads not yet encoded are encoded (encodeDumpPayload) in
  // the calling thread (the dumper's file-writing threads, never an op thread), so compression
  // and the writer thread's SQLite work run side by side. Waits while more than
  // max_queued_dump_bytes of stored payload are queued, so a dump cannot outgrow memory; dump
  // records are never dropped.
  void addTensorDumps(std::vector<TensorDumpRecord>&& batch);
  // msprobe entries (the calls whose tensors addTensorDumps stores), in call order.
  void addDumpEntries(std::vector<DumpEntryRecord>&& batch);
  // Device tasks of an imported trace; their op ids are those of the run's op records. Waits
  // while 64k task records are still queued.
  void addDeviceTasks(std::vector<DeviceTaskRecord>&& batch);

  // Waits until everything queued so far is committed.
  Status flush();

  // Writes everything queued, commits, stops the threads and copies the WAL into the file (a
  // checkpoint), as the destructor does. Not ok when that checkpoint fails (a full disk, an I/O
  // error): every commit is kept in `<file>-wal`, which must stay beside the file until a
  // writer with room copies it in; the message says so in a person's words (a warning, not a
  // loss). After a write error (error() not ok) the message instead continues that error: "what
  // was committed stays in <file>-wal (N MiB): keep the two files together ...". Later calls
  // return ok and do nothing; the writer writes nothing after it (ops submitted are counted as
  // dropped). The owning thread only, like the destructor.
  Status close();

  // The database file's path.
  std::string path() const;
  int64_t runId() const { return run_id_.load(); }
  uint64_t droppedRecords() const { return dropped_.load(); }
  uint64_t writtenOps() const { return written_ops_.load(); }
  // The first write error, if any (the writer stops writing after it; data before it is kept).
  Status error() const;
  // Whether there is one: a load, no lock (for a check every step).
  bool failed() const { return failed_.load(std::memory_order_acquire); }

 private:
  struct BeginCmd {
    RunInfo info;
  };
  struct EndCmd {
    std::string status, results;
    int64_t ended_ns = -1;
  };
  struct FlushCmd {};
  using Item = std::variant<std::unique_ptr<OpBuffer>, StepRecord, OverflowRecord, CollectiveRecord, MemoryRecord,
                            std::vector<MemoryRecord>, std::vector<TensorDumpRecord>, std::vector<DumpEntryRecord>,
                            std::vector<DeviceTaskRecord>, std::vector<MemoryBlockRecord>, MemoryDeviceRecord,
                            MemoryOomRecord, std::vector<MemoryComponentRecord>, BeginCmd, EndCmd, FlushCmd>;

  TraceWriter(ScopedDb db, Options options);
  Status prepareStatements();
  // `wake`: the writer starts on it now; otherwise at its next wake (at the latest its commit
  // interval).
  void enqueue(Item item, bool wake = true);
  // Enqueues a command and waits until the writer has committed it.
  Status enqueueAndWait(Item item);
  void run();
  Status write(Item& item);
  Status writeOps(const OpBuffer& b);
  Status writeOpBlocks(const OpBuffer& b);
  Status storeTotals();
  Status dropStoredTotals();
  // Process strings are written into the file at their first use there (mapStrings): a file
  // holds the strings its rows use, not every string the process interned before it (an earlier
  // session's names and shapes). 0 and ids the table does not hold stay unmapped.
  bool stringMapped(uint32_t id) const { return id == 0 || (id <= string_ids_.size() && string_ids_[id - 1] > 0); }
  Status mapStrings(uint32_t a, uint32_t b, uint32_t c) {
    if (stringMapped(a) && stringMapped(b) && stringMapped(c)) return Status::ok();  // nearly every row
    for (uint32_t id : {a, b, c}) {
      if (!stringMapped(id)) RETURN_IF_ERROR(writeString(id));
    }
    return Status::ok();
  }
  Status writeString(uint32_t id);
  Status writeMemory(const MemoryRecord& m);
  struct BoundInts;
  void bindMemory(BoundInts& bound, sqlite3_stmt* st, int first, const MemoryRecord& m);  // first+1..first+5
  void bindMemoryBlock(sqlite3_stmt* st, int first, const MemoryBlockRecord& b);  // first+1..first+13
  Status writeTensorDump(const TensorDumpRecord& d);
  Status bindDeviceTask(BoundInts& bound, sqlite3_stmt* st, int base, const DeviceTaskRecord& t);  // base+1..base+13
  Status commit();
  // The checkpointer: copies committed WAL pages into the database on its own connection and
  // thread, so the writer's commits never wait for a checkpoint and its fsyncs.
  void startCheckpointer(ScopedDb db);
  void checkpointLoop();
  static int walHook(void* self, sqlite3* db, const char* name, int frames);

  ScopedDb db_;
  Options options_;
  DiskFaults* faults_ = nullptr;  // injected full disks (NPUSCOPE_FAULT_DISK_BYTES), if any
  static constexpr size_t kOpsPerInsert = 32;  // rows per multi-row INSERT of ops
  static constexpr size_t kMemoryPerInsert = 32;  // and of memory samples
  static constexpr size_t kTasksPerInsert = 32;   // and of device tasks
  // Finalized together by close(), before the connection closes.
  struct Statements {
    ScopedStmt insert_op_, insert_ops_, insert_block_, insert_step_, insert_overflow_, insert_collective_,
        insert_memory_, insert_memories_, insert_mem_block_, insert_mem_blocks_, insert_mem_device_, insert_oom_, insert_component_, update_mem_block_,
        insert_dump_, insert_entry_, insert_task_, insert_tasks_, insert_string_, insert_run_,
        insert_totals_, delete_totals_, end_run_, begin_, commit_;
  } statements_;
  // What each parameter of the op, device-task and memory INSERTs holds: bindings outlive
  // sqlite3_reset, so a parameter whose value (or NULL) is the one bound already is not bound
  // again (run ids, NULL ids and columns, steps and devices repeat row after row: binding was
  // ~20 % of a row's cost). Nothing else binds or clears these statements' parameters.
  struct BoundInts {
    std::vector<int64_t> value;
    std::vector<uint8_t> state;  // per parameter: 0 not known, 1 NULL, 2 `value`
    void reset(size_t params);
    // sqlite3_bind_int64 / sqlite3_bind_null unless parameter `col` of `st` holds that already.
    void integer(sqlite3_stmt* st, int col, int64_t v);
    void null(sqlite3_stmt* st, int col);
    void optional(sqlite3_stmt* st, int col, int64_t v, int64_t none) { v == none ? null(st, col) : integer(st, col, v); }
  };
  // [0]: the one-row statement, [1]: the many-row one.
  BoundInts op_bound_[2], task_bound_[2], memory_bound_[2];

  // After the first write error (writer thread only): the reason the run failed, whether the
  // run row says so yet, and the last step whose row was committed. The results the run ended
  // with (endRun after the error) join the row's results_json beside the reason.
  Status abandonAfterError(const Status& error);
  void markRunFailed();
  void keepEndResults(const EndCmd& end);
  std::string failedResultsJson() const;
  std::string failure_;
  bool failure_marked_ = false;
  std::string end_results_;
  bool closed_ = false;
  std::string file_;  // the database file's path
  // "<file>: the filesystem of <dir> is full (<free or the injected disk>)".
  std::string fullDiskLine() const;
  // A few blocks held beside the file (`<file>-reserve-<pid>-<n>`) from open to close: when the disk is
  // full they are given back, so the update that marks the run failed fits in the WAL.
  void holdReserve();
  void releaseReserve();
  std::string reserve_path_;
  uint64_t reserve_bytes_ = 0;
  int64_t txn_step_ = -1, committed_step_ = -1;
  bool importing_ = false;  // the run is an import (RunInfo::command "import")

  mutable std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Item> queue_;
  size_t queued_buffers_ = 0;
  size_t pending_records_ = 0;     // op records queued or being written
  size_t pending_dump_bytes_ = 0;  // tensor-dump payload bytes queued or being written
  size_t pending_tasks_ = 0;       // device task records queued or being written
  OpBuffer* open_tail_ = nullptr;  // the newest queued buffer, which partial buffers may join
  uint64_t enqueued_seq_ = 0, committed_seq_ = 0;
  bool stop_ = false;
  bool wake_ = false;  // something queued wants the writer before its commit interval is up
  Status error_;
  std::atomic<bool> failed_{false};  // set once error_ is
  std::vector<std::unique_ptr<OpBuffer>> free_buffers_;

  std::atomic<int64_t> run_id_{-1};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> written_ops_{0};
  std::vector<int64_t> string_ids_;  // writer thread only: process string id - 1 -> file id (0: not in the file)
  // The file's id of a process string id; -1 for none (0) or one not mapped (mapStrings).
  int64_t fileStringId(uint32_t id) const {
    return id == 0 || id > string_ids_.size() || string_ids_[id - 1] == 0 ? -1 : string_ids_[id - 1];
  }
  bool in_txn_ = false;           // writer thread only
  int64_t id_offset_ = 0;         // writer thread only: added to the run's op ids (see BeginCmd)
  // writer thread only: the largest id in op_events, -1 when not known (after a rollback). A row
  // whose id is the next one goes in with a NULL id: SQLite then appends (NewRowid) instead of
  // searching the table for that id, a good part of a row's cost.
  int64_t op_max_id_ = -1;
  std::vector<uint32_t> op_order_;  // writer thread only: a buffer's records in id order
  std::unique_ptr<OpTotals> totals_;  // writer thread only: the run's op table so far
  bool totals_stored_ = false;      // writer thread only: the run's op_totals rows are in
  // Writer thread only: tensor_dumps row ids of the payload keys of the step being written.
  std::unordered_map<uint64_t, int64_t> payload_rows_;
  int64_t payload_rows_step_ = INT64_MIN;
  std::thread thread_;

  ScopedDb checkpoint_db_;  // the checkpointer's connection
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_wanted_ = false, checkpoint_stop_ = false;
  std::thread checkpoint_thread_;
};

}  // namespace npuscope
