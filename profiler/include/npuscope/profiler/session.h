// Recording sessions: per-op profiling of a training loop into an npuscope trace file.
//
//   auto session = npuscope::profiler::RecordingSession::start({"run.db", run_info});
//   for (...) {
//     { npuscope::profiler::UserScope s("forward"); ... }
//     session.value()->step({loss, loss_scale, ...});   // ends step N, begins N+1
//   }
//   session.value()->stop("completed");
//
// Every op on every thread (the autograd engine's backward threads included) is recorded through
// libtorch's RecordFunction callbacks: name, start, duration, thread, depth and parent, sequence
// number and forward/backward flag, input shapes and dtypes, the npu it ran on and the device's
// modeled duration and stream start. Op threads only append fixed-size records to thread-local
// buffers; the TraceWriter thread does all SQLite work. With no session recording, an op pays
// one check of libtorch's (empty) callback list. While a session records, the op dumper's rows
// are linked to the recorded ops (tensor_dumps.op_id = op_events.id of the op that produced
// the tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "npuscope/store/records.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/store/status.h"

namespace npuscope::npu {
struct OverflowSite;
}

namespace npuscope::profiler {

// torch.profiler's schedule: skip `skip_first` steps, then cycles of `wait` idle, `warmup`
// (callbacks on, nothing kept) and `active` (recorded) steps, `repeat` cycles (0: forever).
struct Schedule {
  int skip_first = 0;
  int wait = 0;
  int warmup = 0;
  int active = 1 << 30;
  int repeat = 0;

  enum class Action { kNone, kWarmup, kRecord };
  Action actionFor(int64_t step) const;
  // Parses "skip_first=1,wait=1,warmup=1,active=3,repeat=2" (any subset, any order).
  static StatusOr<Schedule> parse(const std::string& text);
};

struct SessionOptions {
  std::string path;
  RunInfo run;
  Schedule schedule;
  bool record_shapes = true;
  bool record_memory = true;
  // step() waits while more op records than this await the writer, so the file never lags the
  // run by more than a fraction of a second (the kill-safety promise) even when ops come faster
  // than SQLite takes them. The wait is counted (throttledNs). 0: never wait; records beyond
  // the writer's queue are then dropped and counted.
  size_t max_backlog_records = 1 << 16;
};

// What the training loop knows about a finished step.
struct StepMetrics {
  double loss = 0;
  double loss_scale = 1;
  bool overflow = false;
  bool skipped = false;
  double lr = 0;
  double grad_norm = -1;
};

class RecordingSession {
 public:
  // Opens the file, starts a run and starts recording (step 0 begins now). One session at a time.
  static StatusOr<std::unique_ptr<RecordingSession>> start(const SessionOptions& options);
  ~RecordingSession();  // stops as "failed" if stop() was not called
  RecordingSession(const RecordingSession&) = delete;
  RecordingSession& operator=(const RecordingSession&) = delete;

  // Ends the current step (stored with `m` when the schedule records it) and begins the next.
  void step(const StepMetrics& m = StepMetrics());
  // Sets the loss of the latest stored step row (a front-end learning it only after the step
  // ended); nothing when no step row was stored yet.
  void amendLastLoss(double loss);
  // Records an overflow event of the current step.
  void overflow(const std::string& source, const std::string& op_name, const std::string& detail);
  // With float-status tracking on, the device reports the first op of each step whose result
  // overflowed (npu::OverflowSite); the session records it as an overflow event of source
  // `first_op` linked to that op's op_events row. Public for the device's observer.
  void firstOverflowingOp(const npu::OverflowSite& site);
  // Hands every op buffered so far to the writer and waits until it is committed, so a reader
  // of the file sees the steps recorded so far (the run goes on). Not ok after a write error.
  Status flush();
  // Stops recording, writes everything and ends the run with `status`.
  Status stop(const std::string& status = "completed", const std::string& results_json = "");

  int64_t runId() const;
  int64_t currentStep() const;
  uint64_t recordedOps() const;
  uint64_t droppedRecords() const;
  // Time step() spent waiting for the writer (see SessionOptions::max_backlog_records).
  int64_t throttledNs() const;
  static RecordingSession* active();
  // The session's writer, for other recorders of the same run (the dumper's tensor rows).
  TraceWriter* writer() const;

  // No ops or memory events are recorded on any thread while alive (a dry run inside the loop,
  // such as the dumper's sizing pass); the step and the schedule are unchanged. nullptr: none.
  class Paused {
   public:
    explicit Paused(RecordingSession* session);
    ~Paused();
    Paused(const Paused&) = delete;
    Paused& operator=(const Paused&) = delete;

   private:
    RecordingSession* session_;
  };

 private:
  struct Impl;
  explicit RecordingSession(std::unique_ptr<Impl> impl);
  // Callbacks and keeping as the schedule says for the current step.
  void applySchedule();
  std::unique_ptr<Impl> impl_;
};

// A user scope (a named range) that appears as a slice around the ops run inside it.
class UserScope {
 public:
  explicit UserScope(const char* name);
  ~UserScope();
  UserScope(const UserScope&) = delete;
  UserScope& operator=(const UserScope&) = delete;

 private:
  void* guard_;
};

// Which recorded op a call of the calling thread was (msprobe's entries linked to their ops):
// opWatchBegin() before the call; opWatchEnd(its handle) after it gives the op_events id of the
// first op the call started at that depth (an API's own op, a module's first op), -1 when it
// started none or nothing is recorded. Watches nest; ending one ends those begun after it.
size_t opWatchBegin();
int64_t opWatchEnd(size_t handle);
// The op_events id of the innermost op running on the calling thread, -1 when none is recorded
// (in a backward hook: the autograd engine's frame of the node).
int64_t currentOpId();

}  // namespace npuscope::profiler
