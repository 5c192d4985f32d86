// The dumper's background writers: dumped ops in (captured on op threads), Ascend dump files out
// (one write of header and payloads per file), then the very same payloads moved, uncopied and
// encoded for storage, into tensor_dumps rows for the TraceWriter. Several threads work on
// different ops at once (statistics, file, compression); rows reach the TraceWriter in the order
// the ops were pushed. Torch-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "npuscope/store/tensor_data.h"
#include "npuscope/store/records.h"
#include "npuscope/store/status.h"
#include "npuscope/dumper/dump_file.h"

namespace npuscope {
class TraceWriter;
}

namespace npuscope::dumper {

// One tensor of a dumped op: metadata, statistics and (in tensor mode) its elements in logical
// order.
struct CapturedTensor {
  tensor::DType dtype = tensor::DType::kUnknown;
  std::vector<int64_t> shape;
  std::string format;
  tensor::TensorStats stats;
  bool stats_pending = false;  // taken by a DumpWriter thread from `data`
  std::vector<uint8_t> data;
  size_t bytes = 0;  // payload size whether or not kept
  // Payload sharing in the trace file (TensorDumpRecord::payload_key): a 128-bit hash of `data`
  // (hashPayload), then, set by DumpWriter::push in push order, this payload's key for later
  // rows of its step, or the key of an earlier payload of the step with the same bytes.
  bool hashed = false;
  uint64_t hash_lo = 0, hash_hi = 0;
  uint64_t payload_key = 0, same_as = 0;
};

// Hashes `c.data` (XXH3, 128 bits) for payload sharing; payloads under kMinSharedBytes are
// left unhashed (a reference would save next to nothing).
constexpr size_t kMinSharedBytes = 256;
void hashPayload(CapturedTensor& c);

// One dumped op, as the op thread hands it over.
struct DumpedOp {
  std::string dir;   // the device's dump directory ("" : no file)
  std::string file;  // the file's name in `dir`
  std::string op_name, op_type;
  int64_t step = -1;
  int64_t op_id = -1;
  uint64_t dump_time_us = 0;
  bool with_data = true;  // payloads in the file (tensor and overflow modes)
  std::vector<CapturedTensor> inputs, outputs;
};

// Payload buffers reused from one dumped op to the next. A fresh buffer of megabytes costs a
// page fault per 4 KiB page on its first touch and an munmap when freed; a full dump of every op
// allocates a step's worth of them per step. Thread-safe; holds at most `max_cached_bytes`.
class PayloadPool {
 public:
  static constexpr size_t kMinPooledBytes = size_t{64} << 10;  // smaller buffers: plain malloc
  explicit PayloadPool(size_t max_cached_bytes) : max_(max_cached_bytes) {}
  // An empty buffer with room for `bytes` (a cached one at most twice that big, or a new one).
  std::vector<uint8_t> take(size_t bytes);
  // Keeps `buf` for a later take() if it is big enough and the pool has room; else frees it.
  void give(std::vector<uint8_t>&& buf);
  size_t cachedBytes() const;

 private:
  mutable std::mutex mu_;
  std::multimap<size_t, std::vector<uint8_t>> free_;  // by capacity
  size_t cached_ = 0;
  size_t max_;
};

// The Ascend file's view of captured tensors: payload sizes of `bytes` (0 without data),
// pointing into `data`, which holds them when captured with data (a sizing pass has none).
std::vector<DumpFileTensor> fileTensors(const std::vector<CapturedTensor>& list, bool with_data);

class DumpWriter {
 public:
  struct Options {
    TraceWriter* rows = nullptr;                    // where rows go (nullptr: files only)
    size_t max_queued_bytes = size_t{64} << 20;     // push() waits beyond this much payload
    int threads = 0;                                // 0: one per core, at most kMaxThreads
    PayloadPool* pool = nullptr;  // raw payloads go back here once stored compressed
    // The first write error in push order, on a writer thread, once every op pushed before the
    // failed one has been handed over (on_written has seen all that was dumped).
    std::function<void(const Status&)> on_error;
    std::function<void(const DumpedOp&)> on_written;  // each op written (file, rows), in push order
    // The trace file's path ("" : no rows) and whether to keep diskReserve() free on the
    // filesystems written to: an op that would eat into it fails like a write error.
    std::string trace_path;
    bool keep_reserve = false;
  };
  static constexpr int kMaxThreads = 4;
  explicit DumpWriter(Options options);
  ~DumpWriter();  // drain(), then joins the threads
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  // Queues one op; waits while the queue holds more than max_queued_bytes of payload (unless
  // empty). An op with neither a file nor payloads (statistics only, no dump_path) is handed to
  // the TraceWriter right away, on the caller's thread. After a write error, ops are dropped.
  // Hashed payloads are shared here, in push order: one whose bytes an earlier op of the same
  // step already holds becomes a reference to it in the trace file (its Ascend file keeps the
  // bytes). A failed op drops every op pushed after it, so no row refers to a dropped one.
  void push(DumpedOp&& op);
  // Waits until every op pushed so far is written and handed to the TraceWriter (or dropped).
  void drain();

 private:
  struct Queued {
    DumpedOp op;
    uint64_t seq = 0;  // push order
  };
  struct Done {  // an op written, its rows waiting for their turn
    DumpedOp op;
    std::vector<TensorDumpRecord> rows;
    bool ok = false;
    size_t bytes = 0;
    Status error;  // why it failed (not ok, and not merely dropped after an earlier failure)
  };
  void run();
  void handReady();
  void sharePayloads(DumpedOp& op);  // under mu_
  Status write(DumpedOp& op);
  Status checkRoom(const DumpedOp& op) const;  // the disk reserve (Options::keep_reserve)
  std::vector<TensorDumpRecord> rowsOf(DumpedOp& op);  // moves the payloads, encoded, into rows
  void handRows(DumpedOp& op);

  Options options_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Queued> queue_;
  size_t queued_bytes_ = 0;
  uint64_t pushed_ = 0, finished_ = 0;
  bool stop_ = false;
  // Payloads of the step being pushed, by hash and size -> key (under mu_).
  struct PayloadId {
    uint64_t lo, hi;
    size_t bytes;
    bool operator==(const PayloadId& o) const { return lo == o.lo && hi == o.hi && bytes == o.bytes; }
  };
  struct PayloadIdHash {
    size_t operator()(const PayloadId& p) const { return static_cast<size_t>(p.lo ^ p.bytes); }
  };
  std::unordered_map<PayloadId, uint64_t, PayloadIdHash> step_payloads_;
  int64_t payloads_step_ = INT64_MIN;
  static constexpr uint64_t kNoFailure = UINT64_MAX;
  std::atomic<uint64_t> failed_seq_{kNoFailure};  // the first op (in push order) that failed
  bool failed() const { return failed_seq_.load(std::memory_order_relaxed) != kNoFailure; }
  // Rows are handed in push order: the op with sequence number `handed_` goes next.
  std::mutex turn_mu_;
  std::map<uint64_t, Done> ready_;  // finished ops by sequence number
  uint64_t handed_ = 0;
  bool handing_ = false;  // a thread is in handReady()
  std::mutex dirs_mu_;
  std::set<std::string> dirs_;  // directories already created
  std::vector<std::thread> threads_;
};

}  // namespace npuscope::dumper
