#include "npuscope/import/import.h"
#include "json_text.h"

#include <dirent.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "chrome_parser.h"
#include "files.h"
#include "json_stream.h"
#include "npuscope/import/msprobe.h"
#include "npuscope/store/trace_writer.h"
#include "acl_dump_import.h"
#include "ascend_csv.h"
#include "text.h"
#include "torch_npu_db.h"
#include "trace_model.h"

namespace npuscope::import {
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
StatusOr<std::string> readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ioError(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool isTraceJson(const std::string& name) {
  return endsWith(name, ".json") || endsWith(name, ".json.gz") || endsWith(name, ".gz");
}

// torch_npu's database export: ascend_pytorch_profiler_{rank}.db (ascend_pytorch_profiler.db
// without a rank).
bool isTorchNpuDbName(const std::string& name) {
  return name.rfind("ascend_pytorch_profiler", 0) == 0 && endsWith(name, ".db");
}
// The database export in a folder, "" when there is none.
std::string torchNpuDbIn(const std::string& dir) {
  for (const std::string& n : listDir(dir)) {
    if (isTorchNpuDbName(n) && isFile(join(dir, n))) return join(dir, n);
  }
  return "";
}

// A torch_npu profiler folder: the *_ascend_pt root (its ASCEND_PROFILER_OUTPUT holds the
// parsed results), or the ASCEND_PROFILER_OUTPUT folder itself.
struct AscendFolder {
  std::string root, output;
};
std::optional<AscendFolder> ascendFolder(const std::string& path) {
  if (!isDir(path)) return std::nullopt;
  if (isDir(join(path, "ASCEND_PROFILER_OUTPUT"))) return AscendFolder{path, join(path, "ASCEND_PROFILER_OUTPUT")};
  if (baseName(path) == "ASCEND_PROFILER_OUTPUT" || isFile(join(path, "trace_view.json"))) {
    std::string parent = path;
    while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
    const size_t slash = parent.find_last_of('/');
    parent = slash == std::string::npos ? "." : parent.substr(0, slash);
    return AscendFolder{parent, path};
  }
  return std::nullopt;
}

struct RankSource {
  std::string format;  // kineto | torch_npu (a folder) | torch_npu_db (the database export itself)
  std::string path;
};

StatusOr<std::vector<RankSource>> sourcesOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return notFound(path + ": no such file or folder");
  if (S_ISREG(st.st_mode)) {
    // SQLite by its content; a *.db that is not SQLite is refused here rather than read as JSON.
    if (isSqliteFile(path)) return std::vector<RankSource>{{"torch_npu_db", path}};
    if (endsWith(path, ".db")) {
      return invalidArgument(path + ": not an SQLite database (expected torch_npu's ascend_pytorch_profiler_*.db)");
    }
    return std::vector<RankSource>{{"kineto", path}};
  }
  if (ascendFolder(path)) return std::vector<RankSource>{{"torch_npu", path}};
  std::vector<RankSource> ranks;
  for (const std::string& n : listDir(path)) {
    const std::string p = join(path, n);
    if (ascendFolder(p)) {
      ranks.push_back({"torch_npu", p});
    } else if (isFile(p) && isTraceJson(n)) {
      ranks.push_back({"kineto", p});
    } else if (isFile(p) && isTorchNpuDbName(n)) {
      ranks.push_back({"torch_npu_db", p});
    }
  }
  if (ranks.empty()) {
    return invalidArgument(path + ": no trace in this folder (expected a Kineto *.json[.gz] trace, a torch_npu "
                           "*_ascend_pt folder or ascend_pytorch_profiler_*.db, or a folder of them)");
  }
  return ranks;
}

// The file whose size measures a rank's progress.
std::string mainFileOf(const RankSource& r) {
  if (r.format != "torch_npu") return r.path;
  const std::string output = ascendFolder(r.path)->output;
  const std::string db = torchNpuDbIn(output);
  if (!db.empty()) return db;
  for (const char* n : {"trace_view.json", "kernel_details.csv", "communication.json", "step_trace_time.csv"}) {
    if (isFile(join(output, n))) return join(output, n);
  }
  return join(output, "trace_view.json");
}

// A queue of batches between two threads, bounded so a fast stage waits for a slow one.
// close(): no more pushes, pop() drains then ends; cancel(): both ends stop at once.
template <typename T>
class BatchQueue {
 public:
  explicit BatchQueue(size_t bound) : bound_(bound) {}
  bool push(std::unique_ptr<T> b) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return items_.size() < bound_ || cancelled_; });
    if (cancelled_) return false;
    items_.push_back(std::move(b));
    cv_.notify_all();
    return true;
  }
  std::unique_ptr<T> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !items_.empty() || closed_ || cancelled_; });
    if (cancelled_ || items_.empty()) return nullptr;
    std::unique_ptr<T> b = std::move(items_.front());
    items_.pop_front();
    cv_.notify_all();
    return b;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  // Queues the batch unless the queue is full (then drops it), without waiting.
  void offer(std::unique_ptr<T> b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (items_.size() < bound_) items_.push_back(std::move(b));
  }
  // A queued batch if there is one, without waiting.
  std::unique_ptr<T> tryPop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (items_.empty()) return nullptr;
    std::unique_ptr<T> b = std::move(items_.front());
    items_.pop_front();
    cv_.notify_all();
    return b;
  }

 private:
  const size_t bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<T>> items_;
  bool closed_ = false, cancelled_ = false;
};

