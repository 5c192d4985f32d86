#include "dump_writer.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>
#include <sys/statvfs.h>

#include "npuscope/store/format.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/dumper/dumper.h"

namespace npuscope::dumper {

std::vector<DumpFileTensor> fileTensors(const std::vector<CapturedTensor>& list, bool with_data) {
  std::vector<DumpFileTensor> out;
  out.reserve(list.size());
  for (const auto& c : list) {
    DumpFileTensor f;
    f.dtype = c.dtype;
    f.shape = c.shape;
    f.format = c.format;
    f.data = c.data.data();
    f.size = with_data ? c.bytes : 0;
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<uint8_t> PayloadPool::take(size_t bytes) {
  std::vector<uint8_t> buf;
  if (bytes >= kMinPooledBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      buf = std::move(it->second);
      cached_ -= it->first;
      free_.erase(it);
      return buf;
    }
  }
  buf.reserve(bytes);
  return buf;
}

void PayloadPool::give(std::vector<uint8_t>&& buf) {
  const size_t cap = buf.capacity();
  if (cap < kMinPooledBytes) return;
  std::vector<uint8_t> kept = std::move(buf);
  kept.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ + cap > max_) return;  // freed on leaving
  cached_ += cap;
  free_.emplace(cap, std::move(kept));
}

size_t PayloadPool::cachedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

void hashPayload(CapturedTensor& c) {
  c.hashed = c.data.size() >= kMinSharedBytes;
  if (!c.hashed) return;
  const XXH128_hash_t h = XXH3_128bits(c.data.data(), c.data.size());
  c.hash_lo = h.low64;
  c.hash_hi = h.high64;
}

namespace {
// Payload keys are unique in the process, so rows of two DumpWriters never mix up.
std::atomic<uint64_t> g_next_payload_key{1};

size_t payloadOf(const DumpedOp& op) {
  size_t n = 0;
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& c : *list) n += c.data.size();
  return n;
}
}  // namespace

DumpWriter::DumpWriter(Options options) : options_(std::move(options)) {
  int n = options_.threads;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  n = std::clamp(n, 1, kMaxThreads);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

DumpWriter::~DumpWriter() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void DumpWriter::push(DumpedOp&& op) {
  if (failed()) return;
  if (op.dir.empty() && !op.with_data) {
    // Nothing to write or compute (and nothing queued before it: dump_path and dump_data hold
    // for every op): the rows go straight to the TraceWriter, sparing statistics-only dumps a
    // thread hop per op.
    if (options_.on_written) options_.on_written(op);
    handRows(op);
    return;
  }
  const size_t bytes = payloadOf(op);
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded memory: wait for the writers unless the queue is empty (one op may exceed the bound).
    done_cv_.wait(lock, [&] { return queue_.empty() || queued_bytes_ + bytes <= options_.max_queued_bytes; });
    queued_bytes_ += bytes;
    if (op.with_data && options_.rows) sharePayloads(op);
    queue_.push_back({std::move(op), pushed_++});
  }
  cv_.notify_one();
}

void DumpWriter::sharePayloads(DumpedOp& op) {
  if (op.step != payloads_step_) {
    step_payloads_.clear();
    payloads_step_ = op.step;
  }
  for (auto* list : {&op.inputs, &op.outputs}) {
    for (auto& c : *list) {
      if (!c.hashed) continue;
      auto [it, added] = step_payloads_.try_emplace(PayloadId{c.hash_lo, c.hash_hi, c.data.size()}, 0);
      if (added) {
        it->second = g_next_payload_key.fetch_add(1);
        c.payload_key = it->second;
      } else {
        c.same_as = it->second;
      }
    }
  }
}

void DumpWriter::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = pushed_;
  done_cv_.wait(lock, [&] { return finished_ >= target; });
}

