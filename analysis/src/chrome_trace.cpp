#include "npuscope/analysis/chrome_trace.h"
#include "npuscope/analysis/ascend_kernels.h"
#include "npuscope/analysis/op_table_csv.h"  // appendMicros
#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/store/saturating.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <set>
#include <unordered_set>

namespace npuscope {
namespace {

constexpr int kHostPid = 1;
constexpr int kDevicePidBase = 1000;
constexpr int kDeviceTidBase = 100000;
constexpr int kCommTidOffset = 50000;  // an npu's predicted communication stream: its tid + this
constexpr int kPredictedHostTid = kDeviceTidBase - 1;  // the host process's "host (predicted)" thread
// torch_npu's trace_view.json: the compute stream's number, an npu's HCCL process (pid + this).
constexpr int kAscendComputeStream = 2;
constexpr int kAscendHcclPidOffset = 500;

// ---------------------------------------------------------------------------------------------
// JSON text

void appendHex4(std::string& out, unsigned v) {
  static const char kHex[] = "0123456789abcdef";
  out += "\\u00";
  out += kHex[(v >> 4) & 0xf];
  out += kHex[v & 0xf];
}

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3;
  else if (c >= 0xf0 && c <= 0xf4) n = 4;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

// A JSON string literal; invalid UTF-8 becomes U+FFFD so strict parsers accept every file.
void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else appendHex4(out, c);
      ++i;
    } else {
      const size_t n = utf8Length(s, i);
      if (n == 0) {
        out += "\xef\xbf\xbd";
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
    }
  }
  out += '"';
}

void appendInt(std::string& out, int64_t v) {
  char buf[24];
  const int n = std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  out.append(buf, static_cast<size_t>(n));
}

// A finite double as a JSON number, anything else as a string ("nan", "inf").
void appendDouble(std::string& out, double v) {
  char buf[40];
  if (!std::isfinite(v)) {
    out += std::isnan(v) ? "\"nan\"" : (v > 0 ? "\"inf\"" : "\"-inf\"");
    return;
  }
  const int n = std::snprintf(buf, sizeof(buf), "%.17g", v);
  out.append(buf, static_cast<size_t>(n));
}

// The profiler writes input shapes as PyTorch prints them ("[[2, 3], [], [[1], [2]]]"): valid
// JSON arrays of integers, embedded as such for "Input Dims". Anything else goes in as a string.
class ShapeSyntax {
 public:
  static bool isJsonIntArray(std::string_view s) {
    ShapeSyntax p(s);
    p.ws();
    if (!p.array(0)) return false;
    p.ws();
    return p.i_ == s.size();
  }

 private:
  explicit ShapeSyntax(std::string_view s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  bool number() {
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') return false;
    if (s_[i_] == '0' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9') return false;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return true;
  }
  bool array(int depth) {
    if (depth > 32 || i_ >= s_.size() || s_[i_] != '[') return false;
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      ws();
      if (i_ < s_.size() && s_[i_] == '[') {
        if (!array(depth + 1)) return false;
      } else if (!number()) {
        return false;
      }
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ']') {
        ++i_;
        return true;
      }
      if (s_[i_] != ',') return false;
      ++i_;
    }
  }
  std::string_view s_;
  size_t i_ = 0;
};

// JSON renderings of the file's interned strings, made once per string. Keys are the addresses
// of the reader's cached strings, which are stable and unique per string id.
class JsonStringCache {
 public:
  const std::string& name(std::string_view s) {
    auto [it, fresh] = names_.try_emplace(s.data());
    if (fresh) appendJsonString(it->second, s);
    return it->second;
  }
  const std::string& dims(std::string_view s) {
    auto [it, fresh] = dims_.try_emplace(s.data());
    if (fresh) {
      if (ShapeSyntax::isJsonIntArray(s)) it->second.assign(s.data(), s.size());
      else appendJsonString(it->second, s);
    }
    return it->second;
  }
  // torch_npu's strings: "[[32, 3], []]" -> "32,3;\r\n" and "float, Scalar, " -> "float;\r\nScalar;\r\n".
  const std::string& npuDims(std::string_view s) {
    auto [it, fresh] = npu_dims_.try_emplace(s.data());
    if (fresh) {
      std::string list;
      if (ShapeSyntax::isJsonIntArray(s)) {
        int depth = 0;
        for (char c : s) {
          if (c == '[') {
            ++depth;
          } else if (c == ']') {
            --depth;
          } else if (c == ',' && depth == 1) {
            list += ";\r\n";
          } else if (c != ' ' && depth >= 2) {
            list += c;
          }
        }
      } else {
        list.assign(s.data(), s.size());
      }
      appendJsonString(it->second, list);
    }
    return it->second;
  }
  const std::string& npuTypes(std::string_view s) {
    auto [it, fresh] = npu_types_.try_emplace(s.data());
    if (fresh) {
      std::string list;
      size_t begin = 0;
      for (bool first = true;; first = false) {
        const size_t comma = s.find(',', begin);
        std::string_view item = s.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        if (!first) list += ";\r\n";
        list += item;
        if (comma == std::string_view::npos) break;
        begin = comma + 1;
      }
      appendJsonString(it->second, list);
    }
    return it->second;
  }
  // "float, Scalar, " -> ["float","Scalar",""]
  const std::string& types(std::string_view s) {
    auto [it, fresh] = types_.try_emplace(s.data());
    if (fresh) {
      std::string& out = it->second;
      out += '[';
      size_t begin = 0;
      for (bool first = true;; first = false) {
        const size_t comma = s.find(',', begin);
        std::string_view item = s.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!first) out += ',';
        appendJsonString(out, item);
        if (comma == std::string_view::npos) break;
        begin = comma + 1;
      }
      out += ']';
    }
    return it->second;
  }

 private:
  std::unordered_map<const char*, std::string> names_, dims_, types_, npu_dims_, npu_types_;
};

