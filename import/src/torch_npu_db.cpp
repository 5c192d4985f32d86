#include "torch_npu_db.h"
#include "json_text.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "npuscope/store/sqlite_handles.h"
#include "trace_model.h"

namespace npuscope::import {
namespace {

// endNs - startNs of a row; 0 when the difference does not fit in 64 bits (a corrupt row).
int64_t durationNs(int64_t start, int64_t end) {
  int64_t d = 0;
  return __builtin_sub_overflow(end, start, &d) ? 0 : d;
}

// The db's rows become events of the processes trace_view.json shows them in, so TraceModel
// classifies them as it does the JSON's: CANN calls are host ops, TASK rows device tasks on
// their stream, COMMUNICATION_OP rows collectives on "Group N Communication" lanes. The pids are
// beyond any real pid (those are 32-bit); host rows keep their real pid and tid.
constexpr int64_t kCannPid = (int64_t{1} << 40) + 1;
constexpr int64_t kHardwarePid = (int64_t{1} << 40) + 2;
constexpr int64_t kHcclPid = (int64_t{1} << 40) + 3;

constexpr int64_t kInvalidId = 4294967295;  // torch_npu's DbConstant.DB_INVALID_VALUE

// PYTORCH_API.type (ENUM_API_TYPE)
constexpr int64_t kApiOp = 50001, kApiQueue = 50002, kApiTrace = 50003;

// CANN_API.type -> the level trace_view.json prefixes the call's name with ("Node@launch").
const char* cannLevel(int64_t type) {
  switch (type) {
    case 20000: return "AscendCL";
    case 15000: return "Model";
    case 10000: return "Node";
    case 5500: return "Hccl";
    case 5000: return "Runtime";
    default: return nullptr;
  }
}

// The database's size in bytes from its header (page size x the in-header page count), 0 when the
// header does not give it (the count is valid only when bytes 24 and 92 agree).
int64_t pagesInHeader(const std::string& path) {
  unsigned char h[100] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  const size_t got = std::fread(h, 1, sizeof(h), f);
  std::fclose(f);
  if (got < sizeof(h)) return 0;
  auto be32 = [&](int at) {
    return (uint32_t{h[at]} << 24) | (uint32_t{h[at + 1]} << 16) | (uint32_t{h[at + 2]} << 8) | uint32_t{h[at + 3]};
  };
  const uint32_t page_size = (uint32_t{h[16]} << 8 | h[17]) == 1 ? 65536 : (uint32_t{h[16]} << 8 | h[17]);
  if (be32(24) != be32(92)) return 0;
  return static_cast<int64_t>(page_size) * be32(28);
}

class Reader {
 public:
  Reader(std::string file, TraceModel& model, const std::function<bool(int64_t, int64_t)>& progress)
      : file_(std::move(file)), model_(model), progress_(progress) {}

  Status run(TorchNpuDbRun* run);

 private:
  Status open();
  Status fail(const std::string& doing) const;
  // SELECT of `table`'s columns by name (as t), the required ones checked; `at` maps each name to
  // its position in the result (-1: an optional column the table lacks). `more` (", expr...") and
  // `from` (joins) extend the statement.
  StatusOr<ScopedStmt> select(const std::string& table, const std::vector<std::string>& required,
                              const std::vector<std::string>& optional, std::map<std::string, int>* at,
                              const std::string& more = "", const std::string& from = "");
  std::set<std::string> columnsOf(const std::string& table);
  bool has(const std::string& table) const { return tables_.count(table) > 0; }
  Status step(sqlite3_stmt* st, bool* row, const std::string& table);
  Status tick();