// Batches handed on in their order (`seq`, from 0) by workers that finish them in any order;
// a worker waits while its batch is `bound` or more ahead of the next one taken.
template <typename T>
class OrderedQueue {
 public:
  explicit OrderedQueue(size_t bound) : bound_(bound) {}
  bool push(size_t seq, std::unique_ptr<T> b) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return seq < next_ + bound_ || cancelled_; });
    if (cancelled_) return false;
    items_[seq] = std::move(b);
    cv_.notify_all();
    return true;
  }
  // The next batch in order; null once every worker is done and nothing is left, or cancelled.
  std::unique_ptr<T> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return items_.count(next_) || workers_done_ == workers_ || cancelled_; });
    auto it = items_.find(next_);
    if (cancelled_ || it == items_.end()) return nullptr;
    std::unique_ptr<T> b = std::move(it->second);
    items_.erase(it);
    ++next_;
    cv_.notify_all();
    return b;
  }
  void setWorkers(size_t n) { workers_ = n; }
  void workerDone() {
    std::lock_guard<std::mutex> lock(mu_);
    ++workers_done_;
    cv_.notify_all();
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  const size_t bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<size_t, std::unique_ptr<T>> items_;
  size_t next_ = 0, workers_ = 1, workers_done_ = 0;
  bool cancelled_ = false;
};

// Events on their way from the file to the model: the scanner copies them into `text`, a parser
// fills `fields` (strings pointing into `text` or `arena`) up to its first error.
struct EventBatch {
  struct Event {
    uint32_t at, size;
    int64_t offset;
  };
  size_t seq = 0;    // the batch's place in the file
  std::string text;  // the events' bytes back to back, padded for simdjson
  std::vector<Event> events;
  std::vector<EventFields> fields;
  StringArena arena;
  Status status;  // the parse error that ends the batch (and the read)
};