// ---------------------------------------------------------------------------------------------
// Output files

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// One part file: header, events separated by ",\n", footer. Counts bytes exactly.
class PartFile {
 public:
  Status open(const std::string& path, const std::string& header) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return ioError(path + ": cannot write (" + std::strerror(errno) + ")");
    file_.reset(f);
    std::setvbuf(file_.get(), nullptr, _IOFBF, 1 << 20);
    path_ = path;
    bytes_ = 0;
    events_ = 0;
    return write(header);
  }
  // Bytes the next event of `n` bytes adds (with its separator).
  uint64_t cost(size_t n) const { return n + (events_ > 0 ? 2 : 0); }
  Status event(const std::string& text) {
    if (events_ > 0) RETURN_IF_ERROR(write(",\n"));
    ++events_;
    return write(text);
  }
  Status close(const std::string& footer) {
    RETURN_IF_ERROR(write(footer));
    FILE* f = file_.release();
    if (std::fclose(f) != 0) return ioError(path_ + ": write failed (" + std::strerror(errno) + ")");
    return Status::ok();
  }
  uint64_t bytes() const { return bytes_; }
  int64_t events() const { return events_; }
  bool isOpen() const { return file_ != nullptr; }

 private:
  Status write(const std::string& s) {
    if (!s.empty() && std::fwrite(s.data(), 1, s.size(), file_.get()) != s.size()) {
      return ioError(path_ + ": write failed (" + std::strerror(errno) + ")");
    }
    bytes_ += s.size();
    return Status::ok();
  }
  FilePtr file_;
  std::string path_;
  uint64_t bytes_ = 0;
  int64_t events_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Host tracks: the ops of one thread (and, on the main thread, the step slices) in the order a
// nesting-aware viewer needs: by start, and at equal starts outer before inner.

struct HostItem {
  bool is_step = false;
  OpSlice op;
  const StepRow* step = nullptr;
  int64_t start = 0;
  int64_t dur = 0;
};

class HostTrack {
 public:
  HostTrack(ThreadSummary info, int64_t tid, OpCursor cursor) : info_(info), tid_(tid), cursor_(std::move(cursor)) {}

  void addSteps(std::vector<const StepRow*> steps) { steps_ = std::move(steps); }
  const ThreadSummary& info() const { return info_; }
  int64_t tid() const { return tid_; }

  // The next item, or nullptr at the end of the track.
  const HostItem* peek() {
    if (pos_ < group_.size()) return &group_[pos_];
    refill();
    return pos_ < group_.size() ? &group_[pos_] : nullptr;
  }
  void pop() { ++pos_; }
  const Status& status() const { return cursor_.status(); }
  // The ascend flavor leaves out the emulator's work inside a kernel: ops starting before this.
  int64_t opaque_end = std::numeric_limits<int64_t>::min();

  // Nesting: shortens a slice that sticks out of the slice enclosing it. Returns the end.
  int64_t nest(int64_t start, int64_t end, int64_t* clamped) {
    while (!ends_.empty() && ends_.back() <= start) ends_.pop_back();
    if (!ends_.empty() && end > ends_.back()) {
      end = ends_.back();
      ++*clamped;
    }
    ends_.push_back(end);
    return end;
  }

 private:
  void refill() {
    group_.clear();
    pos_ = 0;
    if (!has_next_ && !done_) {
      has_next_ = cursor_.next(&next_);
      done_ = !has_next_;
    }
    int64_t t = std::numeric_limits<int64_t>::max();
    bool any = false;
    if (has_next_) t = next_.start_ns, any = true;
    if (step_pos_ < steps_.size()) t = std::min(t, steps_[step_pos_]->start_ns), any = true;
    if (!any) return;
    while (has_next_ && next_.start_ns == t) {
      HostItem it;
      it.op = next_;
      it.start = next_.start_ns;
      it.dur = std::max<int64_t>(0, next_.dur_ns);
      group_.push_back(it);
      has_next_ = cursor_.next(&next_);
      done_ = !has_next_;
    }
    while (step_pos_ < steps_.size() && steps_[step_pos_]->start_ns == t) {
      HostItem it;
      it.is_step = true;
      it.step = steps_[step_pos_];
      it.start = it.step->start_ns;
      it.dur = std::max<int64_t>(0, it.step->dur_ns);
      group_.push_back(it);
      ++step_pos_;
    }
    if (group_.size() > 1) {
      std::sort(group_.begin(), group_.end(), [](const HostItem& a, const HostItem& b) {
        if (a.dur != b.dur) return a.dur > b.dur;
        if (a.is_step != b.is_step) return a.is_step;
        if (a.op.depth != b.op.depth) return a.op.depth < b.op.depth;
        return a.op.id < b.op.id;
      });
    }
  }

  ThreadSummary info_;
  int64_t tid_;
  OpCursor cursor_;
  OpSlice next_;
  bool has_next_ = false, done_ = false;
  std::vector<const StepRow*> steps_;
  size_t step_pos_ = 0;
  std::vector<HostItem> group_;
  size_t pos_ = 0;
  std::vector<int64_t> ends_;
};

// A predicted device task waiting for the end of its part file (device events are written per
// file, sorted by device start, after the host events).
struct DeviceTask {
  int32_t device;
  int64_t start, dur;
  std::string text;  // rendered with the unclamped times
  int64_t op_id;
  std::string_view name;
  int64_t host_tid;
  bool comm = false;  // on the npu's communication stream (a collective)
  int64_t host_start = 0;  // the launching op's start (the ascend flavor's launch flow)
};

class ChromeTraceExporter {
 public:
  ChromeTraceExporter(TraceReader& reader, std::string out_path, const ChromeTraceOptions& options)
      : reader_(reader), out_path_(std::move(out_path)), options_(options) {}

  StatusOr<ChromeTraceSummary> run();