  std::string_view str(sqlite3_stmt* st, int col) const {
    if (col < 0 || sqlite3_column_type(st, col) == SQLITE_NULL) return {};
    auto it = strings_.find(sqlite3_column_int64(st, col));
    return it == strings_.end() ? std::string_view() : std::string_view(it->second);
  }
  static std::optional<int64_t> num(sqlite3_stmt* st, int col) {
    if (col < 0 || sqlite3_column_type(st, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(st, col);
  }
  // A connection id; none for NULL, negative and torch_npu's invalid value.
  static std::optional<int64_t> link(sqlite3_stmt* st, int col) {
    auto v = num(st, col);
    if (!v || *v < 0 || *v == kInvalidId) return std::nullopt;
    return v;
  }
  // Names a process or thread (`what`: process_name / thread_name) as trace_view.json's M events do.
  void name(int64_t pid, int64_t tid, const char* what, std::string_view value) { model_.addName(pid, tid, what, value); }

  Status readPytorchApi();
  Status readCannApi();
  Status readTasks();
  Status readCommunication();
  Status readSteps();
  Status readMemory();
  Status readOpMemory();
  // An ENUM_* table (id, name) as a map; empty when the file has no such table.
  using EnumNames = std::map<int64_t, std::string>;
  StatusOr<EnumNames> readEnum(const std::string& table);
  Status readModuleMemory();
  Status readRunInfo(TorchNpuDbRun* run);

  std::string file_;
  TraceModel& model_;
  const std::function<bool(int64_t, int64_t)>& progress_;
  ScopedDb db_;
  std::set<std::string> tables_;
  std::unordered_map<int64_t, std::string> strings_;
  std::unordered_map<int64_t, std::vector<int64_t>> connections_;  // CONNECTION_IDS: id -> connection ids
  int64_t file_size_ = 0, rows_total_ = 1, rows_done_ = 0;
  int32_t task_device_ = -1;
};

Status Reader::fail(const std::string& doing) const {
  const int code = sqlite3_errcode(db_.get()) & 0xff;
  const std::string why = sqlite3_errmsg(db_.get());
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return invalidArgument(file_ + ": corrupt SQLite database (" + why + ")");
  return ioError(file_ + ": " + doing + ": " + why);
}

Status Reader::step(sqlite3_stmt* st, bool* row, const std::string& table) {
  const int rc = sqlite3_step(st);
  *row = rc == SQLITE_ROW;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail("reading " + table);
  return *row ? tick() : Status::ok();
}

Status Reader::tick() {
  if ((++rows_done_ & 4095) == 0 && progress_ &&
      !progress_(file_size_ * std::min(rows_done_, rows_total_) / rows_total_, file_size_)) {
    return failedPrecondition(file_ + ": import cancelled");
  }
  return Status::ok();
}

Status Reader::open() {
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) return notFound(file_ + ": no such file");
  file_size_ = static_cast<int64_t>(st.st_size);
  if (!isSqliteFile(file_)) {
    return invalidArgument(file_ + ": not an SQLite database (expected torch_npu's ascend_pytorch_profiler_*.db)");
  }
  // A truncated copy: fewer bytes than the pages its header counts (when that count is valid and
  // no WAL file holds pages). SQLite would only call it malformed.
  struct stat wal {};
  const bool wal_pages = ::stat((file_ + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
  const int64_t want = pagesInHeader(file_);
  if (!wal_pages && want > file_size_) {
    return invalidArgument(file_ + ": corrupt SQLite database: truncated (" + std::to_string(file_size_) + " of " +
                           std::to_string(want) + " bytes)");
  }
  // The source stays untouched, also on a read-only mount: without WAL pages beside it the file
  // is opened immutable (no -shm / -wal files made, no locks taken); with them (a profiler still
  // writing, or not checkpointed) read-only, so their pages are read too.
  sqlite3* raw = nullptr;
  int rc;
  if (!wal_pages) {
    std::string uri = "file:";
    for (char c : file_) {  // percent-encode what a URI path cannot hold as is
      if (c == '%' || c == '?' || c == '#') {
        char hex[4];
        std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
        uri += hex;
      } else {
        uri += c;
      }
    }
    uri += "?immutable=1";
    rc = sqlite3_open_v2(uri.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nullptr);
  } else {
    rc = sqlite3_open_v2(file_.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  }
  db_ = ScopedDb(raw);
  if (rc != SQLITE_OK) return ioError(file_ + ": cannot open: " + (raw ? sqlite3_errmsg(raw) : "out of memory"));
  sqlite3_busy_timeout(db_.get(), 5000);
  sqlite3_stmt* raw_st = nullptr;
  if (sqlite3_prepare_v2(db_.get(), "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')", -1, &raw_st,
                         nullptr) != SQLITE_OK) {
    return fail("reading its tables");
  }
  ScopedStmt names(raw_st);
  int step_rc;
  while ((step_rc = sqlite3_step(names.get())) == SQLITE_ROW) {
    tables_.insert(reinterpret_cast<const char*>(sqlite3_column_text(names.get(), 0)));
  }
  if (step_rc != SQLITE_DONE) return fail("reading its tables");
  if (!has("STRING_IDS")) {
    if (has("op_events") && has("runs")) {
      return invalidArgument(file_ + ": an npuscope trace file, not a torch_npu profiler export (open it directly)");
    }
    return invalidArgument(file_ + ": not a torch_npu profiler export (no table STRING_IDS)");
  }
  if (!has("PYTORCH_API") && !has("TASK")) {
    return invalidArgument(file_ + ": not a torch_npu profiler export (no table PYTORCH_API or TASK)");
  }
  return Status::ok();
}

std::set<std::string> Reader::columnsOf(const std::string& table) {
  std::set<std::string> out;
  sqlite3_stmt* raw = nullptr;
  const std::string sql = "PRAGMA table_info(\"" + table + "\")";
  if (sqlite3_prepare_v2(db_.get(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) return out;
  ScopedStmt st(raw);
  while (sqlite3_step(st.get()) == SQLITE_ROW) out.insert(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 1)));
  return out;
}

StatusOr<ScopedStmt> Reader::select(const std::string& table, const std::vector<std::string>& required,
                                    const std::vector<std::string>& optional, std::map<std::string, int>* at,
                                    const std::string& more, const std::string& from) {
  const std::set<std::string> have = columnsOf(table);
  std::string sql = "SELECT ";
  int n = 0;
  for (const std::string& c : required) {
    if (!have.count(c)) return invalidArgument(file_ + ": table " + table + " has no column '" + c + "'");
    sql += std::string(n ? ", " : "") + "t.\"" + c + "\"";
    (*at)[c] = n++;
  }
  for (const std::string& c : optional) {
    (*at)[c] = have.count(c) ? n : -1;
    if (have.count(c)) sql += std::string(n++ ? ", " : "") + "t.\"" + c + "\"";
  }
  sql += more + " FROM " + (from.empty() ? "\"" + table + "\" t" : from);
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_.get(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) return fail("reading " + table);
  return ScopedStmt(raw);
}

// PYTORCH_API: torch ops, the task queue's Enqueue / Dequeue, Python frames (skipped, counted).
Status Reader::readPytorchApi() {
  if (!has("PYTORCH_API")) return Status::ok();
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select("PYTORCH_API", {"startNs", "endNs", "globalTid", "name"},
                                         {"connectionId", "sequenceNumber", "inputDtypes", "inputShapes", "type"}, &c));
  static const std::vector<int64_t> kNone;
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "PYTORCH_API"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    EventFields e;
    e.ph = "X";
    e.name = str(s, c["name"]);
    const int64_t tid = sqlite3_column_int64(s, c["globalTid"]);
    e.pid = static_cast<int64_t>(static_cast<uint64_t>(tid) >> 32);
    e.tid = tid & 0xffffffff;
    e.ts_ns = sqlite3_column_int64(s, c["startNs"]);
    e.dur_ns = durationNs(*e.ts_ns, sqlite3_column_int64(s, c["endNs"]));
    const int64_t type = num(s, c["type"]).value_or(kApiOp);
    const auto conn = link(s, c["connectionId"]);
    auto ids = conn ? connections_.find(*conn) : connections_.end();
    if (type == kApiTrace) {
      e.cat = "python_function";
    } else if (type == kApiQueue) {
      e.cat = e.name.rfind("Enqueue", 0) == 0 ? "enqueue" : "dequeue";
      if (ids != connections_.end() && !ids->second.empty()) e.queue_correlation = ids->second.front();
    } else {
      e.cat = "cpu_op";
      e.launch_ids = ids != connections_.end() ? &ids->second : &kNone;
      if (auto seq = num(s, c["sequenceNumber"])) e.seq = *seq;
      e.input_dims = str(s, c["inputShapes"]);
      e.input_types = str(s, c["inputDtypes"]);
    }
    model_.addEvent(e);
  }
  return Status::ok();
}

// CANN_API: the ACL / node / HCCL calls, named as trace_view.json names them (level@name).
Status Reader::readCannApi() {
  if (!has("CANN_API")) return Status::ok();
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st,
                   select("CANN_API", {"startNs", "endNs", "globalTid", "name"}, {"type", "connectionId"}, &c));
  name(kCannPid, 0, "process_name", "CANN");
  std::string full;
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "CANN_API"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    EventFields e;
    e.ph = "X";
    const std::string_view api = str(s, c["name"]);
    const char* level = cannLevel(num(s, c["type"]).value_or(-1));
    full = level ? std::string(level) + "@" + std::string(api) : std::string(api);
    e.name = full;
    e.pid = kCannPid;
    e.tid = sqlite3_column_int64(s, c["globalTid"]) & 0xffffffff;
    e.ts_ns = sqlite3_column_int64(s, c["startNs"]);
    e.dur_ns = durationNs(*e.ts_ns, sqlite3_column_int64(s, c["endNs"]));
    e.connection = link(s, c["connectionId"]);
    model_.addEvent(e);
  }
  return Status::ok();
}

// TASK, with COMPUTE_TASK_INFO (name, op type, accelerator core, shapes) and
// COMMUNICATION_TASK_INFO (name) by globalTaskId when they exist.
Status Reader::readTasks() {
  if (!has("TASK")) return Status::ok();
  const bool by_id = columnsOf("TASK").count("globalTaskId") > 0;
  std::string from = "TASK t";
  const std::set<std::string> compute = has("COMPUTE_TASK_INFO") ? columnsOf("COMPUTE_TASK_INFO") : std::set<std::string>();
  const bool with_compute = by_id && compute.count("globalTaskId");
  auto computeCol = [&](const char* col) {
    return with_compute && compute.count(col) ? std::string("c.\"") + col + "\"" : std::string("NULL");
  };
  if (with_compute) from += " LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId";
  const std::set<std::string> comm = has("COMMUNICATION_TASK_INFO") ? columnsOf("COMMUNICATION_TASK_INFO")
                                                                     : std::set<std::string>();
  const bool with_comm = by_id && comm.count("globalTaskId") && comm.count("name");
  if (with_comm) {
    from += " LEFT JOIN (SELECT globalTaskId AS g, min(name) AS name FROM COMMUNICATION_TASK_INFO GROUP BY"
            " globalTaskId) m ON m.g = t.globalTaskId";
  }
  std::map<std::string, int> c;
  const std::string more = ", " + computeCol("name") + ", " + computeCol("opType") + ", " + computeCol("taskType") +
                           ", " + computeCol("inputShapes") + ", " + computeCol("inputDataTypes") + ", " +
                           (with_comm ? "m.name" : "NULL");
  const std::vector<std::string> optional = {"deviceId", "connectionId", "taskType", "streamId"};
  ASSIGN_OR_RETURN(ScopedStmt st, select("TASK", {"startNs", "endNs"}, optional, &c, more, from));
  int n = 2;
  for (const std::string& o : optional) n += c[o] >= 0;
  const int c_name = n, c_op = n + 1, c_core = n + 2, c_shapes = n + 3, c_types = n + 4, c_comm = n + 5;
  name(kHardwarePid, 0, "process_name", "Ascend Hardware");
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "TASK"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    EventFields e;
    e.ph = "X";
    e.task_type = str(s, c["taskType"]);
    // Named as trace_view.json names it: the compute op, the communication task, else its type.
    e.name = str(s, c_name);
    if (e.name.empty()) e.name = str(s, c_comm);
    if (e.name.empty()) e.name = e.task_type;
    e.op_type = str(s, c_op);
    e.core_type = str(s, c_core);
    e.input_dims = str(s, c_shapes);
    e.input_types = str(s, c_types);
    if (e.input_dims == "N/A") e.input_dims = {};
    const int64_t stream = num(s, c["streamId"]).value_or(0);
    e.pid = kHardwarePid;
    e.tid = stream;
    e.physic_stream = stream;
    e.device = num(s, c["deviceId"]);
    if (e.device && *e.device >= 0 && task_device_ < 0) task_device_ = static_cast<int32_t>(*e.device);
    e.ts_ns = sqlite3_column_int64(s, c["startNs"]);
    e.dur_ns = durationNs(*e.ts_ns, sqlite3_column_int64(s, c["endNs"]));
    e.connection = link(s, c["connectionId"]);
    model_.addEvent(e);
  }
  return Status::ok();
}

StatusOr<Reader::EnumNames> Reader::readEnum(const std::string& table) {
  EnumNames out;
  if (!has(table)) return out;
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select(table, {"id", "name"}, {}, &c));
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, table));
    if (!row) break;
    const unsigned char* t = sqlite3_column_text(st.get(), 1);
    out[sqlite3_column_int64(st.get(), 0)] = t ? reinterpret_cast<const char*>(t) : "";
  }
  return out;
}

