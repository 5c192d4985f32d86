// The open trace file as the workbench sees it: the reader, the file's runs, and the run being
// looked at (its timeline, overflow events, dumps and memory). Every failure (not an npuscope
// file, newer schema, corrupt file, a query that fails on a damaged file) is reported through
// errorOccurred with a message for a person; nothing here throws or aborts.
//
// A file still being written (a run with status "running") is polled: when the file or its WAL
// changes, the run list and the current run are re-read and runLoaded fires again with
// `refreshed` set, so views keep their viewport.
#pragma once

#include <QDateTime>
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <memory>
#include <vector>

#include "npuscope/store/trace_reader.h"
#include "npuscope/gui/timeline_data.h"

namespace npuscope::gui {

struct RunLoad;

class TraceDocument : public QObject {
  Q_OBJECT

 public:
  explicit TraceDocument(QObject* parent = nullptr);
  ~TraceDocument() override;

  // Opens `path` and reads its runs. On failure emits errorOccurred, keeps the previous file
  // open and returns false.
  bool open(const QString& path);
  void close();
  bool isOpen() const { return reader_ != nullptr; }
  QString path() const { return path_; }
  TraceReader* reader() { return reader_.get(); }

  const std::vector<RunRow>& runs() const { return runs_; }
  const RunRow* runById(int64_t id) const;

  // Loads run `run_id`: synchronously (tests, benchmarks, small files) or in the background;
  // either way runLoaded fires on success and errorOccurred on failure.
  bool loadRun(int64_t run_id, bool sync = false);
  bool isLoading() const { return watcher_ != nullptr; }
  // A partial run (TimelineData::partial()): loads the ops of `window` in the background (or
  // now, when sync) and emits windowLoaded; a newer request replaces a waiting one. False when
  // nothing is to be read (a whole run, or every op of this one, is being read).
  bool loadWindow(const TimeWindow& window, bool sync = false);
  bool isLoadingWindow() const { return window_watcher_ != nullptr; }
  // Waits for every background read of this document (benchmarks, tests).
  void waitForBackground();
  // Runs with more ops load partially (LoadOptions::full_load_ops; tests lower it).
  void setFullLoadOps(int64_t ops) { full_load_ops_ = ops; }
  // A run with more ops than this (and at most full_load_ops) is first shown as a partial run,
  // from its block summaries, so the first paint does not wait for its ops; every op follows in
  // the background and windowLoaded fires (0: read every op before runLoaded).
  void setFirstPaintOps(int64_t ops) { first_paint_ops_ = ops; }
  // Every op of a run shown from its summaries is being read.
  bool isCompleting() const { return full_watcher_ != nullptr; }
  int64_t currentRun() const { return data_ ? data_->runId() : -1; }
  const TimelineData* timeline() const { return data_.get(); }
  // Damage found so far in the open file by its readers (the run's load and the views'), each once.
  QStringList damage() const;
  const std::vector<OverflowEventRow>& overflowEvents() const { return overflow_; }
  const std::vector<TensorDumpInfo>& dumps() const { return dumps_; }
  // A whole-run memory track, downsampled to a few thousand points (peaks kept). For a run too
  // large to hold it follows runLoaded (memoryLoaded).
  const std::vector<MemorySample>& memoryOverview() const { return memory_; }
  // Each step's device busy time (modeled, or the real device lane of an imported run); empty
  // until stepTimesLoaded.
  const std::vector<StepDeviceTime>& stepDeviceTimes() const { return step_device_; }
  // The current run's memory blocks (memory by owner, schema 10), read at the first call after
  // each runLoaded and shared by the Memory tab and the timeline's memory track; empty when the
  // run has none (a read error is reported through errorOccurred once).
  const std::vector<MemoryBlockRecord>& memoryBlocks();
  // Memory samples of the current run in `window`, at most about max_points per device.
  std::vector<MemorySample> memory(const TimeWindow& window, size_t max_points);

  // Live refresh: poll every `ms` while the file holds a running run (0 stops polling).
  void setPollInterval(int ms);
  // One poll now; returns true when the file changed and was re-read.
  bool poll();
  // Re-read the current run on the calling thread when polling finds a change (tests).
  void setSynchronousRefresh(bool sync) { sync_refresh_ = sync; }

 signals:
  void errorOccurred(const QString& message);
  void fileOpened(const QString& path);
  void runsChanged();
  void loadStarted(qint64 run_id);
  void runLoaded(qint64 run_id, bool refreshed);
  // The current run's timeline now holds another window of ops, or every op of a run first
  // shown from its summaries (same run, same other data).
  void windowLoaded();
  // The memory overview of a partial run, read after runLoaded.
  void memoryLoaded();
  // Each step's device busy time, read after runLoaded.
  void stepTimesLoaded();

 private:
  std::vector<MemoryBlockRecord> blocks_;
  int64_t blocks_run_ = -1;  // the run blocks_ belongs to, -1: to be read
  void finishLoad(std::shared_ptr<RunLoad> load, bool refreshed);
  void completeRun(int64_t run_id, uint64_t generation);
  bool reloadRuns();
  QString fileStamp() const;
  bool anyRunning() const;

  QString path_;
  std::unique_ptr<TraceReader> reader_;
  std::vector<RunRow> runs_;
  std::unique_ptr<TimelineData> data_;
  std::vector<OverflowEventRow> overflow_;
  std::vector<TensorDumpInfo> dumps_;
  std::vector<MemorySample> memory_;
  std::vector<StepDeviceTime> step_device_;
  QFutureWatcher<std::shared_ptr<RunLoad>>* watcher_ = nullptr;
  QFutureWatcher<std::shared_ptr<RunLoad>>* window_watcher_ = nullptr;
  QFutureWatcherBase* later_ = nullptr;  // the reads after the first paint
  QFutureWatcherBase* full_watcher_ = nullptr;  // every op of a run first shown from its summaries
  uint64_t generation_ = 0;              // bumped by every open, close and run load
  bool has_pending_window_ = false;
  int64_t full_load_ops_ = LoadOptions().full_load_ops;
  int64_t first_paint_ops_ = 200000;
  TimeWindow pending_window_;
  int64_t pending_run_ = -1;
  QTimer poll_timer_;
  QString stamp_;
  bool sync_refresh_ = false;
};

}  // namespace npuscope::gui
