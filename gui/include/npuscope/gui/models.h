// Item models of the workbench. Each is a plain table over rows read through core's reader;
// DisplayRole is text for people, kSortRole the raw value (numbers sort as numbers), and
// ToolTipRole spells out long values. Every model is checked by QAbstractItemModelTester.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <functional>
#include <vector>

#include "npuscope/store/trace_reader.h"

namespace npuscope::gui {

constexpr int kSortRole = Qt::UserRole + 1;

// The runs of a file, latest first.
class RunListModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kId, kStatus, kModel, kOptLevel, kOptimizer, kDevice, kStarted, kDuration, kDropped, kColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setRuns(std::vector<RunRow> runs);
  const RunRow* runAt(int row) const;
  int rowOfRun(int64_t id) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<RunRow> runs_;
};

// A key_averages-style op table (TraceReader::opAggregates or TimelineData::aggregate).
class OpTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kName, kShapes, kCalls, kSelf, kSelfPct, kTotal, kTotalPct, kAvg, kMin, kMax, kDevice, kDeviceCalls, kColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;
  void setTable(OpAggregateTable table, bool with_shapes);
  const OpAggregateTable& table() const { return table_; }
  bool withShapes() const { return with_shapes_; }
  const OpAggregate* rowAt(int row) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  OpAggregateTable table_;
  bool with_shapes_ = false;
};

// Steps of a run with their training metrics.
class StepTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kStep, kDuration, kLoss, kLossScale, kOverflow, kSkipped, kLr, kGradNorm, kColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setSteps(std::vector<StepRow> steps);
  const StepRow* stepAt(int row) const;
  int rowOfStep(int64_t step) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<StepRow> steps_;
};

// Overflow events (of a run or one step).
class OverflowModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kStep, kSource, kOp, kDetail, kColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setEvents(std::vector<OverflowEventRow> events);
  const OverflowEventRow* eventAt(int row) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<OverflowEventRow> events_;
};

// Dumped tensors: one row per tensor, NaN/inf rows stand out (red text, tinted background).
class DumpTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kStep, kOpName, kOpType, kIo, kDtype, kShape, kMin, kMax, kMean, kL2, kNan, kInf, kBytes, kColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;
  void setDumps(std::vector<TensorDumpInfo> dumps);
  const TensorDumpInfo* dumpAt(int row) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<TensorDumpInfo> dumps_;
};

// A proxy that sorts by kSortRole and filters on one column, case-insensitively.
class TableProxy : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit TableProxy(QObject* parent = nullptr);
  // Rows whose columns in `columns` hold `text`; `extra` further restricts rows (nullptr: none).
  void setFilter(const QString& text, std::vector<int> columns);
  void setRowPredicate(std::function<bool(int source_row)> extra);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;

 private:
  QString text_;
  std::vector<int> columns_;
  std::function<bool(int)> extra_;
};

}  // namespace npuscope::gui