// Reading is a pipeline: one thread scans the file and copies its events into 768 KiB batches,
// two parse batches with simdjson (the costliest stage), and this one fills the model in file
// order. Each stage is bounded to a few batches, so memory stays a few MB above the model's.
Status readChrome(const std::string& file, TraceModel& model, JsonEventStream& stream,
                  const JsonEventStream::ProgressFn& progress) {
  // Each batch handed on can wake a thread, and four threads share two cores: on bench_import's
  // 1.1 GB, 256 KiB batches took 5 % longer than these; 1 MiB gained 1-2 % more but kept 10 MB
  // more after the read (peak 318 MB against 311).
  constexpr size_t kBatchBytes = size_t{768} << 10;
  constexpr size_t kParsers = 2;
  BatchQueue<EventBatch> scanned(2);
  OrderedQueue<EventBatch> parsed(3);
  // Batches the model is done with, reused: their memory is already mapped and sized.
  BatchQueue<EventBatch> spare(16);
  auto fresh = [&] {
    std::unique_ptr<EventBatch> b = spare.tryPop();
    if (!b) return std::make_unique<EventBatch>();
    b->text.clear();
    b->events.clear();
    b->fields.clear();
    b->arena.clear();
    b->status = Status::ok();
    return b;
  };
  parsed.setWorkers(kParsers);
  Status scan_status;
  std::thread scanner([&] {
    size_t seq = 0;
    auto batch = fresh();
    auto hand = [&]() -> bool {
      batch->text.append(JsonEventStream::kPadding, ' ');
      batch->seq = seq++;
      return scanned.push(std::move(batch));
    };
    Status s = stream.run(
        file,
        [&](const char* text, size_t size, int64_t offset) -> Status {
          if (size > UINT32_MAX) return invalidArgument(file + ": byte " + std::to_string(offset) + ": an event of 4 GB");
          batch->events.push_back({static_cast<uint32_t>(batch->text.size()), static_cast<uint32_t>(size), offset});
          batch->text.append(text, size);
          batch->text.push_back('\n');
          if (batch->text.size() >= kBatchBytes) {
            if (!hand()) return failedPrecondition("stopped");
            batch = fresh();
          }
          return Status::ok();
        },
        progress);
    if (s.isOk() && !batch->events.empty()) (void)hand();
    scan_status = s;
    scanned.close();
  });
  std::vector<std::thread> parsers;
  for (size_t w = 0; w < kParsers; ++w) {
    parsers.emplace_back([&] {
      ChromeEventParser parser;
      std::vector<uint32_t> starts;
      while (std::unique_ptr<EventBatch> b = scanned.pop()) {
        // Each event's fields are made just before it is parsed, while their cache lines are
        // hot (a resize of the whole batch first cost 9 % of an import's CPU).
        b->fields.reserve(b->events.size());
        // The batch in one go; from an event that does not parse on, one at a time (the error).
        starts.clear();
        for (const EventBatch::Event& e : b->events) starts.push_back(e.at);
        const size_t parsed_at_once = parser.parseMany(b->text.data(), b->text.size() - JsonEventStream::kPadding,
                                                       starts.data(), starts.size(), &b->fields, b->arena);
        for (size_t k = parsed_at_once; k < b->events.size(); ++k) {
          const EventBatch::Event& e = b->events[k];
          b->status = parser.parseFields(b->text.data() + e.at, e.size, e.offset, file, &b->fields.emplace_back(), b->arena);
          if (!b->status.isOk()) {
            b->fields.pop_back();
            break;
          }
        }
        const size_t seq = b->seq;
        if (!parsed.push(seq, std::move(b))) break;
      }
      parsed.workerDone();
    });
  }
  Status parse_status;
  while (std::unique_ptr<EventBatch> b = parsed.pop()) {
    for (const EventFields& e : b->fields) addParsedEvent(e, model);
    if (!b->status.isOk()) {
      parse_status = b->status;
      break;
    }
    spare.offer(std::move(b));
  }
  // Stops the other threads when this one ended early (a parse error); else they have ended.
  scanned.cancel();
  parsed.cancel();
  scanner.join();
  for (std::thread& t : parsers) t.join();
  // The batches were allocated on the pipeline's threads: give their memory back now, before the
  // model's classification and the writer's pages make the import's peak.
  while (spare.tryPop()) {
  }
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
  // The first error in file order: a parse error stops the scanner, which then reports "stopped".
  if (!parse_status.isOk()) return parse_status;
  return scan_status;
}

// Kineto's top-level members: rank and world size, the time base, the rest as the run's metadata.
void applyKinetoMetadata(const std::string& json, TraceModel& model) {
  const nlohmann::json meta = nlohmann::json::parse(json, nullptr, false);
  if (!meta.is_object()) return;
  nlohmann::json kept = meta;
  kept.erase("traceEvents");
  if (auto d = meta.find("distributedInfo"); d != meta.end() && d->is_object()) {
    const int64_t rank = d->value("rank", int64_t{-1});
    const int64_t world = d->value("world_size", int64_t{-1});
    model.setRank(rank, world);
  }
  if (auto b = meta.find("baseTimeNanoseconds"); b != meta.end() && b->is_number_integer()) {
    model.setTimeBase(b->get<int64_t>());
  }
  model.setMetadata(jsonText(nlohmann::json{{"source", kept}}));
}

