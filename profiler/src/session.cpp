#include "npuscope/profiler/session.h"

#include <optional>

#include <ATen/record_function.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "npuscope/store/clock.h"
#include "npuscope/store/console.h"
#include "npuscope/store/trace_writer.h"
#include "npuscope/device/runtime.h"
#include "npuscope/dumper/dumper.h"
#include "op_recorder.h"

namespace npuscope::profiler {


namespace {
std::atomic<RecordingSession*> g_active{nullptr};
}

struct RecordingSession::Impl {
  SessionOptions options;
  std::unique_ptr<TraceWriter> writer;
  int64_t run_id = -1;
  int64_t step = 0;
  int64_t step_start_ns = 0;
  int64_t throttled_ns = 0;
  bool stopped = false;
  bool told_write_error = false;  // the writer's failure was told when a step found it
  std::atomic<int> paused{0};  // Paused scopes alive: their work is not the step's
  std::optional<StepRecord> last;  // the latest stored step row (amendLastLoss)
};

RecordingSession::RecordingSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RecordingSession* RecordingSession::active() { return g_active.load(); }

namespace {
void onOverflowSite(const npu::OverflowSite& site) {
  if (RecordingSession* s = g_active.load()) s->firstOverflowingOp(site);
}
}  // namespace

void RecordingSession::firstOverflowingOp(const npu::OverflowSite& site) {
  if (impl_->stopped) return;
  if (impl_->paused.load() > 0) {
    // Work the session does not record (the dumper's sizing pass): the step's own first
    // overflowing op is still to come.
    npu::open_overflow_window();
    return;
  }
  recorder::CurrentOp op;
  const bool in_op = recorder::currentOp(&op);
  OverflowRecord o;
  o.step = impl_->step;
  o.ts_ns = nowNs();
  o.source = "first_op";
  o.op_name = in_op && op.name ? op.name : "";
  o.op_id = in_op ? op.id : -1;
  char detail[512];
  std::snprintf(detail, sizeof(detail),
                "{\"phase\": \"%s\", \"device\": %d, \"dtype\": \"%s\", \"rounding\": %s, \"numel\": %lld, "
                "\"out_max_abs\": %.9g, \"out_inf\": %lld, \"out_nan\": %lld, \"in_max_abs\": %.9g, "
                "\"in_inf\": %lld, \"in_nan\": %lld}",
                !in_op ? "unknown" : op.backward ? "backward" : "forward", site.device, site.dtype.c_str(), site.rounding ? "true" : "false",
                static_cast<long long>(site.numel), site.out_max_abs, static_cast<long long>(site.out_inf),
                static_cast<long long>(site.out_nan), site.in_max_abs, static_cast<long long>(site.in_inf),
                static_cast<long long>(site.in_nan));
  o.detail = detail;
  impl_->writer->addOverflow(o);
}

StatusOr<std::unique_ptr<RecordingSession>> RecordingSession::start(const SessionOptions& options) {
  if (g_active.load()) return failedPrecondition("a recording session is already active in this process");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  TraceWriter::Options writer_options;
  // The main thread's and autograd's buffers, and the two that replace them at a step's end.
  writer_options.prepared_buffers = 4;
  ASSIGN_OR_RETURN(impl->writer, TraceWriter::open(options.path, writer_options));
  RunInfo info = options.run;
  if (info.started_ns == 0) info.started_ns = nowNs();
  if (info.wall_start_ns == 0) {
    info.wall_start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  }
  auto run_id = impl->writer->beginRun(info);
  if (!run_id.isOk()) {
    const std::string& m = run_id.status().message();
    return ioError(options.path + ": cannot start a run: " + m +
                   (m.find("locked") != std::string::npos ? " (another process is writing this file)" : ""));
  }
  impl->run_id = *run_id;
  std::unique_ptr<RecordingSession> s(new RecordingSession(std::move(impl)));
  RecordingSession* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, s.get())) {
    return failedPrecondition("a recording session is already active in this process");
  }
  recorder::start(s->impl_->writer.get(), options.record_shapes, options.record_memory);
  s->impl_->step_start_ns = nowNs();
  recorder::setStep(0);
  s->applySchedule();
  npu::set_overflow_site_observer(&onOverflowSite);
  npu::open_overflow_window();
  dumper::Dumper::instance().setOpIdSource(&recorder::currentOpId);
  return s;
}

void RecordingSession::applySchedule() {
  const auto a = impl_->options.schedule.actionFor(impl_->step);
  recorder::setMode(a != Schedule::Action::kNone, a == Schedule::Action::kRecord);
}

