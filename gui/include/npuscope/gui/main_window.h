// The workbench window: the run list (with each run's config and results) docked on the left,
// the views as tabs (Timeline, Operators, Training, Dumps, Compare, Performance, Findings, Cluster), a
// message bar for errors, and File > Open / Open Trace Folder / Open Cluster / Open Recent / Compare
// Performance With / Record. Selecting a run that is a rank of a job gives the Cluster tab that job
// (the rank files beside it), read when the tab is shown. Files open from the command line, the dialog, the recent list, or by dropping them on
// the window; Kineto / torch_npu traces are converted first (TraceImport: progress, cancel,
// cached conversions).
#pragma once

#include <QMainWindow>
#include <functional>

class QLabel;
class QMenu;
class QProgressDialog;
class QTabWidget;
class QTableView;
class QTextBrowser;

namespace npuscope::gui {

class ClusterView;
class CompareView;
class DumpsView;
class FindingsView;
class MemoryView;
class OperatorsView;
class PerfCompareView;
class TraceImport;
class RecordDialog;
class RunListModel;
class TimelinePanel;
class TraceDocument;
class TrainingView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a file; on success selects its latest run. sync: load the run before returning.
  // A trace to import (Kineto JSON, torch_npu folder or db, a folder of ranks) is converted
  // first, in the background unless sync, or its cached conversion opened when up to date.
  bool openFile(const QString& path, bool sync = false);
  // Compares the current run (A) against the latest run of another npuscope file or trace (B),
  // converting a trace first; shows the Performance tab.
  bool comparePerformanceWith(const QString& path, bool sync = false);
  // Performance compare of two runs of the open file (A, B).
  bool comparePerformance(int64_t run_a, int64_t run_b);
  // The cluster view of a multi-rank job's rank files (trace files or folders), shown; read in
  // the background unless synchronous (setSynchronous).
  bool openCluster(const QStringList& paths, const QString& job = QString());
  // Selects run `id` in the list (loads it); two ids select both for Compare.
  void selectRuns(const std::vector<int64_t>& ids);

  TraceDocument* document() const { return doc_; }
  TimelinePanel* timeline() const { return timeline_; }
  OperatorsView* operators() const { return operators_; }
  TrainingView* training() const { return training_; }
  DumpsView* dumps() const { return dumps_; }
  CompareView* compare() const { return compare_; }
  PerfCompareView* perfCompare() const { return perf_; }
  FindingsView* findings() const { return findings_; }
  MemoryView* memory() const { return memory_; }
  ClusterView* cluster() const { return cluster_; }
  TraceImport* importer() const { return importer_; }
  // What the last conversion imported (one line a run, then its notes).
  QString lastImportSummary() const { return last_import_summary_; }
  QString statusText() const;
  QTabWidget* tabs() const { return tabs_; }
  RunListModel* runModel() const { return runs_; }
  QTableView* runTable() const { return run_table_; }
  QString lastError() const { return last_error_; }
  // The text of the message bar (an error or a warning) while it is shown, else empty.
  QString messageShown() const;
  // Synchronous run loads (tests, benchmarks).
  void setSynchronous(bool sync) { sync_ = sync; }
  void showRecordDialog();

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  // The constructor's parts, in this order.
  void buildRunsDock();
  void buildViews();
  void buildCentral();
  void buildMenus();
  void connectDocument();
  void connectViews();
  void showError(const QString& message);
  void showWarning(const QString& message);  // the message bar, amber
  void showRunStatus();
  void warnIfDamaged();  // the open file's damage (TraceDocument::damage()), once per opening
  void onRunsChanged();
  void onRunSelectionChanged();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  bool openDatabase(const QString& path, const QString& shown_as);
  // Converts `source` (or finds its cached conversion), then calls then(db) on success.
  bool convertThen(const QString& source, bool sync, std::function<void(const QString& db)> then);

  TraceDocument* doc_;
  RunListModel* runs_;
  QTableView* run_table_;
  QTextBrowser* run_details_;
  QTabWidget* tabs_;
  TimelinePanel* timeline_;
  OperatorsView* operators_;
  TrainingView* training_;
  DumpsView* dumps_;
  CompareView* compare_;
  PerfCompareView* perf_;
  FindingsView* findings_;
  MemoryView* memory_;
  ClusterView* cluster_;
  // The job of the selected rank's run, for the Cluster tab (read when shown): folder, job.
  QString cluster_dir_, cluster_job_, cluster_loaded_;
  void loadPendingCluster();
  TraceImport* importer_;
  QProgressDialog* import_progress_ = nullptr;
  QString last_import_summary_;
  QWidget* message_bar_;
  QLabel* message_;
  QLabel* status_;
  QMenu* recent_menu_;
  RecordDialog* record_ = nullptr;
  QString last_error_;
  QString damage_warned_;  // the file (since its opening) whose damage the message bar has told
  bool sync_ = false;
  bool selecting_ = false;
};

}  // namespace npuscope::gui