 private:
  Status setUp();
  Status openPart();
  Status closePart();
  // Writes `text` (preceded by `prefix`, metadata that must share its file) in the current
  // part, starting a new part first when it would not fit.
  Status emit(const std::string& text);
  bool fits(uint64_t extra) const;
  // Starts a new part unless `bytes` more fit in this one (or it holds no event yet).
  Status makeRoom(uint64_t bytes, bool* new_part);
  Status emitHost(HostTrack& track, const HostItem& item);
  Status emitMemory(const MemorySample& m);
  Status emitStepCounters(const StepRow& s);
  // Real device tasks (imported runs), read page by page in start order.
  bool nextRealTask();
  Status emitRealTask(const DeviceTaskRow& t);
  Status bufferDeviceTask(DeviceTask t);
  Status emitPredictedStep(const StepRow& st, int64_t host_tid);
  Status flushDeviceTasks();
  std::string deviceMetadata(int32_t device);
  void renderDeviceTask(DeviceTask& t) const;
  std::string metadataEvent(const char* name, int pid, int64_t tid, const std::string& arg_key,
                            const std::string& arg_json) const;
  bool ascend() const { return options_.ascend_trace_view; }
  // `"ts":` of a recorded time: µs from the base, or (ascend flavor) a string of Unix µs.
  void appendTs(std::string& s, int64_t t_ns) const;
  // pid, tid, ts and dur of a complete event at recorded time `t_ns`.
  void place(std::string& s, int64_t pid, int64_t tid, int64_t t_ns, int64_t dur_ns) const;

  TraceReader& reader_;
  std::string out_path_;
  ChromeTraceOptions options_;
  ChromeTraceSummary summary_;
  RunRow run_;
  int64_t base_ = 0;
  std::vector<StepRow> steps_;
  std::vector<std::unique_ptr<HostTrack>> tracks_;
  std::string host_metadata_;  // the metadata events every part starts with
  std::string footer_;
  PartFile part_;
  size_t part_index_ = 0;
  bool predicted_ = false;       // an npu run: the predicted host and device lanes are written
  PredictedStepPlacer placer_;
  std::vector<DeviceTask> device_tasks_;
  uint64_t device_bytes_ = 0;          // upper bound of what device_tasks_ will write
  // Devices whose metadata is in the current part, or budgeted to be written with its device tasks.
  std::unordered_set<int32_t> announced_devices_, pending_device_metadata_;
  std::unordered_map<int64_t, int64_t> forward_thread_;  // sequence number -> tid of the forward op
  std::unordered_map<int64_t, int64_t> tid_of_;  // recorded thread id -> its track's tid
  std::vector<DeviceTaskRow> real_tasks_;  // the page being written
  size_t real_pos_ = 0;
  bool real_done_ = true;
  Status real_status_;
  std::set<std::pair<int32_t, int32_t>> announced_streams_;  // (device, stream) named in this part
  JsonStringCache strings_;
  std::string scratch_;
};

void ChromeTraceExporter::appendTs(std::string& s, int64_t t_ns) const {
  s += "\"ts\":";
  if (!ascend()) return appendMicros(s, t_ns - base_);
  s += '"';
  appendMicros(s, run_.wall_start_ns + (t_ns - run_.started_ns));
  s += '"';
}

void ChromeTraceExporter::place(std::string& s, int64_t pid, int64_t tid, int64_t t_ns, int64_t dur_ns) const {
  appendInt(s, pid);
  s += ",\"tid\":";
  appendInt(s, tid);
  s += ',';
  appendTs(s, t_ns);
  s += ",\"dur\":";
  appendMicros(s, dur_ns);
}

std::string ChromeTraceExporter::metadataEvent(const char* name, int pid, int64_t tid, const std::string& arg_key,
                                               const std::string& arg_json) const {
  std::string s = "{\"name\":\"";
  s += name;
  s += "\",\"ph\":\"M\",\"pid\":";
  appendInt(s, pid);
  s += ",\"tid\":";
  appendInt(s, tid);
  s += ",\"args\":{\"";
  s += arg_key;
  s += "\":";
  s += arg_json;
  s += "}}";
  return s;
}