RecordingSession::Paused::Paused(RecordingSession* session) : session_(session) {
  if (session_) ++session_->impl_->paused;
  if (session_ && !session_->impl_->stopped) recorder::setMode(false, false);
}

RecordingSession::Paused::~Paused() {
  if (session_) --session_->impl_->paused;
  if (session_ && !session_->impl_->stopped) session_->applySchedule();
}

RecordingSession::~RecordingSession() {
  if (impl_ && !impl_->stopped) (void)stop("failed");
}

void RecordingSession::step(const StepMetrics& m) {
  Impl& s = *impl_;
  if (s.stopped) return;
  const int64_t now = nowNs();
  if (s.options.schedule.actionFor(s.step) == Schedule::Action::kRecord) {
    StepRecord r;
    r.step = s.step;
    r.start_ns = s.step_start_ns;
    r.dur_ns = now - s.step_start_ns;
    r.loss = m.loss;
    r.loss_scale = m.loss_scale;
    r.overflow = m.overflow;
    r.skipped = m.skipped;
    r.lr = m.lr;
    r.grad_norm = m.grad_norm;
    s.writer->addStep(r);
    s.last = r;
    recorder::flushAll();
    if (s.options.max_backlog_records > 0) s.throttled_ns += s.writer->waitForBacklog(s.options.max_backlog_records);
  }
  if (!s.told_write_error && s.writer->failed()) {
    // Recording stopped (a full disk): told now, not only when the run ends hours later.
    s.told_write_error = true;
    consoleLine(stderr, "npuscope: warning: " + s.writer->error().message() + "; the run goes on unrecorded");
  }
  ++s.step;
  s.step_start_ns = nowNs();
  recorder::setStep(s.step);
  applySchedule();
  npu::open_overflow_window();  // the next step's first overflowing op
}

void RecordingSession::amendLastLoss(double loss) {
  Impl& s = *impl_;
  if (s.stopped || !s.last) return;
  s.last->loss = loss;
  s.writer->addStep(*s.last);  // the same (run, step) key: the row is replaced
}

void RecordingSession::overflow(const std::string& source, const std::string& op_name, const std::string& detail) {
  if (impl_->stopped) return;
  OverflowRecord o;
  o.step = impl_->step;
  o.ts_ns = nowNs();
  o.source = source;
  o.op_name = op_name;
  o.detail = detail;
  impl_->writer->addOverflow(o);
}

Status RecordingSession::flush() {
  Impl& s = *impl_;
  if (s.stopped) return Status::ok();
  recorder::flushAll();
  return s.writer->flush();
}

Status RecordingSession::stop(const std::string& status, const std::string& results_json) {
  Impl& s = *impl_;
  if (s.stopped) return Status::ok();
  s.stopped = true;
  dumper::Dumper::instance().setOpIdSource(nullptr);
  npu::set_overflow_site_observer(nullptr);
  recorder::stop();
  Status st = s.writer->endRun(status, results_json);
  // Joins the writer thread after its final commit. A checkpoint that found no room leaves the
  // run in the file's WAL: nothing is lost, but the two files must stay together.
  // After a write error the note continues that error's line.
  const Status closed = s.writer->close();
  if (!closed.isOk() && st.isOk()) std::fprintf(stderr, "npuscope: warning: %s\n", closed.message().c_str());
  if (!closed.isOk() && !st.isOk()) st = Status(st.code(), st.message() + "; " + closed.message());
  s.writer.reset();
  RecordingSession* self = this;
  g_active.compare_exchange_strong(self, nullptr);
  return st;
}

TraceWriter* RecordingSession::writer() const { return impl_->writer.get(); }
int64_t RecordingSession::runId() const { return impl_->run_id; }
int64_t RecordingSession::currentStep() const { return impl_->step; }
uint64_t RecordingSession::recordedOps() const { return recorder::recordedOps(); }
int64_t RecordingSession::throttledNs() const { return impl_->throttled_ns; }
uint64_t RecordingSession::droppedRecords() const { return impl_->writer ? impl_->writer->droppedRecords() : 0; }

UserScope::UserScope(const char* name) : guard_(nullptr) {
  auto* guard = new at::RecordFunction(at::RecordScope::USER_SCOPE);
  if (guard->isActive()) guard->before(name);
  guard_ = guard;
}

UserScope::~UserScope() { delete static_cast<at::RecordFunction*>(guard_); }

size_t opWatchBegin() { return recorder::watchBegin(); }
int64_t opWatchEnd(size_t handle) { return recorder::watchEnd(handle); }
int64_t currentOpId() { return recorder::currentOpId(); }

}  // namespace npuscope::profiler
