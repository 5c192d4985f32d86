#include "npuscope/profiler/loop_session.h"

#include <atomic>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "npuscope/amp/amp.h"
#include "npuscope/dumper/dumper.h"

namespace npuscope::profiler {
namespace {
std::atomic<LoopSession*> g_active_loop{nullptr};

double orNan(std::optional<double> v) { return v ? *v : std::numeric_limits<double>::quiet_NaN(); }
}  // namespace

struct LoopSession::Impl {
  std::unique_ptr<RecordingSession> session;
  bool dumping = false;
  bool stopped = false;
  // amp's last step outcome since the previous step().
  bool pending = false;
  amp::StepInfo last;
};

LoopSession::LoopSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<LoopSession>> LoopSession::start(const LoopSessionOptions& options) {
  if (g_active_loop.load()) return failedPrecondition("a recording is already active in this process");
  dumper::Dumper& dump = dumper::Dumper::instance();
  bool wantDump = false;
  // The dump configuration is checked before the file is touched.
  if (!options.dump_config.empty()) {
    dumper::DumpConfig config;
    ASSIGN_OR_RETURN(config, dumper::DumpConfig::fromFile(options.dump_config));
    RETURN_IF_ERROR(dump.configure(config));
    wantDump = true;
  } else {
    ASSIGN_OR_RETURN(wantDump, dump.configureFromEnvironment());
  }
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->session, RecordingSession::start(options.session));
  RecordingSession* s = impl->session.get();
  if (wantDump) {
    dump.attach(s->writer(), [s] { return s->currentStep(); });
    const Status started = dump.start();
    if (!started.isOk()) {
      (void)s->stop("failed", nlohmann::json{{"error", started.message()}}.dump());
      return started;
    }
    impl->dumping = true;
  }
  Impl* raw = impl.get();
  amp::setOverflowObserver([s](const amp::OverflowEvent& e) { s->overflow(e.source, e.op_name, e.detail); });
  amp::setStepObserver([raw](const amp::StepInfo& info) {
    raw->pending = true;
    raw->last = info;
  });
  std::unique_ptr<LoopSession> out(new LoopSession(std::move(impl)));
  g_active_loop.store(out.get());
  return out;
}

LoopSession::~LoopSession() {
  if (impl_ && !impl_->stopped) (void)stop("failed");
}

Status LoopSession::step(std::optional<double> loss, std::optional<double> lr, std::optional<double> grad_norm) {
  Impl& s = *impl_;
  if (s.stopped) return failedPrecondition("the recording has stopped");
  StepMetrics m;
  m.loss = orNan(loss);
  m.lr = orNan(lr);
  m.grad_norm = grad_norm ? *grad_norm : -1;
  if (s.pending) {
    m.loss_scale = s.last.loss_scale;
    m.overflow = s.last.overflow;
    m.skipped = s.last.skipped;
  }
  s.pending = false;
  s.session->step(m);
  if (s.dumping) {
    dumper::Dumper& dump = dumper::Dumper::instance();
    if (dump.config().stop_on_error && !dump.flush().isOk()) {
      const Status why = dump.status();
      (void)dump.stop();
      s.dumping = false;
      return Status(why.code(), why.message() + " (on_error: stop: dumping stopped)");
    }
  }
  return Status::ok();
}

void LoopSession::amendLastLoss(double loss) {
  if (!impl_->stopped) impl_->session->amendLastLoss(loss);
}

bool LoopSession::ampStepPending() const { return impl_->pending; }

Status LoopSession::stop(const std::string& status, const std::string& results_json) {
  Impl& s = *impl_;
  if (s.stopped) return Status::ok();
  s.stopped = true;
  amp::setOverflowObserver(nullptr);
  amp::setStepObserver(nullptr);
  nlohmann::json results = nlohmann::json::object();
  if (!results_json.empty()) {
    results = nlohmann::json::parse(results_json, nullptr, /*allow_exceptions=*/false);
    if (!results.is_object()) results = nlohmann::json{{"results", results_json}};
  }
  Status first = Status::ok();
  if (s.dumping) {
    dumper::Dumper& dump = dumper::Dumper::instance();
    const Status stopped = dump.stop();
    const dumper::DumperCounters c = dump.counters();
    results["dumped_tensors"] = c.tensors;
    results["dumped_bytes"] = c.payload_bytes;
    results["dump_directory"] = dump.dumpDirectory();
    if (!dump.status().isOk()) results["dump_error"] = dump.status().message();
    if (!stopped.isOk()) first = stopped;
    s.dumping = false;
  }
  const Status ended = s.session->stop(status, results.empty() ? "" : results.dump());
  if (first.isOk()) first = ended;
  LoopSession* self = this;
  g_active_loop.compare_exchange_strong(self, nullptr);
  return first;
}

Status LoopSession::flush() { return impl_->stopped ? Status::ok() : impl_->session->flush(); }
int64_t LoopSession::runId() const { return impl_->session->runId(); }
int64_t LoopSession::currentStep() const { return impl_->session->currentStep(); }
uint64_t LoopSession::recordedOps() const { return impl_->session->recordedOps(); }
bool LoopSession::dumping() const { return impl_->dumping; }
std::string LoopSession::dumpDirectory() const {
  return impl_->dumping ? dumper::Dumper::instance().dumpDirectory() : "";
}
LoopSession* LoopSession::active() { return g_active_loop.load(); }

}  // namespace npuscope::profiler
