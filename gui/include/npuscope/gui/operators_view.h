// The Operators tab: the key_averages-style op table of the current run from core's reader,
// grouped by name or by name and input shapes, sortable by any column and filtered by text.
// Selecting a row highlights that op's slices on the timeline (opSelected).
#pragma once

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QTableView;

namespace npuscope::gui {

class OpTableModel;
class TableProxy;
class TraceDocument;

class OperatorsView : public QWidget {
  Q_OBJECT
 public:
  explicit OperatorsView(TraceDocument* doc, QWidget* parent = nullptr);
  OpTableModel* model() const { return model_; }
  TableProxy* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  void setGroupByShapes(bool shapes);
  void setFilterText(const QString& text);
  // Re-reads the table of the current run.
  void refresh();

 signals:
  // An op (and its shapes when grouped by shapes) was selected; empty name: none.
  void opSelected(const QString& name, const QString& shapes, bool by_shapes);
  void opActivated(const QString& name, const QString& shapes, bool by_shapes);

 private:
  TraceDocument* doc_;
  QComboBox* group_;
  QLineEdit* filter_;
  QLabel* summary_;
  QTableView* table_;
  OpTableModel* model_;
  TableProxy* proxy_;
};

}  // namespace npuscope::gui