void DumpWriter::run() {
  for (;;) {
    Queued q;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, everything written
      q = std::move(queue_.front());
      queue_.pop_front();
    }
    DumpedOp& op = q.op;
    const size_t bytes = payloadOf(op);
    bool ok = false;
    std::vector<TensorDumpRecord> rows;
    Status error;
    if (!failed()) {
      for (auto* list : {&op.inputs, &op.outputs}) {
        for (auto& c : *list) {
          if (!c.stats_pending) continue;
          c.stats = tensor::computeStats(c.data.data(), c.dtype, c.data.size() / tensor::dtypeSize(c.dtype));
          c.stats_pending = false;
        }
      }
      Status s = checkRoom(op);  // its message names the op and step
      if (s.isOk()) {
        s = write(op);
        if (!s.isOk()) {
          s = Status(s.code(), "dumping " + op.op_name + " of step " + std::to_string(op.step) + ": " + s.message());
        }
      }
      ok = s.isOk();
      if (ok) {
        rows = rowsOf(op);
      } else {
        // Keep the earliest failed op (in push order); it is reported at its turn (handReady).
        uint64_t first = failed_seq_.load();
        while (q.seq < first && !failed_seq_.compare_exchange_weak(first, q.seq)) {
        }
        error = s;
      }
    }
    Done done{std::move(op), std::move(rows), ok, bytes, std::move(error)};
    {
      std::lock_guard<std::mutex> lock(turn_mu_);
      ready_.emplace(q.seq, std::move(done));
      if (handing_) continue;  // the thread handing over rows takes this op when its turn comes
      handing_ = true;
    }
    handReady();
  }
}

// Hands over, in push order, every finished op whose turn has come; one thread at a time (the
// others only leave their ops in ready_), so no writer thread waits for another's op.
void DumpWriter::handReady() {
  for (;;) {
    Done d;
    uint64_t seq = 0;
    {
      std::lock_guard<std::mutex> lock(turn_mu_);
      auto it = ready_.find(handed_);
      if (it == ready_.end()) {
        handing_ = false;
        return;
      }
      seq = handed_++;  // only this thread hands over, so the next turn can be taken now
      d = std::move(it->second);
      ready_.erase(it);
    }
    // Every op pushed before this one has been handed over, so a failure among them is known.
    if (d.ok && seq < failed_seq_.load()) {
      if (options_.on_written) options_.on_written(d.op);
      if (options_.rows) options_.rows->addTensorDumps(std::move(d.rows));
    } else if (!d.ok && seq == failed_seq_.load() && options_.on_error) {
      // The first failure in push order, reported once everything pushed before it is handed
      // over: what on_written counted is what was dumped. It and every later op are dropped.
      options_.on_error(d.error);
    } else if (d.ok && !d.op.dir.empty()) {
      // Written while an earlier op failed: dropped like its rows, so the dump directory holds
      // what the trace file and the counts say (and a full disk gets the room back).
      removeDumpFile(d.op.dir + "/" + d.op.file);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_bytes_ -= d.bytes;
      ++finished_;
    }
    done_cv_.notify_all();
  }
}

Status DumpWriter::checkRoom(const DumpedOp& op) const {
  if (!options_.keep_reserve) return Status::ok();
  // What this op writes, per filesystem: its file (payloads and a header) and its rows.
  struct Fs {
    std::string path;  // an existing directory on it
    dev_t dev;
    struct statvfs st;
    uint64_t need;
  };
  std::vector<Fs> filesystems;
  auto add = [&](std::filesystem::path dir, uint64_t bytes) {
    std::error_code ec;
    while (!dir.empty() && !std::filesystem::exists(dir, ec)) dir = dir.parent_path();
    Fs f{dir.empty() ? "." : dir.string(), 0, {}, bytes};
    struct stat where {};
    if (::stat(f.path.c_str(), &where) != 0 || ::statvfs(f.path.c_str(), &f.st) != 0) return;  // the write will tell
    f.dev = where.st_dev;
    for (Fs& known : filesystems) {
      if (known.dev == f.dev) return void(known.need += bytes);
    }
    filesystems.push_back(f);
  };
  const uint64_t payload = op.with_data ? payloadOf(op) : 0;
  if (!op.dir.empty()) add(op.dir, payload + 4096);
  if (options_.rows && !options_.trace_path.empty()) {
    add(std::filesystem::absolute(options_.trace_path).parent_path(),
        payload + 1024 * (op.inputs.size() + op.outputs.size()));
  }
  for (const Fs& f : filesystems) {
    const uint64_t free = static_cast<uint64_t>(f.st.f_bavail) * f.st.f_frsize;
    const uint64_t reserve = diskReserve(static_cast<uint64_t>(f.st.f_blocks) * f.st.f_frsize);
    if (free >= f.need + reserve) continue;
    return ioError(f.path + ": only " + formatBytes(free) + " free, and dumping " + op.op_name + " of step " +
                   std::to_string(op.step) + " needs about " + formatBytes(f.need) + " while " + formatBytes(reserve) +
                   " stay free for the trace file (NPUSCOPE_DISK_RESERVE): dumping stopped before the disk filled");
  }
  return Status::ok();
}