// torch_npu's kernel_details.csv: the op type, accelerator core and input shapes of the device
// tasks of trace_view.json, matched by name and start time (TraceModel::addTaskDetail).
Status readKernelDetails(const std::string& file, TraceModel& model) {
  ASSIGN_OR_RETURN(std::string text, readText(file));
  CsvReader csv(std::move(text));
  int64_t line = 0;
  auto header = csv.next(&line);
  if (!header) return Status::ok();
  ASSIGN_OR_RETURN(auto col, csvColumns(file, *header, {"Name", "Type", "Start Time(us)"}));
  auto optional = [&](const char* name) { return col.count(name) ? col[name] : SIZE_MAX; };
  const size_t c_name = col["Name"], c_type = col["Type"], c_start = col["Start Time(us)"],
               c_core = optional("Accelerator Core"), c_shapes = optional("Input Shapes");
  const std::string what = baseName(file);
  while (auto row = csv.next(&line)) {
    auto field = [&](size_t c) -> const std::string& {
      static const std::string kNone;
      return c < row->size() ? (*row)[c] : kNone;
    };
    if (row->size() <= std::max({c_name, c_type, c_start})) {
      return invalidArgument(file + ": line " + std::to_string(line) + ": " + std::to_string(row->size()) +
                             " fields (expected " + std::to_string(header->size()) + ")");
    }
    auto start = microsToNs(field(c_start));
    if (!start) {
      return invalidArgument(file + ": line " + std::to_string(line) + ": bad Start Time(us) '" + field(c_start) + "'");
    }
    TaskDetail d;
    d.name = field(c_name);
    d.start_ns = *start;
    d.op_type = field(c_type);
    d.core_type = field(c_core);
    d.shapes = field(c_shapes);
    model.addTaskDetail(d, what);
  }
  return Status::ok();
}

// A folder without the timeline: its kernel_details.csv and communication.json (ascend_csv.h).
Status readKernelTasks(const std::string& file, const std::string& communication, TraceModel& model) {
  ASSIGN_OR_RETURN(std::string text, readText(file));
  std::map<std::string, CollectiveInfo> collectives;
  if (isFile(communication)) {
    auto json = readText(communication);
    if (json.isOk()) collectives = parseCommunication(*json);
  }
  return addKernelTasks(file, std::move(text), collectives, model);
}

// The job's size when the run's metadata gives it: {"distributed_args": {"world_size": N}} (what
// Megatron-style jobs add with torch_npu's add_metadata), -1 otherwise.
int64_t worldSizeOf(const nlohmann::json& metadata) {
  if (!metadata.is_object()) return -1;
  auto d = metadata.find("distributed_args");
  if (d == metadata.end() || !d->is_object()) return -1;
  auto w = d->find("world_size");
  return w != d->end() && w->is_number_integer() ? w->get<int64_t>() : -1;
}

