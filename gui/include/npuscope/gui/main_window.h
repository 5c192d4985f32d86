// The workbench window: the run list (with each run's config and results) docked on the left,
// the views as tabs (Timeline, Operators, Training, Dumps, Compare), a message bar for errors,
// and File > Open / Open Recent / Record. Files open from the command line, the dialog, the
// recent list, or by dropping them on the window.
#pragma once

#include <QMainWindow>

class QLabel;
class QMenu;
class QTabWidget;
class QTableView;
class QTextBrowser;

namespace npuscope::gui {

class CompareView;
class DumpsView;
class OperatorsView;
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
  bool openFile(const QString& path, bool sync = false);
  // Selects run `id` in the list (loads it); two ids select both for Compare.
  void selectRuns(const std::vector<int64_t>& ids);

  TraceDocument* document() const { return doc_; }
  TimelinePanel* timeline() const { return timeline_; }
  OperatorsView* operators() const { return operators_; }
  TrainingView* training() const { return training_; }
  DumpsView* dumps() const { return dumps_; }
  CompareView* compare() const { return compare_; }
  QTabWidget* tabs() const { return tabs_; }
  RunListModel* runModel() const { return runs_; }
  QTableView* runTable() const { return run_table_; }
  QString lastError() const { return last_error_; }
  // Synchronous run loads (tests, benchmarks).
  void setSynchronous(bool sync) { sync_ = sync; }
  void showRecordDialog();

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  void showError(const QString& message);
  void onRunsChanged();
  void onRunSelectionChanged();
  void addRecent(const QString& path);
  void rebuildRecentMenu();

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
  QWidget* message_bar_;
  QLabel* message_;
  QLabel* status_;
  QMenu* recent_menu_;
  RecordDialog* record_ = nullptr;
  QString last_error_;
  bool sync_ = false;
  bool selecting_ = false;
};

}  // namespace npuscope::gui