Status ChromeTraceExporter::setUp() {
  if (options_.max_file_bytes == 0) return invalidArgument("max_file_bytes must be positive");
  if (options_.run_id < 0) {
    ASSIGN_OR_RETURN(run_, reader_.latestRun());
  } else {
    ASSIGN_OR_RETURN(run_, reader_.run(options_.run_id));
  }
  ASSIGN_OR_RETURN(base_, reader_.earliestTime(run_.id));
  summary_.base_ns = base_;
  ASSIGN_OR_RETURN(std::vector<StepRow> all_steps, reader_.steps(run_.id));
  for (StepRow& s : all_steps) {
    if (options_.window.contains(s.start_ns)) steps_.push_back(s);
  }
  ASSIGN_OR_RETURN(std::vector<ThreadSummary> threads, reader_.threads(run_.id));

  // Perfetto reads pid/tid as 32-bit: keep the recorded ids when they fit, else number threads.
  bool small_ids = true;
  for (const ThreadSummary& t : threads) small_ids &= t.thread_id >= 0 && t.thread_id < kDeviceTidBase;
  // The main thread holds the most forward ops; the step slices go there.
  size_t main = 0;
  for (size_t i = 1; i < threads.size(); ++i) {
    if (threads[i].op_count - threads[i].backward_op_count >
        threads[main].op_count - threads[main].backward_op_count) {
      main = i;
    }
  }
  for (size_t i = 0; i < threads.size(); ++i) {
    ASSIGN_OR_RETURN(OpCursor cursor, reader_.openOpCursor(run_.id, threads[i].thread_id, options_.window));
    const int64_t tid = small_ids ? threads[i].thread_id : static_cast<int64_t>(i + 1);
    tid_of_[threads[i].thread_id] = tid;
    tracks_.push_back(std::make_unique<HostTrack>(threads[i], tid, std::move(cursor)));
  }
  if (tracks_.empty() && !steps_.empty()) {
    // Steps without ops still get their track.
    ASSIGN_OR_RETURN(OpCursor cursor, reader_.openOpCursor(run_.id, -1, TimeWindow{0, 0}));
    ThreadSummary none;
    tracks_.push_back(std::make_unique<HostTrack>(none, 1, std::move(cursor)));
  }
  if (!tracks_.empty() && !run_.imported()) {  // an imported run's ProfilerStep ops are among its ops
    std::vector<const StepRow*> step_ptrs;
    for (const StepRow& s : steps_) step_ptrs.push_back(&s);
    tracks_[main]->addSteps(std::move(step_ptrs));
  }

  if (ascend()) {
    if (run_.imported()) {
      return invalidArgument("run " + std::to_string(run_.id) + " was imported (" + run_.source +
                             "): torch_npu's trace_view.json is written for recorded runs");
    }
    options_.max_file_bytes = std::numeric_limits<uint64_t>::max();  // one file, as torch_npu writes it
    options_.memory_counters = false;
    host_metadata_ = metadataEvent("process_name", kHostPid, 0, "name", "\"Python\"");
    host_metadata_ += ",\n" + metadataEvent("process_labels", kHostPid, 0, "labels", "\"CPU\"");
    host_metadata_ += ",\n" + metadataEvent("process_sort_index", kHostPid, 0, "sort_index", "0");
    for (size_t i = 0; i < tracks_.size(); ++i) {
      const std::string tid = std::to_string(tracks_[i]->tid());
      host_metadata_ += ",\n" + metadataEvent("thread_name", kHostPid, tracks_[i]->tid(), "name", "\"Thread " + tid + "\"");
      host_metadata_ += ",\n" + metadataEvent("thread_sort_index", kHostPid, tracks_[i]->tid(), "sort_index",
                                               std::to_string(i == main ? 0 : i + 1));
    }
    predicted_ = options_.device_stream && !tracks_.empty();
    real_done_ = true;
    return Status::ok();
  }
  std::string title = "npuscope run " + std::to_string(run_.id);
  if (!run_.model.empty()) title += " " + run_.model;
  if (!run_.opt_level.empty()) title += " " + run_.opt_level;
  std::string json;
  appendJsonString(json, title);
  host_metadata_ = metadataEvent("process_name", kHostPid, 0, "name", json);
  host_metadata_ += ",\n" + metadataEvent("process_sort_index", kHostPid, 0, "sort_index", "0");
  for (size_t i = 0; i < tracks_.size(); ++i) {
    const ThreadSummary& t = tracks_[i]->info();
    std::string name = "thread " + std::to_string(t.thread_id);
    if (i == main) name += " (main)";
    else if (t.backward_op_count * 2 > t.op_count) name += " (backward)";
    json.clear();
    appendJsonString(json, name);
    host_metadata_ += ",\n" + metadataEvent("thread_name", kHostPid, tracks_[i]->tid(), "name", json);
    host_metadata_ += ",\n" + metadataEvent("thread_sort_index", kHostPid, tracks_[i]->tid(), "sort_index",
                                             std::to_string(i == main ? 0 : i + 1));
  }
  predicted_ = options_.device_stream && !run_.imported() && !tracks_.empty();
  if (predicted_) {
    host_metadata_ += ",\n" + metadataEvent("thread_name", kHostPid, kPredictedHostTid, "name",
                                             "\"host (predicted, a real npu)\"");
    host_metadata_ += ",\n" + metadataEvent("thread_sort_index", kHostPid, kPredictedHostTid, "sort_index",
                                             std::to_string(tracks_.size() + 1));
  }
  ASSIGN_OR_RETURN(const int64_t tasks, reader_.deviceTaskCount(run_.id));
  real_done_ = tasks == 0;
  if (!real_done_) nextRealTask();
  return Status::ok();
}

// Pages of tasks in (start, id) order; the next page starts at the last start, past the last id.
bool ChromeTraceExporter::nextRealTask() {
  if (real_done_) return false;
  if (real_pos_ + 1 < real_tasks_.size()) {
    ++real_pos_;
    return true;
  }
  constexpr size_t kPage = 16384;
  TimeWindow w = options_.window;
  int64_t last_start = std::numeric_limits<int64_t>::min(), last_id = -1;
  if (!real_tasks_.empty()) last_start = real_tasks_.back().start_ns, last_id = real_tasks_.back().id;
  if (!real_tasks_.empty()) w.begin_ns = std::max(w.begin_ns, last_start);
  for (size_t limit = kPage;; limit *= 2) {
    auto page = reader_.deviceTasks(run_.id, w, limit);
    if (!page.isOk()) {
      real_status_ = page.status();
      real_done_ = true;
      return false;
    }
    std::vector<DeviceTaskRow> rows;
    for (DeviceTaskRow& t : *page) {
      if (t.start_ns == last_start && t.id <= last_id) continue;  // written with the previous page
      rows.push_back(std::move(t));
    }
    // A page of nothing but already-written ties at last_start: read a larger one.
    if (rows.empty() && page->size() == limit) continue;
    real_tasks_ = std::move(rows);
    real_pos_ = 0;
    real_done_ = real_tasks_.empty();
    return !real_done_;
  }
}

