// The Timeline tab: the TimelineView with a search bar (op name, next / previous), a details
// pane for the clicked slice (shapes, dtypes, self and total time, modeled device time, the
// forward/backward partner by sequence number as a link that jumps to it) and the op summary
// of a drag-selected time range.
#pragma once

#include <QWidget>
#include <vector>

#include "npuscope/store/records.h"

#include "npuscope/gui/timeline_data.h"

class QHBoxLayout;
class QLabel;
class QLineEdit;
class QTableView;
class QTextBrowser;

namespace npuscope::gui {

class OpTableModel;
class TableProxy;
class TimelineView;
class TraceDocument;

class TimelinePanel : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePanel(TraceDocument* doc, QWidget* parent = nullptr);
  TimelineView* view() const { return view_; }
  OpTableModel* rangeModel() const { return range_model_; }
  QTextBrowser* details() const { return details_; }

  // Search: finds ops whose name contains `text`; next/previous move through them in time.
  int search(const QString& text);
  void nextMatch();
  void previousMatch();
  int matchIndex() const { return match_; }
  const std::vector<SliceRef>& matches() const { return matches_; }
  // The details pane's text for a slice (also used by tests).
  QString describe(SliceRef r) const;
  // Shows the op summary of [begin, end).
  void summarizeRange(int64_t begin_ns, int64_t end_ns);
  // Opens a step: fits it and shows its summary.
  void openStep(int64_t step);
  // Selects the op with this op_events id and brings it into view; false when it is not loaded.
  bool openOp(int64_t op_id);

 signals:
  // A dumped tensor of the selected op was clicked in the details (tensor_dumps.id).
  void dumpActivated(qint64 dump_id);

 private:
  // The constructor's parts.
  QHBoxLayout* toolBar();
  QWidget* bottomPane();
  void connectView();
  void connectDocument();
  void onRunLoaded(qint64 run_id, bool refreshed);
  void loadMemoryCategories();
  // The details pane lists the device memory live at `ts` (a click on the memory track).
 public:
  void showLiveMemory(qint64 ts);

 private:
  void showMatch();

  TraceDocument* doc_;
  TimelineView* view_;
  QLineEdit* search_;
  QLabel* match_label_;
  QTextBrowser* details_;
  QLabel* range_label_;
  QTableView* range_table_;
  OpTableModel* range_model_;
  TableProxy* range_proxy_;
  std::vector<SliceRef> matches_;
  int match_ = -1;
};

}  // namespace npuscope::gui
