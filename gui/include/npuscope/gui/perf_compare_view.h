// The performance compare view (msprof-analyze compare_tools, HTA TraceDiff): two runs, from one
// file or two, through core's comparePerf. A summary of host, device and step totals; host ops,
// device rows and steps side by side in tabs, largest |B − A| first, sortable numerically,
// filterable by name; rows on one side only are marked "only A" / "only B", slower-in-B rows
// are tinted red, faster green. Ratios are B / A: above 1 B is slower.
#pragma once

#include <QAbstractTableModel>
#include <QColor>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "npuscope/analysis/perf_compare.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QTabWidget;
class QTableView;
class QToolButton;

namespace npuscope::gui {

class TableProxy;

// How a row of either table compares: on one side only, slower in B (diff > 0), faster, equal.
enum class PerfRowKind { kSame, kSlower, kFaster, kOnlyA, kOnlyB };
PerfRowKind perfRowKind(const PerfRow& r);
// The background tint of each kind (invalid for kSame), shared by the tables and the legend.
QColor perfRowTint(PerfRowKind kind);
// The sentence that explains the ratio's direction (tooltips of the summary and the caption).
QString perfCompareRatioHelp();

// Rows of PerfCompareResult::host or ::device, in the order given (comparePerf: largest |diff|
// first). DisplayRole is formatted text, kSortRole the raw number, kPerfKindRole the PerfRowKind.
class PerfTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kName, kCallsA, kTotalA, kAvgA, kMaxA, kCallsB, kTotalB, kAvgB, kMaxB, kDiff, kRatio, kColumnCount
  };
  static constexpr int kPerfKindRole = Qt::UserRole + 2;
  using QAbstractTableModel::QAbstractTableModel;
  // `modeled`: the rows are modeled device times, whose max is only the average (tooltips say so).
  void setRows(std::vector<PerfRow> rows, bool modeled = false);
  const std::vector<PerfRow>& rows() const { return rows_; }
  const PerfRow* rowAt(int row) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<PerfRow> rows_;
  bool modeled_ = false;
};

// Steps of both runs paired by position; a side missing its step shows "–".
class PerfStepModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kIndex, kStepA, kDurA, kStepB, kDurB, kDiff, kRatio, kColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setSteps(std::vector<PerfStepPair> steps);
  const PerfStepPair* stepAt(int row) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<PerfStepPair> steps_;
};

class PerfCompareView : public QWidget {
  Q_OBJECT
 public:
  // Which rows the op tables show (besides the name filter).
  enum Show { kShowAll, kShowSlower, kShowFaster, kShowOnlyA, kShowOnlyB, kShowBoth };
  // Tab order.
  enum Tab { kHostTab, kDeviceTab, kStepTab };

  explicit PerfCompareView(QWidget* parent = nullptr);

  // Compares run `run_a` of `a` (the baseline) with run `run_b` of `b`; the readers may be the
  // same. The labels name the sides in the summary ("#3 O1", "before.db #1"). On an error the
  // view shows the message, emits errorOccurred and returns false. The readers are not kept.
  bool compareRuns(TraceReader& a, int64_t run_a, const QString& label_a, TraceReader& b, int64_t run_b,
                   const QString& label_b);
  // Empties the tables and shows `message` instead of a summary.
  void clear(const QString& message);

  const PerfCompareResult& result() const { return result_; }
  PerfTableModel* hostModel() const { return host_model_; }
  PerfTableModel* deviceModel() const { return device_model_; }
  PerfStepModel* stepModel() const { return step_model_; }
  QTableView* hostTable() const { return host_table_; }      // model(): the sorting/filtering proxy
  QTableView* deviceTable() const { return device_table_; }
  QTableView* stepTable() const { return step_table_; }
  QTabWidget* tabs() const { return tabs_; }
  QLabel* summary() const { return summary_; }
  QLineEdit* filterEdit() const { return filter_; }
  QComboBox* showCombo() const { return show_; }
  // Back to the default order of the op tables: largest |diff| first.
  void resetOrder();

 signals:
  void errorOccurred(const QString& message);

 private:
  QTableView* makeTable(QAbstractItemModel* proxy);
  void applyFilter();
  void updateTabTitles();
  bool acceptsRow(const PerfTableModel* m, int source_row) const;

  PerfCompareResult result_;
  QLabel* summary_;
  QLineEdit* filter_;
  QComboBox* show_;
  QToolButton* reset_order_;
  QLabel* legend_;
  QTabWidget* tabs_;
  PerfTableModel* host_model_;
  PerfTableModel* device_model_;
  PerfStepModel* step_model_;
  TableProxy* host_proxy_;
  TableProxy* device_proxy_;
  TableProxy* step_proxy_;
  QTableView* host_table_;
  QTableView* device_table_;
  QTableView* step_table_;
  QLabel* caption_;
};

}  // namespace npuscope::gui