Status DumpWriter::write(DumpedOp& op) {
  if (op.dir.empty()) return Status::ok();
  {
    std::lock_guard<std::mutex> lock(dirs_mu_);  // the first writer to see a directory creates it
    if (dirs_.insert(op.dir).second) {
      std::error_code ec;
      std::filesystem::create_directories(op.dir, ec);  // a failure shows when the file is created
    }
  }
  return writeDumpFile(op.dir + "/" + op.file, op.op_name, op.dump_time_us, fileTensors(op.inputs, op.with_data),
                       fileTensors(op.outputs, op.with_data));
}

std::vector<TensorDumpRecord> DumpWriter::rowsOf(DumpedOp& op) {
  std::vector<TensorDumpRecord> rows;
  if (!options_.rows) return rows;
  rows.reserve(op.inputs.size() + op.outputs.size());
  auto add = [&](std::vector<CapturedTensor>& list, const char* io) {
    for (size_t i = 0; i < list.size(); ++i) {
      CapturedTensor& c = list[i];
      TensorDumpRecord r;
      r.step = op.step;
      r.op_id = op.op_id;
      r.op_name = op.op_name;
      r.op_type = op.op_type;
      r.io = io;
      r.idx = static_cast<int64_t>(i);
      r.dtype = tensor::dtypeName(c.dtype);
      r.shape = tensor::formatShape(c.shape);
      r.format = c.format;
      r.has_stats = true;
      r.min = c.stats.min;
      r.max = c.stats.max;
      r.mean = c.stats.mean;
      r.l2norm = c.stats.l2norm;
      r.nan_count = c.stats.nan_count;
      r.inf_count = c.stats.inf_count;
      if (op.with_data && c.same_as != 0) {
        r.same_data_as = c.same_as;  // the bytes are in an earlier row of the step
        if (options_.pool) options_.pool->give(std::move(c.data));
      } else if (op.with_data) {
        r.payload_key = c.payload_key;
        if (encodeDumpPayload(c.data.data(), c.data.size(), &r.data)) {
          if (options_.pool) options_.pool->give(std::move(c.data));
        } else {
          r.data = std::move(c.data);
        }
        r.data_encoded = true;
      }
      rows.push_back(std::move(r));
    }
  };
  add(op.inputs, "input");
  add(op.outputs, "output");
  return rows;
}

void DumpWriter::handRows(DumpedOp& op) {
  if (options_.rows) options_.rows->addTensorDumps(rowsOf(op));
}

uint64_t diskReserve(uint64_t filesystem_bytes) {
  const char* env = std::getenv("NPUSCOPE_DISK_RESERVE");
  if (env != nullptr && std::strcmp(env, "0") == 0) return 0;
  const uint64_t wanted = parseBytes(env, uint64_t{64} << 20);
  return env != nullptr && *env != '\0' ? wanted : std::min<uint64_t>(wanted, filesystem_bytes / 4);
}

}  // namespace npuscope::dumper