Status ChromeTraceExporter::emitRealTask(const DeviceTaskRow& t) {
  const bool kineto_cat = t.type == "kernel" || t.type == "gpu_memcpy" || t.type == "gpu_memset";
  std::string& s = scratch_;
  s.clear();
  s += "{\"ph\":\"X\",\"cat\":\"";
  s += kineto_cat ? t.type : std::string("kernel");
  s += "\",\"name\":";
  appendJsonString(s, t.name);
  s += ",\"pid\":";
  place(s, kDevicePidBase + t.device, t.stream, t.start_ns, t.dur_ns);
  s += ",\"args\":{\"device\":";
  appendInt(s, t.device);
  s += ",\"stream\":";
  appendInt(s, t.stream);
  s += ",\"Task Type\":";
  appendJsonString(s, t.type);
  if (t.op_id >= 0) s += ",\"External id\":", appendInt(s, t.op_id);
  if (t.correlation >= 0) s += ",\"correlation\":", appendInt(s, t.correlation);
  if (t.bytes >= 0) s += ",\"bytes\":", appendInt(s, t.bytes);
  if (!t.comm_group.empty()) s += ",\"group\":", appendJsonString(s, t.comm_group);
  if (t.step >= 0) s += ",\"Step\":", appendInt(s, t.step);
  s += "}}";
  // The device's process and the stream's thread are named in every part that uses them.
  std::string meta;
  if (!announced_devices_.count(t.device)) {
    const std::string d = (run_.source == "kineto" ? "gpu:" : "npu:") + std::to_string(t.device);
    meta += metadataEvent("process_name", kDevicePidBase + t.device, 0, "name", "\"" + d + "\"");
    meta += ",\n" + metadataEvent("process_sort_index", kDevicePidBase + t.device, 0, "sort_index",
                                  std::to_string(1 + t.device));
  }
  if (!announced_streams_.count({t.device, t.stream})) {
    std::string name = t.stream >= 1000 && !t.comm_group.empty() ? t.comm_group : "stream " + std::to_string(t.stream);
    std::string json;
    appendJsonString(json, name);
    if (!meta.empty()) meta += ",\n";
    meta += metadataEvent("thread_name", kDevicePidBase + t.device, t.stream, "name", json);
  }
  bool new_part;
  RETURN_IF_ERROR(makeRoom(part_.cost(s.size() + meta.size() + 2), &new_part));
  if (new_part) return emitRealTask(t);  // the new part names the device and stream again
  if (!meta.empty()) {
    RETURN_IF_ERROR(part_.event(meta));
    announced_devices_.insert(t.device);
    announced_streams_.insert({t.device, t.stream});
  }
  ++summary_.device_events;
  return part_.event(s);
}

std::string ChromeTraceExporter::deviceMetadata(int32_t device) {
  const std::string npu = "npu:" + std::to_string(device);
  const int pid = kDevicePidBase + device;
  if (ascend()) {
    const int hccl = pid + kAscendHcclPidOffset;
    std::string s = metadataEvent("process_name", pid, 0, "name", "\"Ascend Hardware\"");
    s += ",\n" + metadataEvent("process_labels", pid, 0, "labels", "\"NPU\"");
    s += ",\n" + metadataEvent("process_sort_index", pid, 0, "sort_index", std::to_string(13 + 10 * device));
    s += ",\n" + metadataEvent("thread_name", pid, kAscendComputeStream, "name",
                               "\"Stream " + std::to_string(kAscendComputeStream) + "\"");
    s += ",\n" + metadataEvent("thread_sort_index", pid, kAscendComputeStream, "sort_index",
                               std::to_string(kAscendComputeStream));
    s += ",\n" + metadataEvent("process_name", hccl, 0, "name", "\"HCCL\"");
    s += ",\n" + metadataEvent("process_labels", hccl, 0, "labels", "\"NPU\"");
    s += ",\n" + metadataEvent("process_sort_index", hccl, 0, "sort_index", std::to_string(15 + 10 * device));
    s += ",\n" + metadataEvent("thread_name", hccl, 0, "name", "\"Group 0 Communication\"");
    return s;
  }
  std::string s = metadataEvent("process_name", pid, 0, "name", "\"" + npu + "\"");
  s += ",\n" + metadataEvent("process_sort_index", pid, 0, "sort_index", std::to_string(1 + device));
  s += ",\n" + metadataEvent("thread_name", pid, kDeviceTidBase + device, "name", "\"" + npu + " stream (predicted)\"");
  s += ",\n" + metadataEvent("thread_name", pid, kDeviceTidBase + kCommTidOffset + device, "name",
                             "\"" + npu + " communication (predicted)\"");
  return s;
}

Status ChromeTraceExporter::openPart() {
  const std::string path = chromeTracePartPath(out_path_, part_index_);
  // Kineto's key: the Unix time (ns) of ts 0, so importers place the trace on the wall clock.
  footer_ = "\n],\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":" +
            std::to_string(run_.wall_start_ns + (base_ - run_.started_ns)) +
            ",\"otherData\":{\"generator\":\"npuscope\",\"run_id\":" +
            std::to_string(run_.id) + ",\"part\":" + std::to_string(part_index_) + ",\"base_ns\":" +
            std::to_string(base_) + "}}\n";
  if (ascend()) footer_ = "\n]\n";  // torch_npu's trace_view.json: the bare event array
  RETURN_IF_ERROR(part_.open(path, ascend() ? "[\n" : "{\"traceEvents\":[\n"));
  summary_.files.push_back(path);
  announced_devices_.clear();
  pending_device_metadata_.clear();
  announced_streams_.clear();
  return part_.event(host_metadata_);
}

Status ChromeTraceExporter::closePart() {
  RETURN_IF_ERROR(flushDeviceTasks());
  return part_.close(footer_);
}

bool ChromeTraceExporter::fits(uint64_t extra) const {
  return part_.bytes() + extra + device_bytes_ + footer_.size() <= options_.max_file_bytes;
}

Status ChromeTraceExporter::makeRoom(uint64_t bytes, bool* new_part) {
  *new_part = false;
  // A part holds at least one event besides its metadata, however large.
  if (part_.events() <= 1 || fits(bytes)) return Status::ok();
  RETURN_IF_ERROR(closePart());
  ++part_index_;
  *new_part = true;
  return openPart();
}

Status ChromeTraceExporter::emit(const std::string& text) {
  bool new_part;
  RETURN_IF_ERROR(makeRoom(part_.cost(text.size()), &new_part));
  return part_.event(text);
}