// COMMUNICATION_OP: the collectives, one "Group N Communication" lane per group as in the JSON.
Status Reader::readCommunication() {
  if (!has("COMMUNICATION_OP")) return Status::ok();
  // ENUM_HCCL_DATA_TYPE; older exports: STRING_IDS
  ASSIGN_OR_RETURN(const EnumNames data_types, readEnum("ENUM_HCCL_DATA_TYPE"));
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select("COMMUNICATION_OP", {"opName", "startNs", "endNs"},
                                         {"connectionId", "groupName", "dataType", "count", "deviceId"}, &c));
  name(kHcclPid, 0, "process_name", "HCCL");
  std::map<std::string, int64_t> lanes;
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "COMMUNICATION_OP"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    EventFields e;
    e.ph = "X";
    e.name = str(s, c["opName"]);
    e.group = str(s, c["groupName"]);
    auto [lane, fresh] = lanes.try_emplace(std::string(e.group), static_cast<int64_t>(lanes.size()));
    if (fresh) name(kHcclPid, lane->second, "thread_name", "Group " + std::to_string(lane->second) + " Communication");
    e.pid = kHcclPid;
    e.tid = lane->second;
    if (auto type = num(s, c["dataType"])) {
      auto it = data_types.find(*type);
      e.data_type = it != data_types.end() ? std::string_view(it->second) : str(s, c["dataType"]);
    }
    if (c["count"] >= 0 && sqlite3_column_type(s, c["count"]) != SQLITE_NULL) {
      e.count = static_cast<int64_t>(sqlite3_column_double(s, c["count"]) + 0.5);
    }
    e.device = num(s, c["deviceId"]);
    e.ts_ns = sqlite3_column_int64(s, c["startNs"]);
    e.dur_ns = durationNs(*e.ts_ns, sqlite3_column_int64(s, c["endNs"]));
    e.connection = link(s, c["connectionId"]);
    model_.addEvent(e);
  }
  return Status::ok();
}

