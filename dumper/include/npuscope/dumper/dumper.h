// npuscope_dumper: ACL_DUMP_DATA op dumps and overflow localisation.
//
// The training loop turns dumping on once, before training:
//
//   auto& d = npuscope::dumper::Dumper::instance();
//   auto on = d.configureFromEnvironment();          // ACL_DUMP_DATA=1 + ./acl.json
//   if (!on.isOk()) fail(on.status().message());     // one error naming the field
//   d.attach(writer, [&] { return session->currentStep(); });  // rows into the run's trace file
//   if (*on) d.start();
//   ... train; at every step end: if (!d.status().isOk() && d.config().stop_on_error) stop ...
//   d.stop();
//
// Capture happens where the op runs: the device's op observer (npu::set_op_observer) sees every
// op the npu computes — the boxed fallback, convolutions, copies into npu memory — with its
// arguments before the kernel and its results after. Each op gets a stable name
// `{type}.{call_no}.{forward|backward}`: type without `aten::`, call_no counting that type and
// direction from 0 in every step (so the same model gives the same names in every run and
// step), backward while the autograd engine evaluates a graph task on the op's thread.
// The dumper reads tensor memory directly (npu memory is host memory) and runs no torch ops, so
// its own work is never dumped; a thread-local guard enforces it anyway.
//
// Where dumps go: `tensor_dumps` rows through the attached TraceWriter (payloads zstd-compressed
// on the writer thread when that pays) and, when dump_path is set, Ascend-format files under
// `{dump_path}/{YYYYMMDDhhmmss}/{device_id}/` (dump_file.h). A write error (disk full, dump_path
// removed) stops dumping with one message on stderr; training goes on, and status() reports it.
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

#include "npuscope/core/status.h"
#include "npuscope/dumper/dump_config.h"

namespace npuscope {
class TraceWriter;
}

namespace npuscope::dumper {

const char* componentName();

// An overflowing op found in overflow check mode, in the order found.
struct OverflowHit {
  int64_t step = -1;
  std::string op_name;  // e.g. "mul.2.forward"
  std::string op_type;  // e.g. "aten::mul"
  std::string detail;   // e.g. "output 0: 1 inf, 0 NaN" or "float status register"
};

struct DumperCounters {
  uint64_t ops_seen = 0;      // ops observed in dumped steps
  uint64_t ops_dumped = 0;    // ops with at least one tensor dumped
  uint64_t tensors = 0;       // tensors dumped
  uint64_t payload_bytes = 0; // raw tensor bytes captured (files and rows)
  uint64_t files = 0;         // Ascend dump files written
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

  // Installs the op observer (creating the timestamped dump directory). kFailedPrecondition
  // when not configured or already started.
  Status start();
  // Removes the observer and restores the float-status tracking it changed. Rows already handed
  // to the writer are written by it (flush the writer to wait for them).
  Status stop();
  bool started() const;

  // OK, or the error that stopped dumping (e.g. disk full) — training may go on.
  Status status() const;
  DumperCounters counters() const;
  std::vector<OverflowHit> overflows() const;
  // `{dump_path}/{YYYYMMDDhhmmss}/{device_id}` of this start for device 0 ("" without dump_path).
  std::string dumpDirectory() const;

  struct Impl;  // public for the observer trampoline only

 private:
  Dumper();
  ~Dumper();
  std::unique_ptr<Impl> impl_;
};

}  // namespace npuscope::dumper
