// The Compare tab: two runs side by side through core's comparison of their op dumps
// (npuscope/analysis/compare.h: msprobe metrics and verdicts). Rows are coloured by verdict, the
// first divergent op's rows come first, and clicking a row shows both tensors' statistics. Runs
// with msprobe entries (an imported msprobe dump) also get their module tree (dump_entries:
// each call under the module it ran in), every node coloured by the worst verdict beneath it,
// the first divergent call selected with its modules opened; clicking a node selects its rows.
// Statistics-only runs show msprobe's summary columns (Max / Mean / L2norm diff).
#pragma once

#include <QAbstractTableModel>
#include <QWidget>
#include <cstdint>

#include "npuscope/analysis/compare.h"

class QLabel;
class QTableView;
class QTreeWidget;
class QTreeWidgetItem;

namespace npuscope::gui {

class TableProxy;
class TraceDocument;

// Rows of a CompareResult; the first divergent op's rows first, then run A's dump order.
class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kStep, kTensor, kVerdict, kCosine, kMaxAbs, kMaxRel, kNpuDtype, kBenchDtype, kShape, kMessage, kColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;
  void setResult(compare::CompareResult result);
  const compare::CompareResult& result() const { return result_; }
  const compare::CompareRow* rowAt(int row) const;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  compare::CompareResult result_;
  std::vector<size_t> order_;
};

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(TraceDocument* doc, QWidget* parent = nullptr);
  // Compares run `a` (under test, "NPU") against run `b` (bench) of the open file.
  bool compareRuns(int64_t a, int64_t b);
  void clear(const QString& message);
  CompareModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QTreeWidget* tree() const { return tree_; }
  void showRow(int source_row);
  // Selects the table's first row of entry `name` (a tree click).
  void selectEntry(const QString& name);

 private:
  TraceDocument* doc_;
  QLabel* summary_;
  QTableView* table_;
  CompareModel* model_;
  TableProxy* proxy_;
  QLabel* detail_;
  QTreeWidget* tree_;
  // The module tree of run `a`'s msprobe entries (hidden when it has none).
  void buildTree(int64_t a);
};

}  // namespace npuscope::gui