void ChromeTraceExporter::renderDeviceTask(DeviceTask& t) const {
  std::string& s = t.text;
  s.clear();
  if (ascend()) {
    // As torch_npu writes a task: on its stream (a collective on the HCCL group lane), no
    // category, the task's args; the launch flow from the op that launched it (the importer's
    // link, connection_id = the op's id).
    const AscendKernel k = ascendKernelFor(t.name);
    const int64_t pid = kDevicePidBase + t.device + (t.comm ? kAscendHcclPidOffset : 0);
    const int64_t tid = t.comm ? 0 : kAscendComputeStream;
    s += "{\"ph\":\"X\",\"name\":";
    appendJsonString(s, k.type);
    s += ",\"pid\":";
    place(s, pid, tid, t.start, t.dur);
    s += ",\"args\":{\"Model Id\":4294967295,\"Task Type\":\"";
    s += k.core;
    s += "\",\"Physic Stream Id\":";
    appendInt(s, t.comm ? 0 : kAscendComputeStream);
    s += ",\"Task Id\":";
    appendInt(s, t.op_id);
    s += ",\"Batch Id\":0,\"Subtask Id\":4294967295,\"connection_id\":";
    appendInt(s, t.op_id);
    s += "}}";
    // The launch flow: from the op on its host thread to the task.
    auto flow = [&](const char* ph, int64_t flow_pid, int64_t flow_tid, int64_t at) {
      s += ",\n{\"ph\":\"";
      s += ph;
      s += "\",\"bp\":\"e\",\"name\":\"HostToDevice";
      appendInt(s, t.op_id);
      s += "\",\"cat\":\"HostToDevice\",\"id\":\"";
      appendInt(s, t.op_id);
      s += "\",\"pid\":";
      appendInt(s, flow_pid);
      s += ",\"tid\":";
      appendInt(s, flow_tid);
      s += ',';
      appendTs(s, at);
      s += '}';
    };
    flow("s", kHostPid, t.host_tid, t.host_start);
    flow("f", pid, tid, t.start);
    return;
  }
  s += t.comm ? "{\"ph\":\"X\",\"cat\":\"communication\",\"name\":" : "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":";
  appendJsonString(s, t.name);
  s += ",\"pid\":";
  place(s, kDevicePidBase + t.device, kDeviceTidBase + (t.comm ? kCommTidOffset : 0) + t.device, t.start, t.dur);
  s += ",\"args\":{\"External id\":";
  appendInt(s, t.op_id);
  s += ",\"Host thread\":";
  appendInt(s, t.host_tid);
  s += "}}";
}

Status ChromeTraceExporter::bufferDeviceTask(DeviceTask t) {
  renderDeviceTask(t);
  const uint64_t task_bytes = t.text.size() + 2 + 8;  // separator, and slack for a clamped ts
  const uint64_t meta_bytes = deviceMetadata(t.device).size() + 2;
  bool new_part;
  RETURN_IF_ERROR(makeRoom(task_bytes + (announced_devices_.count(t.device) ? 0 : meta_bytes), &new_part));
  device_bytes_ += task_bytes;
  if (!announced_devices_.count(t.device)) {
    announced_devices_.insert(t.device);
    pending_device_metadata_.insert(t.device);
    device_bytes_ += meta_bytes;
  }
  device_tasks_.push_back(std::move(t));
  return Status::ok();
}

// The step's predicted timeline (analysis/predicted_timeline.h): its host ops on the host process's
// "host (predicted)" thread, its kernels on the npu's predicted stream. The step is placed at
// its recorded start, or after the previous predicted step if that one is still running.
Status ChromeTraceExporter::emitPredictedStep(const StepRow& st, int64_t host_tid) {
  ASSIGN_OR_RETURN(std::vector<OpSlice> ops, reader_.stepOps(run_.id, StepRange{st.step, st.step}));
  std::unordered_map<int64_t, const OpSlice*> recorded;
  std::vector<PredictedInput> in;
  in.reserve(ops.size());
  for (const OpSlice& op : ops) {
    in.push_back(predictedInput(op));
    recorded.emplace(op.id, &op);
  }
  std::vector<PredictedOp> out;
  const PredictedStep p = predictStep(st.step, std::move(in), hostModelParamsFor(run_), &out);
  if (p.kernels == 0) return Status::ok();
  const int64_t at = placer_.place(st.start_ns, p.step_ns);
  std::string& s = scratch_;
  for (const PredictedOp& o : out) {
    const OpSlice& op = *recorded[o.id];
    if (ascend()) {  // a real card's trace has the recorded host ops only, and the kernels
      if (o.device_start_ns < 0) continue;
      auto tid = tid_of_.find(op.thread_id);
      DeviceTask t{o.device, at + o.device_start_ns, o.device_dur_ns, {}, o.id, op.name,
                   tid == tid_of_.end() ? host_tid : tid->second, o.role == PredictedRole::kCollective};
      t.host_start = op.start_ns;
      RETURN_IF_ERROR(bufferDeviceTask(std::move(t)));
      continue;
    }
    s.clear();
    s += "{\"ph\":\"X\",\"cat\":\"predicted\",\"name\":";
    s += strings_.name(op.name);
    s += ",\"pid\":";
    place(s, kHostPid, kPredictedHostTid, at + o.host_start_ns, o.host_end_ns - o.host_start_ns);
    s += ",\"args\":{\"External id\":";
    appendInt(s, o.id);
    s += ",\"Step\":";
    appendInt(s, st.step);
    s += "}}";
    ++summary_.predicted_host_events;
    RETURN_IF_ERROR(emit(s));
    if (o.device_start_ns >= 0) {
      RETURN_IF_ERROR(bufferDeviceTask(DeviceTask{o.device, at + o.device_start_ns, o.device_dur_ns, {}, o.id, op.name,
                                                  host_tid, o.role == PredictedRole::kCollective}));
    }
  }
  if (options_.on_predicted_step) {
    PredictedStepView v;
    v.step = &st;
    v.placed_at_ns = at;
    v.prediction = &p;
    v.ops = &out;
    v.recorded = &ops;
    return options_.on_predicted_step(v);
  }
  return Status::ok();
}

