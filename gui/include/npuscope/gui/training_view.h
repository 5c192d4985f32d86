// The Training tab: loss and loss scale per step (the scale on a log2 axis), overflow steps as
// red markers and skipped optimizer steps as orange ones, the step table, and for the chosen
// step its overflow events and dumped tensors. Clicking a marker or a point (or a row) picks
// the step; stepActivated asks the main window to open it on the timeline.
#pragma once

#include <QWidget>
#include <vector>

#include "npuscope/store/trace_reader.h"

class QLabel;
class QTableView;

namespace QtCharts {
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;
class QLogValueAxis;
}  // namespace QtCharts

namespace npuscope::gui {

class DumpTableModel;
class OverflowModel;
class StepTableModel;
class TraceDocument;

class TrainingView : public QWidget {
  Q_OBJECT
 public:
  explicit TrainingView(TraceDocument* doc, QWidget* parent = nullptr);
  StepTableModel* stepModel() const { return steps_; }
  OverflowModel* overflowModel() const { return overflow_; }
  DumpTableModel* dumpModel() const { return dumps_; }
  QtCharts::QScatterSeries* overflowSeries() const { return overflow_marks_; }
  // Shows step `step`'s overflow events and dumps (no signal).
  void showStep(int64_t step);
  QString overflowCostText() const;
  int64_t shownStep() const { return shown_; }
  void refresh();

 signals:
  void stepActivated(qint64 step);
  // An op to open in the timeline (a step's first overflowing op), by its op_events id.
  void opActivated(qint64 op_id);

 private:
  // The constructor's parts.
  QtCharts::QChart* lossChart();
  QtCharts::QChart* scaleChart();
  void buildStepTable();
  QWidget* sidePanel();
  void pick(double x);

  TraceDocument* doc_;
  QtCharts::QChartView* loss_view_;
  QtCharts::QChartView* scale_view_;
  QtCharts::QLineSeries* loss_;
  QtCharts::QLineSeries* scale_;
  QtCharts::QScatterSeries* overflow_marks_;
  QtCharts::QScatterSeries* skipped_marks_;
  QtCharts::QScatterSeries* scale_marks_;
  QtCharts::QValueAxis* loss_x_;
  QtCharts::QValueAxis* loss_y_;
  QtCharts::QValueAxis* scale_x_;
  QtCharts::QLogValueAxis* scale_y_;
  QLabel* step_label_;
  QLabel* cost_label_;  // what overflow cost the run: skipped steps and their time
  QTableView* step_table_;
  StepTableModel* steps_;
  OverflowModel* overflow_;
  DumpTableModel* dumps_;
  int64_t shown_ = -1;
};

}  // namespace npuscope::gui
