// Recording a training loop that npuscope does not drive: a user's Python script
// (`npuscope.profile`, `npuscope run`) or a user's C++ program. It wires what `npuscope train`
// wires by hand, so such a run's file is the same as the CLI's:
//   * a RecordingSession into the trace file (ops, steps, memory, schedule);
//   * amp's overflow events into `overflow_events`, and the outcome of amp's last step (the
//     loss scale its backward used, overflow, skipped) into the `steps` row that step() ends;
//   * the op dumper (ACL_DUMP_DATA=1 with ./acl.json, or an explicit acl.json), its rows in the
//     same file, linked to the recorded ops.
//
//   auto s = LoopSession::start({session_options, /*dump_config=*/""});
//   for (...) { ...; s.value()->step(loss, lr); }
//   s.value()->stop("completed");
//
// One at a time per process (RecordingSession's rule). Not thread-safe: one loop drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "npuscope/store/status.h"
#include "npuscope/profiler/session.h"

namespace npuscope::profiler {

struct LoopSessionOptions {
  SessionOptions session;
  // The acl.json to dump with, whatever ACL_DUMP_DATA says; "" lets ACL_DUMP_DATA=1 decide,
  // with ./acl.json, as the CLI does.
  std::string dump_config;
};

class LoopSession {
 public:
  // Opens the file and starts recording (step 0 begins now); configures and starts the dumper
  // when asked. An error names the file, the variable or the acl.json field; nothing is left
  // running then (a run already begun is ended "failed").
  static StatusOr<std::unique_ptr<LoopSession>> start(const LoopSessionOptions& options);
  ~LoopSession();  // stops as "failed" if stop() was not called
  LoopSession(const LoopSession&) = delete;
  LoopSession& operator=(const LoopSession&) = delete;

  // Ends the current step and begins the next. `loss`, `lr`, `grad_norm`: what the loop knows
  // (unset: NULL in the file). Loss scale, overflow and skipped come from amp's step() or
  // GradScaler::update() since the previous step(); with neither, scale 1 and no overflow.
  // With the dump config's on_error stop, a dump write error is returned (dumping has stopped).
  Status step(std::optional<double> loss = std::nullopt, std::optional<double> lr = std::nullopt,
              std::optional<double> grad_norm = std::nullopt);
  // Sets the loss of the step row stored last (RecordingSession::amendLastLoss).
  void amendLastLoss(double loss);
  // Whether amp finished a step (or GradScaler an update) since the last step(): loops that
  // never call step() themselves end steps there.
  bool ampStepPending() const;
  // Stops the dumper (its counters join `results_json`, an object or ""), stops recording and
  // ends the run with `status`. Returns the first error met.
  Status stop(const std::string& status = "completed", const std::string& results_json = "");

  // RecordingSession::flush: what was recorded so far is in the file.
  Status flush();
  int64_t runId() const;
  int64_t currentStep() const;
  uint64_t recordedOps() const;
  bool dumping() const;
  std::string dumpDirectory() const;
  static LoopSession* active();

 private:
  struct Impl;
  explicit LoopSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace npuscope::profiler