// A stream runs one task at a time: in start order, a task that begins before the previous one
// ended is moved to its end (the cost model never does this; the clamp only guards nesting).
Status ChromeTraceExporter::flushDeviceTasks() {
  std::stable_sort(device_tasks_.begin(), device_tasks_.end(), [](const DeviceTask& a, const DeviceTask& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.comm != b.comm) return b.comm;
    if (a.start != b.start) return a.start < b.start;
    return a.dur > b.dur;
  });
  std::vector<int32_t> pending(pending_device_metadata_.begin(), pending_device_metadata_.end());
  std::sort(pending.begin(), pending.end());
  for (int32_t d : pending) RETURN_IF_ERROR(part_.event(deviceMetadata(d)));
  pending_device_metadata_.clear();
  int32_t device = -1;
  bool comm = false;
  int64_t last_end = std::numeric_limits<int64_t>::min();
  for (DeviceTask& t : device_tasks_) {
    if (t.device != device || t.comm != comm) {  // another stream
      device = t.device;
      comm = t.comm;
      last_end = std::numeric_limits<int64_t>::min();
    }
    if (t.start < last_end) {
      const int64_t end = std::max(saturatingAdd(t.start, t.dur), last_end);
      t.start = last_end;
      t.dur = saturatingSub(end, last_end);
      ++summary_.clamped_slices;
      renderDeviceTask(t);
    }
    last_end = saturatingAdd(t.start, t.dur);
    RETURN_IF_ERROR(part_.event(t.text));
    ++summary_.device_events;
  }
  device_tasks_.clear();
  device_bytes_ = 0;
  return Status::ok();
}

Status ChromeTraceExporter::emitHost(HostTrack& track, const HostItem& item) {
  const int64_t end = track.nest(item.start, saturatingAdd(item.start, item.dur), &summary_.clamped_slices);
  std::string& s = scratch_;
  s.clear();
  if (item.is_step) {
    const StepRow& st = *item.step;
    forward_thread_.clear();  // a step's backward ops follow its forward ops
    s += ascend() ? "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ProfilerStep#"
                  : "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#";
    appendInt(s, st.step);
    s += "\",\"pid\":";
    place(s, kHostPid, track.tid(), item.start, end - item.start);
    s += ",\"args\":{";
    if (ascend()) s += "\"Sequence number\":-1,\"Fwd thread id\":0,";
    s += "\"Step\":";
    appendInt(s, st.step);
    if (st.loss) s += ",\"Loss\":", appendDouble(s, *st.loss);
    if (st.loss_scale) s += ",\"Loss scale\":", appendDouble(s, *st.loss_scale);
    s += ",\"Overflow\":";
    s += st.overflow ? "1" : "0";
    s += ",\"Skipped\":";
    s += st.skipped ? "1" : "0";
    if (st.lr) s += ",\"LR\":", appendDouble(s, *st.lr);
    if (st.grad_norm) s += ",\"Grad norm\":", appendDouble(s, *st.grad_norm);
    s += "}}";
    ++summary_.step_events;
    RETURN_IF_ERROR(emit(s));
    return predicted_ ? emitPredictedStep(st, track.tid()) : Status::ok();
  }

  const OpSlice& op = item.op;
  if (ascend()) {
    if (item.start < track.opaque_end) return Status::ok();
    if (hidesInnerOps(op)) track.opaque_end = end;
  }
  s += "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":";
  s += strings_.name(op.name);
  s += ",\"pid\":";
  place(s, kHostPid, track.tid(), item.start, end - item.start);
  s += ",\"args\":{\"External id\":";
  appendInt(s, op.id);
  if (op.parent_id >= 0) s += ",\"Parent id\":", appendInt(s, op.parent_id);
  if (op.step >= 0) s += ",\"Step\":", appendInt(s, op.step);
  if (ascend()) {  // torch_npu writes both on every op
    s += ",\"Sequence number\":";
    appendInt(s, op.seq_nr);
    int64_t fwd = 0;
    if (op.is_backward && op.seq_nr >= 0) {
      auto it = forward_thread_.find(op.seq_nr);
      if (it != forward_thread_.end()) fwd = it->second;
    } else if (op.seq_nr >= 0) {
      if (forward_thread_.size() > (1u << 20)) forward_thread_.clear();
      forward_thread_[op.seq_nr] = track.tid();
    }
    s += ",\"Fwd thread id\":";
    appendInt(s, fwd);
    if (!op.input_shapes.empty()) s += ",\"Input Dims\":", s += strings_.npuDims(op.input_shapes);
    if (!op.input_dtypes.empty()) s += ",\"Input type\":", s += strings_.npuTypes(op.input_dtypes);
    s += "}}";
    ++summary_.op_events;
    return emit(s);
  }
  if (op.seq_nr >= 0) s += ",\"Sequence number\":", appendInt(s, op.seq_nr);
  if (op.is_backward) {
    s += ",\"Backward\":1";
    if (op.seq_nr >= 0) {
      auto it = forward_thread_.find(op.seq_nr);
      if (it != forward_thread_.end()) s += ",\"Fwd thread id\":", appendInt(s, it->second);
    }
  } else if (op.seq_nr >= 0) {
    if (forward_thread_.size() > (1u << 20)) forward_thread_.clear();  // bounded without steps
    forward_thread_[op.seq_nr] = track.tid();
  }
  if (!op.input_shapes.empty()) s += ",\"Input Dims\":", s += strings_.dims(op.input_shapes);
  if (!op.input_dtypes.empty()) s += ",\"Input type\":", s += strings_.types(op.input_dtypes);
  if (op.device >= 0) {
    s += ",\"Device\":\"npu:";
    appendInt(s, op.device);
    s += '"';
  }
  if (op.device_dur_ns >= 0) s += ",\"Device dur (modeled) us\":", appendMicros(s, op.device_dur_ns);
  s += "}}";
  ++summary_.op_events;
  RETURN_IF_ERROR(emit(s));
  return Status::ok();
}