Status Reader::readSteps() {
  if (!has("STEP_TIME")) return Status::ok();
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select("STEP_TIME", {"id", "startNs", "endNs"}, {}, &c));
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "STEP_TIME"));
    if (!row) break;
    model_.addStep(sqlite3_column_int64(st.get(), 0), sqlite3_column_int64(st.get(), 1),
                   sqlite3_column_int64(st.get(), 2));
  }
  return Status::ok();
}

// MEMORY_RECORD: the PyTorch allocator's rows (component PTA), in bytes, as memory_record.csv's.
Status Reader::readMemory() {
  if (!has("MEMORY_RECORD")) return Status::ok();
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select("MEMORY_RECORD", {"component", "timestamp", "totalAllocated"},
                                         {"totalReserved", "deviceId"}, &c));
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "MEMORY_RECORD"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    if (str(s, c["component"]) != "PTA") continue;
    MemoryRecord m;
    m.ts_ns = sqlite3_column_int64(s, c["timestamp"]);
    m.device = static_cast<int32_t>(std::max<int64_t>(0, num(s, c["deviceId"]).value_or(0)));
    m.allocated = static_cast<uint64_t>(std::max<int64_t>(0, sqlite3_column_int64(s, c["totalAllocated"])));
    m.reserved = static_cast<uint64_t>(std::max<int64_t>(0, num(s, c["totalReserved"]).value_or(0)));
    model_.addMemory(m);
    if (task_device_ < 0) task_device_ = m.device;
  }
  return Status::ok();
}

