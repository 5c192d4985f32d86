#include "npuscope/gui/trace_document.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QtConcurrent/QtConcurrentRun>

namespace npuscope::gui {

// The result of loading a run off the GUI thread: the timeline plus the small per-run tables,
// all read through readers of the loading thread's own.
struct RunLoad {
  int64_t run_id = -1;
  Status status;
  std::unique_ptr<TimelineData> data;
  std::vector<OverflowEventRow> overflow;
  std::vector<TensorDumpInfo> dumps;
  std::vector<MemorySample> memory;
  bool memory_later = false;  // a partial run: the memory overview is read after the first paint
  bool complete_later = false;  // shown first from its block summaries; every op follows
};

namespace {

StatusOr<std::vector<MemorySample>> readMemoryOverview(TraceReader& reader, int64_t run_id) {
  MemoryQuery mq;
  mq.run_id = run_id;
  mq.max_points = 4000;
  return reader.memory(mq);
}

// The run's timeline alone (a window, or every op of a run first shown from its summaries).
std::shared_ptr<RunLoad> loadTimeline(const std::string& path, int64_t run_id, const LoadOptions& o) {
  auto out = std::make_shared<RunLoad>();
  out->run_id = run_id;
  auto data = TimelineData::load(path, run_id, o);
  if (data.isOk()) out->data = std::move(data).value();
  else out->status = data.status();
  return out;
}

// The run's timeline, every op of it when it has at most `full_load_ops`. A run with more than
// `first_paint_ops` (0: no such stage) is read as a partial run first, its block summaries only,
// so the first paint does not wait for its ops; they follow (TraceDocument::completeRun).
std::shared_ptr<RunLoad> loadRunData(const std::string& path, int64_t run_id, int64_t full_load_ops,
                                     int64_t first_paint_ops = 0) {
  auto out = std::make_shared<RunLoad>();
  out->run_id = run_id;
  LoadOptions o;
  const bool staged = first_paint_ops > 0 && first_paint_ops < full_load_ops;
  o.full_load_ops = staged ? first_paint_ops : full_load_ops;
  auto data = TimelineData::load(path, run_id, o);
  if (!data.isOk()) {
    out->status = data.status();
    return out;
  }
  out->data = std::move(data).value();
  out->complete_later = staged && out->data->partial() && out->data->totalOps() <= full_load_ops;
  auto reader = TraceReader::open(path);
  if (!reader.isOk()) {
    out->status = reader.status();
    return out;
  }
  auto ov = reader.value()->overflowEvents(run_id);
  auto dumps = reader.value()->tensorDumps(run_id);
  if (!ov.isOk()) out->status = ov.status();
  else if (!dumps.isOk()) out->status = dumps.status();
  if (!out->status.isOk()) return out;
  out->overflow = std::move(ov).value();
  out->dumps = std::move(dumps).value();
  // A run too large to hold has as many memory samples to scan: its overview comes after the
  // first paint (TraceDocument::memoryLoaded).
  if (out->data->partial()) {
    out->memory_later = true;
    return out;
  }
  auto mem = readMemoryOverview(*reader.value(), run_id);
  if (!mem.isOk()) out->status = mem.status();
  else out->memory = std::move(mem).value();
  return out;
}

QString message(const Status& s) { return QString::fromStdString(s.message()); }

}  // namespace

QStringList TraceDocument::damage() const {
  QStringList out;
  auto add = [&out](const std::vector<std::string>& found) {
    for (const std::string& d : found) {
      const QString q = QString::fromStdString(d);
      if (!out.contains(q)) out.push_back(q);
    }
  };
  if (data_) add(data_->damage());
  if (reader_) add(reader_->damage());
  return out;
}

TraceDocument::TraceDocument(QObject* parent) : QObject(parent) {
  poll_timer_.setInterval(1000);
  connect(&poll_timer_, &QTimer::timeout, this, [this] { poll(); });
  // Connected before any view's slot: the views read the blocks of the run just loaded.
  connect(this, &TraceDocument::runLoaded, this, [this] {
    blocks_.clear();
    blocks_run_ = -1;
  });
}

const std::vector<MemoryBlockRecord>& TraceDocument::memoryBlocks() {
  if (blocks_run_ == currentRun() && blocks_run_ >= 0) return blocks_;
  blocks_.clear();
  blocks_run_ = currentRun();
  if (!reader_ || blocks_run_ < 0) return blocks_;
  auto blocks = reader_->memoryBlocks(blocks_run_);
  if (blocks.isOk()) {
    blocks_ = std::move(*blocks);
  } else {
    emit errorOccurred(QString::fromStdString(blocks.status().message()));
  }
  return blocks_;
}

TraceDocument::~TraceDocument() {
  if (watcher_) watcher_->waitForFinished();
  if (window_watcher_) window_watcher_->waitForFinished();
}

bool TraceDocument::loadWindow(const TimeWindow& window, bool sync) {
  if (!reader_ || !data_ || !data_->partial() || window.end_ns <= window.begin_ns) return false;
  if (watcher_) return false;  // a whole run is loading; it decides what is shown
  if (full_watcher_) return false;  // every op of the run is on its way: any window is in it
  if (window_watcher_ && !sync) {
    has_pending_window_ = true;
    pending_window_ = window;
    return true;
  }
  if (window_watcher_) window_watcher_->waitForFinished();
  const std::string path = path_.toStdString();
  const int64_t run_id = data_->runId();
  auto run = [path, run_id, window, n = full_load_ops_] {
    LoadOptions o;
    o.full_load_ops = n;
    o.has_window = true;
    o.window = window;
    return loadTimeline(path, run_id, o);
  };
  auto finish = [this](std::shared_ptr<RunLoad> load) {
    if (!load->status.isOk()) {
      emit errorOccurred(message(load->status));
      return;
    }
    // Another run meanwhile, or this one's every op arrived first.
    if (!data_ || data_->runId() != load->run_id || watcher_ || !data_->partial()) return;
    data_ = std::move(load->data);
    emit windowLoaded();
  };
  if (sync) {
    finish(run());
    return true;
  }
  window_watcher_ = new QFutureWatcher<std::shared_ptr<RunLoad>>(this);
  connect(window_watcher_, &QFutureWatcherBase::finished, this, [this, finish] {
    auto load = window_watcher_->result();
    window_watcher_->deleteLater();
    window_watcher_ = nullptr;
    finish(std::move(load));
    if (has_pending_window_) {
      has_pending_window_ = false;
      if (!data_ || !data_->covers(pending_window_.begin_ns, pending_window_.end_ns)) loadWindow(pending_window_);
    }
  });
  window_watcher_->setFuture(QtConcurrent::run(run));
  return true;
}

bool TraceDocument::open(const QString& path) {
  auto r = TraceReader::open(path.toStdString());
  if (!r.isOk()) {
    emit errorOccurred(message(r.status()));
    return false;
  }
  auto runs = r.value()->runs();
  if (!runs.isOk()) {
    emit errorOccurred(message(runs.status()));
    return false;
  }
  if (watcher_) watcher_->waitForFinished();
  if (window_watcher_) window_watcher_->waitForFinished();
  close();
  path_ = path;
  reader_ = std::move(r).value();
  runs_ = std::move(runs).value();
  stamp_ = fileStamp();
  if (anyRunning()) poll_timer_.start();
  emit fileOpened(path_);
  emit runsChanged();
  return true;
}

void TraceDocument::waitForBackground() {
  if (watcher_) watcher_->waitForFinished();
  if (window_watcher_) window_watcher_->waitForFinished();
  if (later_) later_->waitForFinished();
  if (full_watcher_) full_watcher_->waitForFinished();
  QCoreApplication::sendPostedEvents();
}

void TraceDocument::close() {
  ++generation_;
  poll_timer_.stop();
  data_.reset();
  overflow_.clear();
  dumps_.clear();
  memory_.clear();
  runs_.clear();
  reader_.reset();
  path_.clear();
}

const RunRow* TraceDocument::runById(int64_t id) const {
  for (const RunRow& r : runs_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

bool TraceDocument::loadRun(int64_t run_id, bool sync) {
  if (!reader_) {
    emit errorOccurred("no trace file is open");
    return false;
  }
  const bool refreshed = data_ && data_->runId() == run_id;
  const std::string path = path_.toStdString();
  // A refresh of the run on screen reads every op at once: no flash of its summaries.
  const int64_t first = refreshed ? 0 : first_paint_ops_;
  emit loadStarted(run_id);
  if (sync) {
    if (watcher_) watcher_->waitForFinished();
    auto load = loadRunData(path, run_id, full_load_ops_, first);
    const bool ok = load->status.isOk();
    finishLoad(std::move(load), refreshed);
    return ok;
  }
  if (watcher_) {  // a newer request wins; the running load finishes and is dropped
    pending_run_ = run_id;
    return true;
  }
  watcher_ = new QFutureWatcher<std::shared_ptr<RunLoad>>(this);
  connect(watcher_, &QFutureWatcherBase::finished, this, [this, refreshed] {
    auto load = watcher_->result();
    watcher_->deleteLater();
    watcher_ = nullptr;
    const int64_t pending = pending_run_;
    pending_run_ = -1;
    if (pending >= 0 && pending != load->run_id) {
      loadRun(pending, false);
      return;
    }
    finishLoad(std::move(load), refreshed);
  });
  watcher_->setFuture(
      QtConcurrent::run([path, run_id, n = full_load_ops_, first] { return loadRunData(path, run_id, n, first); }));
  return true;
}

void TraceDocument::finishLoad(std::shared_ptr<RunLoad> load, bool refreshed) {
  if (!load->status.isOk()) {
    emit errorOccurred(message(load->status));
    return;
  }
  data_ = std::move(load->data);
  step_device_.clear();
  overflow_ = std::move(load->overflow);
  dumps_ = std::move(load->dumps);
  memory_ = std::move(load->memory);
  const int64_t run_id = data_->runId();
  const uint64_t generation = ++generation_;
  // Every op of a run shown from its summaries, read from now on (isCompleting() as it shows).
  if (load->complete_later) completeRun(run_id, generation);
  emit runLoaded(run_id, refreshed);
  // After the first paint: each step's device busy time (the step band's split) and, for a run
  // too large to hold, the memory overview.
  struct Later {
    Status status;
    bool has_memory = false;
    std::vector<MemorySample> memory;
    std::vector<StepDeviceTime> steps;
  };
  using Result = std::shared_ptr<Later>;
  const std::string path = path_.toStdString();
  const bool want_memory = load->memory_later;
  auto* w = new QFutureWatcher<Result>(this);
  later_ = w;
  connect(w, &QFutureWatcherBase::finished, this, [this, w, generation] {
    Result later = w->result();
    w->deleteLater();
    if (later_ == w) later_ = nullptr;
    if (generation != generation_ || !data_) return;  // another file or run meanwhile
    if (!later->status.isOk()) {
      emit errorOccurred(message(later->status));
      return;
    }
    step_device_ = std::move(later->steps);
    emit stepTimesLoaded();
    if (later->has_memory) {
      memory_ = std::move(later->memory);
      emit memoryLoaded();
    }
  });
  w->setFuture(QtConcurrent::run([path, run_id, want_memory]() -> Result {
    auto out = std::make_shared<Later>();
    auto r = TraceReader::open(path);
    if (!r.isOk()) {
      out->status = r.status();
      return out;
    }
    auto steps = r.value()->stepDeviceTimes(run_id);
    if (!steps.isOk()) {
      out->status = steps.status();
      return out;
    }
    out->steps = std::move(steps).value();
    if (want_memory) {
      auto mem = readMemoryOverview(*r.value(), run_id);
      if (!mem.isOk()) {
        out->status = mem.status();
        return out;
      }
      out->memory = std::move(mem).value();
      out->has_memory = true;
    }
    return out;
  }));
}

void TraceDocument::completeRun(int64_t run_id, uint64_t generation) {
  const std::string path = path_.toStdString();
  auto* w = new QFutureWatcher<std::shared_ptr<RunLoad>>(this);
  full_watcher_ = w;
  connect(w, &QFutureWatcherBase::finished, this, [this, w, generation] {
    std::shared_ptr<RunLoad> load = w->result();
    w->deleteLater();
    if (full_watcher_ == w) full_watcher_ = nullptr;
    if (generation != generation_ || !data_ || data_->runId() != load->run_id) return;  // another file or run
    if (!load->status.isOk()) {
      emit errorOccurred(message(load->status));
      return;
    }
    data_ = std::move(load->data);
    emit windowLoaded();
  });
  w->setFuture(QtConcurrent::run([path, run_id, n = full_load_ops_] {
    LoadOptions o;
    o.full_load_ops = n;
    return loadTimeline(path, run_id, o);  // the run's other tables came with its summaries
  }));
}

std::vector<MemorySample> TraceDocument::memory(const TimeWindow& window, size_t max_points) {
  if (!reader_ || !data_) return {};
  MemoryQuery q;
  q.run_id = data_->runId();
  q.window = window;
  q.max_points = max_points;
  auto r = reader_->memory(q);
  if (!r.isOk()) {
    emit errorOccurred(message(r.status()));
    return {};
  }
  return std::move(r).value();
}

void TraceDocument::setPollInterval(int ms) {
  if (ms <= 0) {
    poll_timer_.stop();
    return;
  }
  poll_timer_.setInterval(ms);
  if (reader_ && anyRunning()) poll_timer_.start();
}

QString TraceDocument::fileStamp() const {
  QString s;
  for (const QString& p : {path_, path_ + "-wal"}) {
    QFileInfo fi(p);
    if (fi.exists()) s += QString("%1:%2;").arg(fi.size()).arg(fi.lastModified().toMSecsSinceEpoch());
  }
  return s;
}

bool TraceDocument::anyRunning() const {
  for (const RunRow& r : runs_) {
    if (r.status == "running") return true;
  }
  return false;
}

bool TraceDocument::reloadRuns() {
  auto runs = reader_->runs();
  if (!runs.isOk()) {
    emit errorOccurred(message(runs.status()));
    return false;
  }
  runs_ = std::move(runs).value();
  emit runsChanged();
  return true;
}

bool TraceDocument::poll() {
  if (!reader_) return false;
  const QString stamp = fileStamp();
  if (stamp == stamp_) return false;
  stamp_ = stamp;
  const RunRow* before = data_ ? runById(data_->runId()) : nullptr;
  const bool current_was_running = before && before->status == "running";
  if (!reloadRuns()) return false;
  if (data_ && (current_was_running || !runById(data_->runId()) ||
                runById(data_->runId())->status == "running")) {
    loadRun(data_->runId(), sync_refresh_);
  }
  if (!anyRunning()) poll_timer_.stop();
  return true;
}

}  // namespace npuscope::gui