Status ChromeTraceExporter::emitMemory(const MemorySample& m) {
  std::string& s = scratch_;
  s.clear();
  s += "{\"ph\":\"C\",\"name\":\"Memory npu:";
  appendInt(s, m.device);
  s += "\",\"pid\":";
  appendInt(s, kDevicePidBase + m.device);
  s += ',';
  appendTs(s, m.ts_ns);
  s += ",\"args\":{\"allocated\":";
  appendInt(s, m.allocated);
  s += ",\"reserved\":";
  appendInt(s, m.reserved);
  s += "}}";
  ++summary_.counter_events;
  // The device's process name must be in the same file as its counter.
  const std::string meta = deviceMetadata(m.device) + ",\n";
  bool new_part;
  RETURN_IF_ERROR(makeRoom(part_.cost(s.size() + (announced_devices_.count(m.device) ? 0 : meta.size())), &new_part));
  if (announced_devices_.count(m.device)) return part_.event(s);
  announced_devices_.insert(m.device);
  return part_.event(meta + s);
}

Status ChromeTraceExporter::emitStepCounters(const StepRow& st) {
  if (ascend()) return Status::ok();
  auto counter = [&](const char* name, const char* key, double v) -> Status {
    if (!std::isfinite(v)) return Status::ok();  // counters need numbers
    std::string& s = scratch_;
    s.clear();
    s += "{\"ph\":\"C\",\"name\":\"";
    s += name;
    s += "\",\"pid\":";
    appendInt(s, kHostPid);
    s += ',';
    appendTs(s, st.start_ns);
    s += ",\"args\":{\"";
    s += key;
    s += "\":";
    appendDouble(s, v);
    s += "}}";
    ++summary_.counter_events;
    return emit(s);
  };
  if (st.loss_scale) RETURN_IF_ERROR(counter("Loss scale", "loss_scale", *st.loss_scale));
  if (st.loss) RETURN_IF_ERROR(counter("Loss", "loss", *st.loss));
  return Status::ok();
}

StatusOr<ChromeTraceSummary> ChromeTraceExporter::run() {
  RETURN_IF_ERROR(reader_.beginSnapshot());
  struct EndSnapshot {
    TraceReader& r;
    ~EndSnapshot() { (void)r.endSnapshot(); }
  } end_snapshot{reader_};

  RETURN_IF_ERROR(setUp());
  RETURN_IF_ERROR(openPart());

  std::optional<MemoryCursor> memory;
  MemorySample mem{};
  bool has_mem = false;
  if (options_.memory_counters) {
    ASSIGN_OR_RETURN(MemoryCursor cur, reader_.openMemoryCursor(run_.id, options_.window));
    memory.emplace(std::move(cur));
    has_mem = memory->next(&mem);
  }
  size_t counter_pos = 0;

  // Merge every source by time, so that splitting by size splits by time.
  for (;;) {
    int64_t best = std::numeric_limits<int64_t>::max();
    int source = -1;  // track index, or -2 memory, -3 step counters
    for (size_t i = 0; i < tracks_.size(); ++i) {
      const HostItem* it = tracks_[i]->peek();
      if (it && it->start < best) best = it->start, source = static_cast<int>(i);
    }
    if (has_mem && mem.ts_ns < best) best = mem.ts_ns, source = -2;
    if (counter_pos < steps_.size() && steps_[counter_pos].start_ns < best) {
      best = steps_[counter_pos].start_ns, source = -3;
    }
    if (!real_done_ && real_tasks_[real_pos_].start_ns < best) best = real_tasks_[real_pos_].start_ns, source = -4;
    if (source == -1) break;
    if (source >= 0) {
      HostTrack& track = *tracks_[static_cast<size_t>(source)];
      const HostItem item = *track.peek();
      track.pop();
      RETURN_IF_ERROR(emitHost(track, item));
    } else if (source == -2) {
      RETURN_IF_ERROR(emitMemory(mem));
      has_mem = memory->next(&mem);
    } else if (source == -4) {
      RETURN_IF_ERROR(emitRealTask(real_tasks_[real_pos_]));
      nextRealTask();
    } else {
      RETURN_IF_ERROR(emitStepCounters(steps_[counter_pos++]));
    }
  }
  RETURN_IF_ERROR(real_status_);
  for (const auto& t : tracks_) RETURN_IF_ERROR(t->status());
  if (memory) RETURN_IF_ERROR(memory->status());
  RETURN_IF_ERROR(closePart());

  // Parts of an earlier, longer export under the same name would mix with this one.
  for (size_t k = summary_.files.size();; ++k) {
    const std::string stale = chromeTracePartPath(out_path_, k);
    if (std::remove(stale.c_str()) != 0) break;
  }
  return summary_;
}

}  // namespace

std::string chromeTracePartPath(const std::string& out_path, size_t part) {
  if (part == 0) return out_path;
  const std::string ext = ".json";
  if (out_path.size() > ext.size() && out_path.compare(out_path.size() - ext.size(), ext.size(), ext) == 0) {
    return out_path.substr(0, out_path.size() - ext.size()) + "." + std::to_string(part) + ext;
  }
  return out_path + "." + std::to_string(part);
}

StatusOr<ChromeTraceSummary> exportChromeTrace(TraceReader& reader, const std::string& out_path,
                                               const ChromeTraceOptions& options) {
  ChromeTraceExporter exporter(reader, out_path, options);
  return exporter.run();
}

}  // namespace npuscope