// OP_MEMORY: operator_memory.csv's rows (name a STRING_IDS id, size in bytes, times in ns; a
// release time NULL or 0: live at the end), as memory blocks owned by the op's name.
Status Reader::readOpMemory() {
  if (!has("OP_MEMORY")) return Status::ok();
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select("OP_MEMORY", {"name", "size", "allocationTime"}, {"releaseTime", "deviceId"}, &c));
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "OP_MEMORY"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    MemoryBlockRecord b;
    b.alloc_ns = sqlite3_column_int64(s, c["allocationTime"]);
    const auto release = num(s, c["releaseTime"]);
    b.free_ns = release && *release > 0 && *release != kInvalidId && *release >= b.alloc_ns ? *release : -1;
    b.size = b.requested = std::max<int64_t>(0, sqlite3_column_int64(s, c["size"]));
    const auto device = num(s, c["deviceId"]);
    b.device = static_cast<int32_t>(device && *device >= 0 && *device < 65536 ? *device : 0);
    b.owner = str(s, c["name"]);
    model_.addMemoryBlock(b);
  }
  return Status::ok();
}

// NPU_MODULE_MEM: npu_module_mem.csv's samples (moduleId named by ENUM_MODULE, else STRING_IDS;
// totalReserved in bytes; timestampNs), the components that never reserved anything left out.
Status Reader::readModuleMemory() {
  if (!has("NPU_MODULE_MEM")) return Status::ok();
  ASSIGN_OR_RETURN(const EnumNames modules, readEnum("ENUM_MODULE"));
  std::map<std::string, int> c;
  ASSIGN_OR_RETURN(ScopedStmt st, select("NPU_MODULE_MEM", {"moduleId", "timestampNs", "totalReserved"}, {"deviceId"}, &c));
  std::vector<MemoryComponentRecord> rows;
  std::set<std::pair<int32_t, std::string>> reserved_any;
  for (bool row;;) {
    RETURN_IF_ERROR(step(st.get(), &row, "NPU_MODULE_MEM"));
    if (!row) break;
    sqlite3_stmt* s = st.get();
    if (sqlite3_column_type(s, c["totalReserved"]) == SQLITE_NULL) continue;
    MemoryComponentRecord r;
    const int64_t id = sqlite3_column_int64(s, c["moduleId"]);
    auto m = modules.find(id);
    std::string_view text = m != modules.end() ? std::string_view(m->second) : str(s, c["moduleId"]);
    r.component = text.empty() ? "module " + std::to_string(id) : std::string(text);
    r.ts_ns = sqlite3_column_int64(s, c["timestampNs"]);
    r.reserved = std::max<int64_t>(0, sqlite3_column_int64(s, c["totalReserved"]));
    const auto device = num(s, c["deviceId"]);
    r.device = static_cast<int32_t>(device && *device >= 0 && *device < 65536 ? *device : 0);
    if (r.reserved > 0) reserved_any.insert({r.device, r.component});
    rows.push_back(std::move(r));
  }
  for (MemoryComponentRecord& r : rows) {
    if (reserved_any.count({r.device, r.component})) model_.addMemoryComponent(std::move(r));
  }
  return Status::ok();
}

