// npuscope_dumper: ACL_DUMP_DATA op dumps and overflow localisation.
//
// The training loop turns dumping on once, before training:
//
//   auto& d = npuscope::dumper::Dumper::instance();
//   auto on = d.configureFromEnvironment();          // ACL_DUMP_DATA=1 + ./acl.json
//   if (!on.isOk()) fail(on.status().message());     // one error naming the field
//   if (*on) {
//     d.beginSizing(); ... one step's forward and backward, undone ...; auto size = d.endSizing();
//     if (auto s = d.checkFreeSpace(size, steps, trace_path); !s.isOk()) fail(s.message());
//   }
//   d.attach(writer, [&] { return session->currentStep(); });  // rows into the run's trace file
//   if (*on) d.start();
//   ... train; wrap each step's update (after backward) in a Dumper::UpdatePhase; at every step
//   end: if (d.config().stop_on_error && !d.flush().isOk()) stop ...
//   d.stop();
//
// Capture happens where the op runs: the device's op observer (npu::set_op_observer) sees every
// op the npu computes — the boxed fallback, convolutions, copies into npu memory — with its
// arguments before the kernel and its results after. Each op gets a stable name
// `{type}.{call_no}.{forward|backward|update}`: type without `aten::`, call_no counting that
// type and phase from 0 in every step (so the same model gives the same names in every run and
// step). backward: while the autograd engine evaluates a graph task on the op's thread; update:
// inside an UpdatePhase (below); forward: everything else.
// The dumper reads tensor memory directly (npu memory is host memory) and runs no torch ops, so
// its own work is never dumped; a thread-local guard enforces it anyway.
//
// Where dumps go: `tensor_dumps` rows through the attached TraceWriter (payloads zstd-compressed
// when that pays, and stored once per step: a tensor whose bytes an earlier tensor of its step
// already stored, such as an op's input that was the previous op's output, refers to that row,
// found by a 128-bit content hash taken when it was captured) and, when dump_path is set,
// Ascend-format files under `{dump_path}/{YYYYMMDDhhmmss}/{device_id}/` (dump_file.h). In tensor mode the op thread only
// copies the tensors (into buffers reused from op to op); background threads, one per core, each
// take an op's statistics, write its file (one gathered write of header and payloads, its
// write-back started at once), compress the same payloads and hand them to the TraceWriter, in
// the order the ops ran. The queue between them is bounded (the op thread waits beyond it);
// statistics-only rows without files skip it. A write error (disk full,
// dump_path removed) stops dumping with one message on stderr: the failing op and everything
// queued after it are dropped, files and rows alike; training goes on, and status() reports it.
// Rows carry the op_events id of the op that produced them while a RecordingSession records
// (setOpIdSource); -1 (NULL) otherwise.
//
// Overflow check mode (dump_data: overflow): after each op its floating outputs are tested for
// inf/NaN, or, in the device's saturation mode, the float-status register is read around the op
// (the register's sticky value for the rest of the step is preserved). The first
// overflow_limit overflowing ops are dumped with inputs and outputs, each with an
// `overflow_events` row (source `dump_check`, op_name = the op's name) in its step; checking
// stops after that.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/dumper/dump_config.h"

namespace npuscope {
class TraceWriter;
}
namespace at {
class Tensor;
}

namespace npuscope::dumper {

const char* componentName();

// A tensor's statistics as msprobe's statistics dump writes them (npuscope.msprobe's
// PrecisionDebugger), read straight from its memory with no torch op: Max, Min, Mean and Norm
// (L2) in double; all four NaN when an element is NaN (torch's max and mean propagate it);
// Mean and Norm absent for a bool tensor (Max = any, Min = all); all absent for an empty one.
// `crc32`: msprobe's "md5" of the md5 summary mode (the CRC-32 of the raw bytes in logical
// order), computed when asked.
struct MsprobeStats {
  bool dumpable = false;  // a dtype the dumper reads (float, int, bool)
  bool has_minmax = false, has_mean = false;
  double max = 0, min = 0, mean = 0, norm = 0;
  uint32_t crc32 = 0;
};
MsprobeStats msprobeStats(const at::Tensor& t, bool with_crc32);

// A tensor's elements in logical order, as `tensor_dumps.data` holds them (raw, little-endian),
// read from its memory with no torch op; false for a dtype the dumper does not read.
bool tensorPayload(const at::Tensor& t, std::vector<uint8_t>* bytes);

// An overflowing op found in overflow check mode, in the order found.
struct OverflowHit {
  int64_t step = -1;
  std::string op_name;  // e.g. "mul.2.forward"
  std::string op_type;  // e.g. "aten::mul"
  std::string detail;   // e.g. "output 0: 1 inf, 0 NaN" or "float status register"
};

// Counted when written (what a write error dropped is not counted; stop() or flush() first).
struct DumperCounters {
  uint64_t ops_seen = 0;      // ops observed in dumped steps
  uint64_t ops_dumped = 0;    // ops with at least one tensor dumped
  uint64_t tensors = 0;       // tensors dumped
  uint64_t payload_bytes = 0; // raw tensor bytes dumped (into the file and the rows each)
  uint64_t shared_payload_bytes = 0;  // of those, rows that share an earlier row's stored bytes
  uint64_t files = 0;         // Ascend dump files written
};

// What one dumped step writes, as a sizing pass measured it.
struct DumpSizeEstimate {
  uint64_t ops = 0;            // ops dumped
  uint64_t tensors = 0;        // tensors dumped
  uint64_t payload_bytes = 0;  // raw tensor bytes
  uint64_t file_bytes = 0;     // Ascend files, headers included (0 without dump_path)
  uint64_t trace_bytes = 0;    // tensor_dumps rows, payloads counted uncompressed (an upper bound)
  uint64_t perStep() const { return file_bytes + trace_bytes; }
};

class Dumper {
 public:
  // The process's dumper (the device has one op observer).
  static Dumper& instance();