// The rank in ascend_pytorch_profiler_{rank}.db, -1 when the name has none.
int64_t rankInDbName(const std::string& file) {
  const std::string n = baseName(file);
  const size_t us = n.rfind('_'), dot = n.rfind(".db");
  if (us == std::string::npos || dot == std::string::npos || dot <= us + 1) return -1;
  const std::string digits = n.substr(us + 1, dot - us - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return -1;
  return std::stoll(digits);
}

// The database export: the events, and rank / device / metadata for the run row. `meta` has
// what the folder around it said (profiler_info, profiler_metadata), when it is in one.
Status readAscendDb(const std::string& file, TraceModel& model, nlohmann::json meta,
                    const JsonEventStream::ProgressFn& progress) {
  TorchNpuDbRun run;
  RETURN_IF_ERROR(readTorchNpuDb(file, model, &run, progress));
  nlohmann::json tables = nlohmann::json::parse(run.metadata, nullptr, false);
  if (tables.is_object()) meta.update(tables);
  int64_t rank = run.rank >= 0 ? run.rank : model.rank();
  if (rank < 0) rank = rankInDbName(file);
  int64_t world = -1;
  if (auto m = meta.find("META_DATA"); m != meta.end()) world = worldSizeOf(*m);
  if (auto m = meta.find("profiler_metadata"); world < 0 && m != meta.end()) world = worldSizeOf(*m);
  model.setRank(rank, world);
  model.setDefaultDevice(std::max(0, run.device));
  model.setMetadata(jsonText(nlohmann::json{{"source", meta}}));
  return Status::ok();
}

Status readAscend(const std::string& path, TraceModel& model, JsonEventStream& stream,
                  const JsonEventStream::ProgressFn& progress) {
  const AscendFolder f = *ascendFolder(path);
  nlohmann::json meta = nlohmann::json::object();
  for (const std::string& n : listDir(f.root)) {
    if (n.rfind("profiler_info", 0) == 0 && endsWith(n, ".json")) {
      ASSIGN_OR_RETURN(std::string text, readText(join(f.root, n)));
      nlohmann::json info = nlohmann::json::parse(text, nullptr, false);
      if (info.is_discarded()) return invalidArgument(join(f.root, n) + ": malformed JSON");
      meta["profiler_info"] = info;
      // rank_id: a number, or (newer torch_npu) its digits as a string.
      if (info.is_object() && info.contains("rank_id") && info["rank_id"].is_number_integer()) {
        model.setRank(info["rank_id"].get<int64_t>(), -1);
      } else if (info.is_object() && info.contains("rank_id") && info["rank_id"].is_string()) {
        const std::string r = info["rank_id"].get<std::string>();
        if (!r.empty() && r.size() <= 9 && r.find_first_not_of("0123456789") == std::string::npos) {
          model.setRank(std::stoll(r), -1);
        }
      }
    } else if (n == "profiler_metadata.json") {
      ASSIGN_OR_RETURN(std::string text, readText(join(f.root, n)));
      nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
      if (!m.is_discarded()) meta["profiler_metadata"] = m;
    }
  }
  // The database export holds everything the text export's files do: read it when it is there.
  const std::string db = torchNpuDbIn(f.output);
  if (!db.empty()) return readAscendDb(db, model, meta, progress);
  if (auto m = meta.find("profiler_metadata"); m != meta.end() && worldSizeOf(*m) > 0) {
    model.setRank(model.rank(), worldSizeOf(*m));
  }
  int32_t device = 0;
  const std::string memory = join(f.output, "memory_record.csv");
  if (isFile(memory)) {
    ASSIGN_OR_RETURN(std::string text, readText(memory));
    RETURN_IF_ERROR(addMemoryRecord(memory, std::move(text), model, &device));
  }
  const std::string op_memory = join(f.output, "operator_memory.csv");
  if (isFile(op_memory)) {
    ASSIGN_OR_RETURN(std::string text, readText(op_memory));
    RETURN_IF_ERROR(addOperatorMemory(op_memory, std::move(text), model));
  }
  const std::string module_memory = join(f.output, "npu_module_mem.csv");
  if (isFile(module_memory)) {
    ASSIGN_OR_RETURN(std::string text, readText(module_memory));
    RETURN_IF_ERROR(addModuleMemory(module_memory, std::move(text), model));
  }
  model.setDefaultDevice(device);
  const std::string trace = join(f.output, "trace_view.json");
  const std::string kernels = join(f.output, "kernel_details.csv");
  // What the run came from, and what the folder lacks.
  nlohmann::json files = nlohmann::json::array(), missing = nlohmann::json::array();
  for (const char* n : {"trace_view.json", "kernel_details.csv", "step_trace_time.csv", "memory_record.csv",
                        "operator_memory.csv", "npu_module_mem.csv", "communication.json", "communication_matrix.json"}) {
    (isFile(join(f.output, n)) ? files : missing).push_back(n);
  }
  meta["files"] = files;
  // torch_npu's own step breakdown, kept with the run: what the cluster report shows for a rank
  // whose folder has no kernels to recompute it from.
  const std::string step_trace = join(f.output, "step_trace_time.csv");
  if (isFile(step_trace)) {
    ASSIGN_OR_RETURN(std::string text, readText(step_trace));
    ASSIGN_OR_RETURN(nlohmann::json rows, parseStepTraceTime(step_trace, std::move(text)));
    meta["step_trace_time"] = std::move(rows);
  }
  if (!isFile(trace)) {
    const std::string communication = join(f.output, "communication.json");
    meta["missing"] = missing;
    model.setMetadata(jsonText(nlohmann::json{{"source", meta}}));
    if (isFile(kernels)) return readKernelTasks(kernels, communication, model);
    if (!isFile(step_trace) && !isFile(communication)) {
      return invalidArgument(f.output + ": no trace_view.json, ascend_pytorch_profiler_*.db, kernel_details.csv, "
                             "step_trace_time.csv or communication.json (no parsed profile in it)");
    }
    std::string json = "{}";
    if (isFile(communication)) {
      auto text = readText(communication);
      if (!text.isOk()) return text.status();
      json = std::move(*text);
    }
    addCommunicationTasks(json, meta.contains("step_trace_time") ? meta["step_trace_time"] : nlohmann::json(), model);
    return Status::ok();
  }
  if (isFile(kernels)) RETURN_IF_ERROR(readKernelDetails(kernels, model));
  model.setMetadata(jsonText(nlohmann::json{{"source", meta}}));
  return readChrome(trace, model, stream, progress);
}

}  // namespace