// META_DATA, NPU_INFO and RANK_DEVICE_MAP: the run row.
Status Reader::readRunInfo(TorchNpuDbRun* run) {
  nlohmann::json meta = nlohmann::json::object();
  auto text = [](sqlite3_stmt* s, int col) -> std::string {
    const unsigned char* t = col >= 0 ? sqlite3_column_text(s, col) : nullptr;
    return t ? reinterpret_cast<const char*>(t) : "";
  };
  if (has("META_DATA")) {
    std::map<std::string, int> c;
    ASSIGN_OR_RETURN(ScopedStmt st, select("META_DATA", {"name", "value"}, {}, &c));
    nlohmann::json& m = meta["META_DATA"] = nlohmann::json::object();
    for (bool row;;) {
      RETURN_IF_ERROR(step(st.get(), &row, "META_DATA"));
      if (!row) break;
      const std::string value = text(st.get(), 1);
      nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
      m[text(st.get(), 0)] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
    }
  }
  if (has("NPU_INFO")) {
    std::map<std::string, int> c;
    ASSIGN_OR_RETURN(ScopedStmt st, select("NPU_INFO", {"id"}, {"name"}, &c));
    nlohmann::json& npus = meta["NPU_INFO"] = nlohmann::json::array();
    for (bool row;;) {
      RETURN_IF_ERROR(step(st.get(), &row, "NPU_INFO"));
      if (!row) break;
      const int64_t id = sqlite3_column_int64(st.get(), 0);
      npus.push_back({{"id", id}, {"name", text(st.get(), c["name"])}});
      if (run->device < 0 && id >= 0) run->device = static_cast<int32_t>(id);
    }
  }
  if (has("RANK_DEVICE_MAP")) {
    std::map<std::string, int> c;
    ASSIGN_OR_RETURN(ScopedStmt st, select("RANK_DEVICE_MAP", {"rankId"}, {"deviceId"}, &c));
    bool row;
    RETURN_IF_ERROR(step(st.get(), &row, "RANK_DEVICE_MAP"));
    if (row) {
      const int64_t rank = sqlite3_column_int64(st.get(), 0);
      if (rank >= 0 && rank != kInvalidId) run->rank = rank;
      const auto device = num(st.get(), c["deviceId"]);
      if (device && *device >= 0 && *device != kInvalidId) run->device = static_cast<int32_t>(*device);
    }
  }
  if (run->device < 0) run->device = task_device_;
  run->metadata = jsonText(meta);
  return Status::ok();
}