  // Validates `config` (dump_path writable, ...) and keeps it; refused while started.
  Status configure(const DumpConfig& config);
  // ACL_DUMP_DATA=1: configure from `config_path` (default ./acl.json) and return true; false
  // when the variable is unset or 0. Errors name the variable, the file or the field.
  StatusOr<bool> configureFromEnvironment(const std::string& config_path = "acl.json");
  const DumpConfig& config() const;

  // Where `tensor_dumps` and `overflow_events` rows go (nullptr: files only; the writer must
  // outlive start()..stop() and have a run begun) and where the current step comes from (empty:
  // the value of setStep()).
  void attach(TraceWriter* writer, std::function<int64_t()> step_getter = {});
  void setStep(int64_t step);
  // The op_events id of the innermost op being recorded on the calling thread, -1 when none
  // (nullptr: rows are not linked). Called on op threads: it must be cheap and lock-free.
  // RecordingSession sets it while it records.
  using OpIdSource = int64_t (*)();
  void setOpIdSource(OpIdSource source);

  // The sizing pass. Between beginSizing() and endSizing() the op observer only counts what
  // one dumped step would write — the ops and tensors the config keeps, file headers and rows
  // included — and writes nothing (no files, rows, directories or statistics). The caller runs
  // one step's forward and backward as training will, then undoes its effects. Refused while
  // started; overflow mode has nothing to size (its dumps are bounded by overflow_limit).
  Status beginSizing();
  DumpSizeEstimate endSizing();
  // Prints the expected dump size per step on stderr and refuses (kFailedPrecondition naming the
  // path, bytes per step, steps, total and free bytes) when the filesystem of dump_path — and
  // of `trace_path`, where rows go ("" when none) — cannot hold `steps` dumped steps, unless
  // the config's force is set (then it warns). Steps: how many of the run's steps dump_step
  // selects (StepSet::countIn).
  Status checkFreeSpace(const DumpSizeEstimate& per_step, int64_t steps, const std::string& trace_path);

  // Installs the op observer (creating the timestamped dump directory). kFailedPrecondition
  // when not configured or already started. Without a checkFreeSpace() before, the size is
  // reported after the first dumped step and the remaining steps of a bounded dump_step are
  // checked then (dumping stops if they cannot fit); with one, that later check runs only when
  // the step turned out bigger than estimated.
  Status start();
  // Waits until every captured op is in its file and handed to the writer, removes the
  // observer and restores the float-status tracking it changed. Rows handed to the writer are
  // written by it (flush the writer to wait for them).
  Status stop();
  bool started() const;

  // OK, or the error that stopped dumping (e.g. disk full) — training may go on.
  Status status() const;
  // Waits until every op captured so far is in its file and handed to the writer (or dropped
  // after an error); then status(). For loops that stop on a dump error (on_error: stop).
  Status flush();
  DumperCounters counters() const;
  std::vector<OverflowHit> overflows() const;
  // `{dump_path}/{YYYYMMDDhhmmss}/{device_id}` of this start for device 0 ("" without dump_path).
  std::string dumpDirectory() const;

  // Marks the parameter update after backward on the calling thread while alive: amp's unscale
  // and overflow check, the optimizer step, master-weight copies. msprobe dumps a step's forward
  // and backward (its examples stop the debugger before optimizer.step()), so these ops are left
  // out unless the config's dump_update is set; then they are named `{type}.{n}.update`, counted
  // apart from forward ops, so forward names still align between runs whose updates differ
  // (O2's master weights against O0).
  class UpdatePhase {
   public:
    UpdatePhase();
    ~UpdatePhase();
    UpdatePhase(const UpdatePhase&) = delete;
    UpdatePhase& operator=(const UpdatePhase&) = delete;

   private:
    bool outer_;
  };

  struct Impl;  // public for the observer trampoline only

 private:
  Dumper();
  ~Dumper();
  std::unique_ptr<Impl> impl_;
};

// Free bytes for a non-root user on the filesystem holding `path`. Tests may pretend with the
// environment variable NPUSCOPE_FAKE_FREE_BYTES (a byte count), which every path then reports.
StatusOr<uint64_t> freeBytes(const std::string& path);

// The disk reserve: while dumping, each op's file and rows are written only if the filesystem
// keeps at least this many bytes free afterwards, so that when dumps fill a disk the trace file
// can still commit the run's ops, steps and end. NPUSCOPE_DISK_RESERVE ("64M", "1G", bytes;
// "0" turns the check off) sets it; the default is 64 MiB, at most a quarter of the filesystem.
uint64_t diskReserve(uint64_t filesystem_bytes);

// What a front-end asks of dumping for a training run (npuscope train's --dump-config,
// --overflow-check and --dump-force; the same as ACL_DUMP_DATA=1 with an acl.json).
struct DumpRequest {
  std::string dump_config;     // acl.json to use (as ACL_DUMP_DATA=1 with that file)
  int64_t overflow_check = 0;  // > 0: overflow check mode, the first N overflowing ops
  bool force = false;          // dump even when the free space looks too small (config's force)
};
// Configures Dumper::instance() from the request, else from ACL_DUMP_DATA=1 and ./acl.json.
// Returns whether dumping is requested; call before training, then attach() and start().
StatusOr<bool> configureDumper(const DumpRequest& request);

}  // namespace npuscope::dumper
