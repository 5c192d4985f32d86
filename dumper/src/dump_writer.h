// The dumper's background writer: dumped ops in (captured on op threads), Ascend dump files out
// (one write of header and payloads per file), then the very same payloads moved, uncopied, into
// tensor_dumps rows for the TraceWriter. Torch-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "npuscope/core/compare.h"
#include "npuscope/core/status.h"
#include "npuscope/dumper/dump_file.h"

namespace npuscope {
class TraceWriter;
}

namespace npuscope::dumper {

// One tensor of a dumped op: metadata, statistics and (in tensor mode) its elements in logical
// order.
struct CapturedTensor {
  compare::DType dtype = compare::DType::kUnknown;
  std::vector<int64_t> shape;
  std::string format;
  compare::TensorStats stats;
  bool stats_pending = false;  // taken by the DumpWriter thread from `data`
  std::vector<uint8_t> data;
  size_t bytes = 0;  // payload size whether or not kept
};

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

// The Ascend file's view of captured tensors: payload sizes of `bytes` (0 without data),
// pointing into `data`, which holds them when captured with data (a sizing pass has none).
std::vector<DumpFileTensor> fileTensors(const std::vector<CapturedTensor>& list, bool with_data);

class DumpWriter {
 public:
  struct Options {
    TraceWriter* rows = nullptr;                    // where rows go (nullptr: files only)
    size_t max_queued_bytes = size_t{64} << 20;     // push() waits beyond this much payload
    std::function<void(const Status&)> on_error;    // the first write error, on the writer thread
    std::function<void(const DumpedOp&)> on_written;  // each op written (file, when any, and rows)
  };
  explicit DumpWriter(Options options);
  ~DumpWriter();  // drain(), then joins the thread
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  // Queues one op; waits while the queue holds more than max_queued_bytes of payload (unless
  // empty). An op with neither a file nor payloads (statistics only, no dump_path) is handed to
  // the TraceWriter right away, on the caller's thread. After a write error, ops are dropped.
  void push(DumpedOp&& op);
  // Waits until every op pushed so far is written and handed to the TraceWriter (or dropped).
  void drain();

 private:
  void run();
  Status write(DumpedOp& op);
  void handRows(DumpedOp& op);

  Options options_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<DumpedOp> queue_;
  size_t queued_bytes_ = 0;
  uint64_t pushed_ = 0, finished_ = 0;
  bool stop_ = false;
  std::atomic<bool> failed_{false};
  std::set<std::string> dirs_;  // writer thread only: directories already created
  std::thread thread_;
};

}  // namespace npuscope::dumper