Status Reader::run(TorchNpuDbRun* run) {
  RETURN_IF_ERROR(open());
  // Rows to read, for the progress estimate.
  rows_total_ = 1;
  for (const char* t : {"PYTORCH_API", "CANN_API", "TASK", "COMMUNICATION_OP", "MEMORY_RECORD", "OP_MEMORY", "NPU_MODULE_MEM"}) {
    if (!has(t)) continue;
    sqlite3_stmt* raw = nullptr;
    const std::string sql = std::string("SELECT count(*) FROM \"") + t + "\"";
    if (sqlite3_prepare_v2(db_.get(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) return fail("reading " + std::string(t));
    ScopedStmt st(raw);
    if (sqlite3_step(st.get()) != SQLITE_ROW) return fail("reading " + std::string(t));
    rows_total_ += sqlite3_column_int64(st.get(), 0);
  }
  {
    std::map<std::string, int> c;
    ASSIGN_OR_RETURN(ScopedStmt st, select("STRING_IDS", {"id", "value"}, {}, &c));
    for (bool row;;) {
      RETURN_IF_ERROR(step(st.get(), &row, "STRING_IDS"));
      if (!row) break;
      const unsigned char* t = sqlite3_column_text(st.get(), 1);
      strings_[sqlite3_column_int64(st.get(), 0)] = t ? reinterpret_cast<const char*>(t) : "";
    }
  }
  if (has("CONNECTION_IDS")) {
    std::map<std::string, int> c;
    ASSIGN_OR_RETURN(ScopedStmt st, select("CONNECTION_IDS", {"id", "connectionId"}, {}, &c));
    for (bool row;;) {
      RETURN_IF_ERROR(step(st.get(), &row, "CONNECTION_IDS"));
      if (!row) break;
      connections_[sqlite3_column_int64(st.get(), 0)].push_back(sqlite3_column_int64(st.get(), 1));
    }
  }
  RETURN_IF_ERROR(readPytorchApi());
  RETURN_IF_ERROR(readCannApi());
  RETURN_IF_ERROR(readTasks());
  RETURN_IF_ERROR(readCommunication());
  RETURN_IF_ERROR(readSteps());
  RETURN_IF_ERROR(readMemory());
  RETURN_IF_ERROR(readOpMemory());
  RETURN_IF_ERROR(readModuleMemory());
  RETURN_IF_ERROR(readRunInfo(run));
  if (progress_ && !progress_(file_size_, file_size_)) return failedPrecondition(file_ + ": import cancelled");
  return Status::ok();
}

}  // namespace

bool isSqliteFile(const std::string& path) {
  char header[16] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  const size_t got = std::fread(header, 1, sizeof(header), f);
  std::fclose(f);
  return got == sizeof(header) && std::memcmp(header, "SQLite format 3", 16) == 0;
}

Status readTorchNpuDb(const std::string& file, TraceModel& model, TorchNpuDbRun* run,
                      const std::function<bool(int64_t done, int64_t total)>& progress) {
  Reader reader(file, model, progress);
  return reader.run(run);
}

}  // namespace npuscope::import
