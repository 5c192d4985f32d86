#include "npuscope/gui/operators_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QTableView>
#include <QVBoxLayout>

#include "npuscope/gui/models.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/units.h"

namespace npuscope::gui {

OperatorsView::OperatorsView(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  group_ = new QComboBox(this);
  group_->addItem(tr("Group by name"));
  group_->addItem(tr("Group by name + input shapes"));
  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText(tr("Filter ops (name or shapes)"));
  filter_->setClearButtonEnabled(true);
  summary_ = new QLabel(this);
  model_ = new OpTableModel(this);
  proxy_ = new TableProxy(this);
  proxy_->setSourceModel(model_);
  proxy_->setFilter(QString(), {OpTableModel::kName, OpTableModel::kShapes});
  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(OpTableModel::kSelf, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(21);
  table_->horizontalHeader()->setSectionResizeMode(OpTableModel::kName, QHeaderView::Interactive);
  table_->setColumnWidth(OpTableModel::kName, 360);
  table_->setColumnWidth(OpTableModel::kShapes, 300);
  table_->setColumnHidden(OpTableModel::kShapes, true);

  auto* bar = new QHBoxLayout();
  bar->setContentsMargins(6, 4, 6, 2);
  bar->addWidget(group_);
  bar->addWidget(filter_, 1);
  bar->addWidget(summary_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(bar);
  layout->addWidget(table_, 1);

  connect(group_, QOverload<int>::of(&QComboBox::currentIndexChanged), this, [this] { refresh(); });
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& t) {
    proxy_->setFilter(t, {OpTableModel::kName, OpTableModel::kShapes});
  });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& cur) {
    const OpAggregate* a = cur.isValid() ? model_->rowAt(proxy_->mapToSource(cur).row()) : nullptr;
    if (!a) {
      emit opSelected(QString(), QString(), false);
      return;
    }
    emit opSelected(QString::fromStdString(a->name), QString::fromStdString(a->input_shapes), model_->withShapes());
  });
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& i) {
    const OpAggregate* a = model_->rowAt(proxy_->mapToSource(i).row());
    if (a) emit opActivated(QString::fromStdString(a->name), QString::fromStdString(a->input_shapes), model_->withShapes());
  });
  connect(doc_, &TraceDocument::runLoaded, this, [this] { refresh(); });
}

void OperatorsView::setGroupByShapes(bool shapes) { group_->setCurrentIndex(shapes ? 1 : 0); }
void OperatorsView::setFilterText(const QString& text) { filter_->setText(text); }

void OperatorsView::refresh() {
  const bool shapes = group_->currentIndex() == 1;
  table_->setColumnHidden(OpTableModel::kShapes, !shapes);
  if (!doc_->reader() || doc_->currentRun() < 0) {
    model_->setTable({}, shapes);
    summary_->clear();
    return;
  }
  OpAggregateQuery q;
  q.run_id = doc_->currentRun();
  q.group_by = shapes ? OpGroupBy::kNameAndShapes : OpGroupBy::kName;
  auto t = doc_->reader()->opAggregates(q);
  if (!t.isOk()) {
    emit doc_->errorOccurred(QString::fromStdString(t.status().message()));
    return;
  }
  summary_->setText(tr("%L1 ops, %L2 groups, self %3, modeled device %4")
                        .arg(t->op_count)
                        .arg(t->group_count)
                        .arg(formatNs(t->self_sum_ns), formatNs(t->total_device_ns)));
  model_->setTable(std::move(t).value(), shapes);
}

}  // namespace npuscope::gui