int64_t CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int64_t>(i);
  }
  return -1;
}

StatusOr<CsvTable> kernelDetailsTable(const std::string& path) {
  CsvTable t;
  if (isFile(path)) {
    t.path = path;
  } else if (auto f = ascendFolder(path)) {
    t.path = join(f->output, "kernel_details.csv");
    if (!isFile(t.path)) return notFound(f->output + ": no kernel_details.csv");
  } else {
    return notFound(path + ": no such file, or not a torch_npu *_ascend_pt folder");
  }
  ASSIGN_OR_RETURN(std::string text, readText(t.path));
  CsvReader csv(std::move(text));
  auto header = csv.next();
  if (!header) return invalidArgument(t.path + ": empty (expected torch_npu's kernel_details.csv header)");
  t.header = std::move(*header);
  while (auto row = csv.next()) t.rows.push_back(std::move(*row));
  return t;
}

StatusOr<std::string> detectFormat(const std::string& path) {
  if (!msprobeFolders(path).empty()) return std::string("msprobe");
  if (!ascendFolder(path) && !aclDumpFiles(path).empty()) return std::string("acl_dump");
  ASSIGN_OR_RETURN(std::vector<RankSource> ranks, sourcesOf(path));
  if (isDir(path) && !ascendFolder(path)) return std::string("cluster");
  return ranks.front().format == "kineto" ? std::string("kineto") : std::string("torch_npu");
}

namespace {

// An msprobe dump: one run per rank, its steps' entries and tensors in order (the files are
// read whole; a statistics dump is ~1 KB per call).
StatusOr<Summary> importMsprobe(const std::vector<MsprobeFolder>& folders, const std::string& db,
                                const Options& options) {
  int64_t total = 0, done = 0;
  for (const MsprobeFolder& f : folders) total += fileSize(join(f.path, "dump.json"));
  std::set<int64_t> ranks;
  for (const MsprobeFolder& f : folders) ranks.insert(f.rank);
  Summary summary;
  std::unique_ptr<TraceWriter> writer;
  for (size_t i = 0; i < folders.size();) {
    // Every step of this rank, read before its run is written.
    const int64_t rank = folders[i].rank;
    std::vector<MsprobeDump> steps;
    std::string task, level, framework;
    const size_t first = i;
    for (; i < folders.size() && folders[i].rank == rank; ++i) {
      const MsprobeFolder& f = folders[i];
      MsprobeDump d;
      ASSIGN_OR_RETURN(std::string text, readText(join(f.path, "dump.json")));
      RETURN_IF_ERROR(parseMsprobeDump(text, join(f.path, "dump.json"), f.step, &d));
      for (const char* extra : {"stack.json", "construct.json"}) {
        const std::string p = join(f.path, extra);
        if (!isFile(p)) continue;
        ASSIGN_OR_RETURN(std::string t, readText(p));
        RETURN_IF_ERROR(extra[0] == 's' ? applyMsprobeStacks(t, p, &d) : applyMsprobeConstruct(t, p, &d));
      }
      done += fileSize(join(f.path, "dump.json"));
      if (options.progress && !options.progress(done, total)) return failedPrecondition(f.path + ": import cancelled");
      if (task.empty()) task = d.task, level = d.level, framework = d.framework;
      steps.push_back(std::move(d));
    }
    if (!writer) {
      ASSIGN_OR_RETURN(writer, openImportWriter(db));
    }
    RunInfo info;
    info.command = "import";
    info.source = "msprobe";
    info.source_path = folders[first].path;
    if (ranks.size() > 1 || rank >= 0) {
      info.rank = std::max<int64_t>(rank, 0);
      info.world_size = static_cast<int64_t>(ranks.size());
    }
    info.model = framework;
    info.config_json = jsonText(nlohmann::json{{"source", {{"format", "msprobe"}, {"task", task}, {"level", level},
                                                           {"framework", framework}}}});
    RunSummary run;
    run.source = "msprobe";
    run.path = folders[first].path;
    run.rank = info.rank;
    ASSIGN_OR_RETURN(run.run_id, writer->beginRun(info));
    int64_t skipped = 0;
    for (MsprobeDump& d : steps) {
      run.dump_entries += static_cast<int64_t>(d.entries.size());
      run.dump_tensors += static_cast<int64_t>(d.tensors.size());
      run.steps += 1;
      skipped += d.skipped_values;
      writer->addDumpEntries(std::move(d.entries));
      writer->addTensorDumps(std::move(d.tensors));
    }
    if (skipped > 0) {
      run.notes.push_back(std::to_string(skipped) + " arguments without a tensor or number (None, slices, strings) not kept");
    }
    RETURN_IF_ERROR(writer->endRun("completed", "", 0));
    summary.runs.push_back(std::move(run));
  }
  if (!writer) return invalidArgument("no msprobe dump folder");
  return finishImport(*writer, std::move(summary));
}

}  // namespace

