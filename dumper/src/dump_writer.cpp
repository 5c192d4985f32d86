#include "dump_writer.h"

#include <filesystem>

#include "npuscope/core/trace_writer.h"

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

namespace {
size_t payloadOf(const DumpedOp& op) {
  size_t n = 0;
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& c : *list) n += c.data.size();
  return n;
}
}  // namespace

DumpWriter::DumpWriter(Options options) : options_(std::move(options)) {
  thread_ = std::thread([this] { run(); });
}

DumpWriter::~DumpWriter() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DumpWriter::push(DumpedOp&& op) {
  if (failed_.load(std::memory_order_relaxed)) return;
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
    // Bounded memory: wait for the writer unless the queue is empty (one op may exceed the bound).
    done_cv_.wait(lock, [&] { return queue_.empty() || queued_bytes_ + bytes <= options_.max_queued_bytes; });
    queued_bytes_ += bytes;
    queue_.push_back(std::move(op));
    ++pushed_;
  }
  cv_.notify_one();
}

void DumpWriter::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = pushed_;
  done_cv_.wait(lock, [&] { return finished_ >= target; });
}

void DumpWriter::run() {
  for (;;) {
    DumpedOp op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, everything written
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    const size_t bytes = payloadOf(op);
    if (!failed_.load(std::memory_order_relaxed)) {
      for (auto* list : {&op.inputs, &op.outputs}) {
        for (auto& c : *list) {
          if (!c.stats_pending) continue;
          c.stats = compare::computeStats(c.data.data(), c.dtype, c.data.size() / compare::dtypeSize(c.dtype));
          c.stats_pending = false;
        }
      }
      Status s = write(op);
      if (s.isOk()) {
        if (options_.on_written) options_.on_written(op);
        handRows(op);
      } else if (!failed_.exchange(true) && options_.on_error) {
        options_.on_error(s);  // this op and everything after it are dropped
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_bytes_ -= bytes;
      ++finished_;
    }
    done_cv_.notify_all();
  }
}

Status DumpWriter::write(DumpedOp& op) {
  if (op.dir.empty()) return Status::ok();
  if (dirs_.insert(op.dir).second) {
    std::error_code ec;
    std::filesystem::create_directories(op.dir, ec);  // a failure shows when the file is created
  }
  return writeDumpFile(op.dir + "/" + op.file, op.op_name, op.dump_time_us, fileTensors(op.inputs, op.with_data),
                       fileTensors(op.outputs, op.with_data));
}

void DumpWriter::handRows(DumpedOp& op) {
  if (!options_.rows) return;
  std::vector<TensorDumpRecord> rows;
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
      r.dtype = compare::dtypeName(c.dtype);
      r.shape = compare::formatShape(c.shape);
      r.format = c.format;
      r.has_stats = true;
      r.min = c.stats.min;
      r.max = c.stats.max;
      r.mean = c.stats.mean;
      r.l2norm = c.stats.l2norm;
      r.nan_count = c.stats.nan_count;
      r.inf_count = c.stats.inf_count;
      if (op.with_data) r.data = std::move(c.data);
      rows.push_back(std::move(r));
    }
  };
  add(op.inputs, "input");
  add(op.outputs, "output");
  options_.rows->addTensorDumps(std::move(rows));
}

}  // namespace npuscope::dumper
