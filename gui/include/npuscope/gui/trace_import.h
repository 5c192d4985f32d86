// Opening the traces users already have (Kineto / torch.profiler JSON, torch_npu *_ascend_pt
// folders, a folder of ranks) in the workbench: the source is converted to an npuscope file by
// the import library in the background, with progress and cancel, and the result is cached —
// beside the source as NAME.npuscope.db when its folder is writable, else in the user's cache
// directory — together with a stamp of the source (size and modification time of every file).
// Opening the same unchanged source again opens the cached file at once; a changed source is
// converted again. A conversion writes to a temporary file renamed into place only when it
// completed, so a cancelled or failed one never leaves a cache that looks complete.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <atomic>
#include <functional>
#include <memory>

namespace npuscope::gui {

class TraceImport : public QObject {
  Q_OBJECT

 public:
  explicit TraceImport(QObject* parent = nullptr);
  ~TraceImport() override;

  // The source's format ("kineto", "torch_npu", "cluster") when `path` is something to import;
  // empty for anything else (an npuscope file, an unknown file).
  static QString formatOf(const QString& path);
  // Where the converted file of `source` lives: beside it when its folder is writable, else in
  // `cache_dir` (default: the user's cache directory, npuscope/imports).
  static QString cachePathFor(const QString& source, const QString& cache_dir = QString());
  // The source's stamp: every file's relative path, size and modification time.
  static QString stampOf(const QString& source);
  // The cached conversion exists and was made from the source as it is now.
  static bool upToDate(const QString& source, const QString& cached);

  // Converts `source` into cachePathFor(source, cacheDir()). Background unless sync; emits
  // finished, failed or cancelled (also when sync). False when a conversion is already running.
  bool start(const QString& source, bool sync = false);
  void cancel() { cancel_.store(true); }
  bool isRunning() const { return watcher_ != nullptr; }
  // Bytes read so far and in all (0 before the size is known).
  int64_t done() const { return done_.load(); }
  int64_t total() const { return total_.load(); }
  void setCacheDir(const QString& dir) { cache_dir_ = dir; }
  QString cacheDir() const { return cache_dir_; }
  // Called on the conversion's thread at each progress report, after done() and total() took
  // its figures and before cancel() is looked at: tests hold a conversion there to act on it
  // while it certainly runs. Set it before start().
  void setProgressHook(std::function<void(int64_t done, int64_t total)> hook) { progress_hook_ = std::move(hook); }

 signals:
  // The npuscope file is ready at `db`; `summary` says what was imported (one line a rank,
  // then the notes on what was skipped, then the warning if any). `warning` is set when the
  // file's last checkpoint found no room (its WAL must stay beside it), empty otherwise.
  void finished(const QString& source, const QString& db, const QString& summary, const QString& warning);
  void failed(const QString& source, const QString& message);
  void cancelled(const QString& source);

 private:
  struct Outcome;
  std::shared_ptr<Outcome> run(const QString& source, const QString& target);
  void deliver(const std::shared_ptr<Outcome>& outcome);

  QFutureWatcher<std::shared_ptr<Outcome>>* watcher_ = nullptr;
  std::atomic<bool> cancel_{false};
  std::atomic<int64_t> done_{0}, total_{0};
  QString cache_dir_;
  std::function<void(int64_t, int64_t)> progress_hook_;
};

}  // namespace npuscope::gui