StatusOr<Summary> importPath(const std::string& path, const std::string& db, const Options& options) {
  if (const std::vector<MsprobeFolder> folders = msprobeFolders(path); !folders.empty()) {
    return importMsprobe(folders, db, options);
  }
  if (!ascendFolder(path)) {
    if (const std::vector<AclDumpFile> files = aclDumpFiles(path); !files.empty()) {
      return importAclDump(path, files, db, options);
    }
  }
  ASSIGN_OR_RETURN(std::vector<RankSource> ranks, sourcesOf(path));
  const bool cluster = isDir(path) && !ascendFolder(path);
  int64_t total = 0, done_before = 0;
  for (const RankSource& r : ranks) total += fileSize(mainFileOf(r));
  // Rank by rank: read it whole, then write it as one run; a rank that fails to read leaves
  // no run behind (and the file is not created when the first one fails).
  StringTable strings;  // this import's names (every rank's: they share one writer, which it outlives)
  std::unique_ptr<TraceWriter> writer;
  Summary summary;
  tracePhase("start");
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankSource& r = ranks[i];
    TraceModel model(r.format == "kineto" ? "kineto" : "torch_npu", r.path, strings);
    JsonEventStream stream;
    int64_t this_file = 0;
    JsonEventStream::ProgressFn progress = [&](int64_t done, int64_t) {
      this_file = done;
      return !options.progress || options.progress(done_before + done, total);
    };
    if (r.format == "kineto") {
      RETURN_IF_ERROR(readChrome(r.path, model, stream, progress));
      applyKinetoMetadata(stream.metadata(), model);
    } else if (r.format == "torch_npu_db") {
      RETURN_IF_ERROR(readAscendDb(r.path, model, nlohmann::json::object(), progress));
    } else {
      RETURN_IF_ERROR(readAscend(r.path, model, stream, progress));
    }
    done_before += this_file;
    tracePhase("read");
    if (cluster) model.setRank(model.rank() < 0 ? static_cast<int64_t>(i) : model.rank(), static_cast<int64_t>(ranks.size()));
    RETURN_IF_ERROR(model.classify());
    if (!writer) {
      ASSIGN_OR_RETURN(writer, openImportWriter(db, &strings));
    }
    RunSummary run;
    run.events = stream.events();
    const Status s = model.write(*writer, &run);
    if (!s.isOk()) {
      if (run.run_id >= 0) (void)writer->endRun("failed", jsonText(nlohmann::json{{"error", s.message()}}));
      const Status closed = writer->close();  // what was committed may stay in the WAL: say so
      return closed.isOk() ? s : Status(s.code(), s.message() + "; " + closed.message());
    }
    summary.runs.push_back(std::move(run));
  }
  return finishImport(*writer, std::move(summary));
}

}  // namespace npuscope::import
