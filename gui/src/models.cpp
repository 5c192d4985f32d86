#include "npuscope/gui/models.h"
#include "npuscope/analysis/overflow_text.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>
#include <QFont>
#include <cmath>

#include "npuscope/gui/units.h"

namespace npuscope::gui {

namespace {

QVariant optionalValue(const std::optional<double>& v, int role) {
  if (role == kSortRole) return v ? QVariant(*v) : QVariant(-1e308);
  return v ? formatValue(*v) : QStringLiteral("\u2013");
}

bool validCell(const QAbstractItemModel* m, const QModelIndex& index) {
  return index.isValid() && !index.parent().isValid() && index.row() < m->rowCount() &&
         index.column() < m->columnCount();
}

}  // namespace

// ---- RunListModel ---------------------------------------------------------------------------

void RunListModel::setRuns(std::vector<RunRow> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  endResetModel();
}

const RunRow* RunListModel::runAt(int row) const {
  return row >= 0 && row < static_cast<int>(runs_.size()) ? &runs_[static_cast<size_t>(row)] : nullptr;
}

int RunListModel::rowOfRun(int64_t id) const {
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

int RunListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}
int RunListModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const RunRow& r = runs_[static_cast<size_t>(index.row())];
  const int64_t dur = r.ended_ns ? *r.ended_ns - r.started_ns : -1;
  if (role == Qt::DisplayRole || role == kSortRole) {
    const bool sort = role == kSortRole;
    switch (index.column()) {
      case kId: return sort ? QVariant(static_cast<qlonglong>(r.id)) : QVariant(QString("#%1").arg(r.id));
      case kStatus: return QString::fromStdString(r.status);
      case kModel: return QString::fromStdString(r.model);
      case kOptLevel: return QString::fromStdString(r.opt_level);
      case kOptimizer: return QString::fromStdString(r.optimizer);
      case kDevice: return QString::fromStdString(r.device);
      case kStarted:
        if (sort) return static_cast<qlonglong>(r.wall_start_ns);
        return QDateTime::fromMSecsSinceEpoch(r.wall_start_ns / 1000000).toString("yyyy-MM-dd hh:mm:ss");
      case kDuration:
        if (sort) return static_cast<qlonglong>(dur);
        return dur >= 0 ? formatNs(dur) : QStringLiteral("\u2013");
      case kDropped: return static_cast<qlonglong>(r.dropped_records);
    }
  }
  if (role == Qt::ForegroundRole && index.column() == kStatus) {
    if (r.status == "failed") return QBrush(QColor(0xb3, 0x26, 0x1e));
    if (r.status == "running") return QBrush(QColor(0x1f, 0x6f, 0xc5));
  }
  if (role == Qt::ForegroundRole && index.column() == kDropped && r.dropped_records > 0) {
    return QBrush(QColor(0xb3, 0x26, 0x1e));
  }
  if (role == Qt::ToolTipRole) return QString::fromStdString(r.config_json);
  if (role == Qt::TextAlignmentRole && (index.column() == kDuration || index.column() == kDropped)) {
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant RunListModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Run", "Status", "Model", "AMP", "Optimizer", "Device", "Started", "Duration",
                                 "Dropped"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- OpTableModel ---------------------------------------------------------------------------

void OpTableModel::setTable(OpAggregateTable table, bool with_shapes) {
  beginResetModel();
  table_ = std::move(table);
  with_shapes_ = with_shapes;
  endResetModel();
}

const OpAggregate* OpTableModel::rowAt(int row) const {
  return row >= 0 && row < static_cast<int>(table_.rows.size()) ? &table_.rows[static_cast<size_t>(row)] : nullptr;
}

int OpTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(table_.rows.size());
}
int OpTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant OpTableModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const OpAggregate& a = table_.rows[static_cast<size_t>(index.row())];
  if (role == kSortRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(a.name);
      case kShapes: return QString::fromStdString(a.input_shapes);
      case kCalls: return static_cast<qlonglong>(a.calls);
      case kSelf: return static_cast<qlonglong>(a.self_ns);
      case kSelfPct: return a.self_pct;
      case kTotal: return static_cast<qlonglong>(a.total_ns);
      case kTotalPct: return a.total_pct;
      case kAvg: return a.avg_ns;
      case kMin: return static_cast<qlonglong>(a.min_ns);
      case kMax: return static_cast<qlonglong>(a.max_ns);
      case kDevice: return static_cast<qlonglong>(a.device_ns);
      case kDeviceCalls: return static_cast<qlonglong>(a.device_calls);
    }
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(a.name);
      case kShapes: return with_shapes_ ? QString::fromStdString(a.input_shapes) : QString();
      case kCalls: return QString("%L1").arg(a.calls);
      case kSelf: return formatNs(a.self_ns);
      case kSelfPct: return QString("%1 %").arg(a.self_pct, 0, 'f', 2);
      case kTotal: return formatNs(a.total_ns);
      case kTotalPct: return QString("%1 %").arg(a.total_pct, 0, 'f', 2);
      case kAvg: return formatNs(static_cast<int64_t>(std::llround(a.avg_ns)));
      case kMin: return formatNs(a.min_ns);
      case kMax: return formatNs(a.max_ns);
      case kDevice: return a.device_calls ? formatNs(a.device_ns) : QStringLiteral("\u2013");
      case kDeviceCalls: return QString("%L1").arg(a.device_calls);
    }
  }
  if (role == Qt::ToolTipRole && (index.column() == kName || index.column() == kShapes)) {
    return QString::fromStdString(a.name + (a.input_shapes.empty() ? "" : "\n" + a.input_shapes));
  }
  if (role == Qt::TextAlignmentRole && index.column() >= kCalls) {
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant OpTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Name",  "Input shapes", "Calls", "Self",   "Self %",         "Total", "Total %",
                                 "Avg",   "Min",          "Max",   "Device (modeled)", "Device calls"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- StepTableModel -------------------------------------------------------------------------

void StepTableModel::setSteps(std::vector<StepRow> steps) {
  beginResetModel();
  steps_ = std::move(steps);
  endResetModel();
}

const StepRow* StepTableModel::stepAt(int row) const {
  return row >= 0 && row < static_cast<int>(steps_.size()) ? &steps_[static_cast<size_t>(row)] : nullptr;
}

int StepTableModel::rowOfStep(int64_t step) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].step == step) return static_cast<int>(i);
  }
  return -1;
}

int StepTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(steps_.size());
}
int StepTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant StepTableModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const StepRow& s = steps_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole || role == kSortRole) {
    const bool sort = role == kSortRole;
    switch (index.column()) {
      case kStep: return static_cast<qlonglong>(s.step);
      case kDuration: return sort ? QVariant(static_cast<qlonglong>(s.dur_ns)) : QVariant(formatNs(s.dur_ns));
      case kLoss: return optionalValue(s.loss, role);
      case kLossScale: return optionalValue(s.loss_scale, role);
      case kOverflow: return sort ? QVariant(s.overflow) : QVariant(s.overflow ? tr("overflow") : QString());
      case kSkipped: return sort ? QVariant(s.skipped) : QVariant(s.skipped ? tr("skipped") : QString());
      case kLr: return optionalValue(s.lr, role);
      case kGradNorm: return optionalValue(s.grad_norm, role);
    }
  }
  if (role == Qt::ForegroundRole && (s.overflow || s.skipped)) return QBrush(QColor(0xb3, 0x26, 0x1e));
  if (role == Qt::TextAlignmentRole && index.column() != kOverflow && index.column() != kSkipped) {
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant StepTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Step", "Duration", "Loss", "Loss scale", "Overflow", "Skipped", "LR", "Grad norm"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- OverflowModel --------------------------------------------------------------------------

void OverflowModel::setEvents(std::vector<OverflowEventRow> events) {
  beginResetModel();
  events_ = std::move(events);
  endResetModel();
}

const OverflowEventRow* OverflowModel::eventAt(int row) const {
  return row >= 0 && row < static_cast<int>(events_.size()) ? &events_[static_cast<size_t>(row)] : nullptr;
}

int OverflowModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(events_.size());
}
int OverflowModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant OverflowModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const OverflowEventRow& e = events_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole || role == kSortRole || role == Qt::ToolTipRole) {
    switch (index.column()) {
      case kStep: return e.step >= 0 ? QVariant(static_cast<qlonglong>(e.step)) : QVariant(QStringLiteral("\u2013"));
      case kSource: return QString::fromStdString(e.source);
      case kOp:
        return e.op_id >= 0 ? QString("%1 #%2").arg(QString::fromStdString(e.op_name)).arg(e.op_id)
                            : QString::fromStdString(e.op_name);
      case kDetail: {
        const QString text = QString::fromStdString(describeOverflowResult(e));
        return role == Qt::ToolTipRole && e.op_id >= 0 ? tr("%1 \u2014 double-click to open the op in the timeline").arg(text)
                                                      : text;
      }
    }
  }
  return {};
}

QVariant OverflowModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Step", "Source", "Op", "Detail"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- DumpTableModel -------------------------------------------------------------------------

void DumpTableModel::setDumps(std::vector<TensorDumpInfo> dumps) {
  beginResetModel();
  dumps_ = std::move(dumps);
  endResetModel();
}

const TensorDumpInfo* DumpTableModel::dumpAt(int row) const {
  return row >= 0 && row < static_cast<int>(dumps_.size()) ? &dumps_[static_cast<size_t>(row)] : nullptr;
}

int DumpTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(dumps_.size());
}
int DumpTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant DumpTableModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const TensorDumpInfo& d = dumps_[static_cast<size_t>(index.row())];
  const bool bad = d.nan_count.value_or(0) > 0 || d.inf_count.value_or(0) > 0;
  if (role == Qt::DisplayRole || role == kSortRole) {
    const bool sort = role == kSortRole;
    auto count = [&](const std::optional<int64_t>& v) -> QVariant {
      if (sort) return static_cast<qlonglong>(v.value_or(-1));
      return v ? QVariant(static_cast<qlonglong>(*v)) : QVariant(QStringLiteral("\u2013"));
    };
    switch (index.column()) {
      case kStep: return static_cast<qlonglong>(d.step);
      case kOpName: return QString::fromStdString(d.op_name);
      case kOpType: return QString::fromStdString(d.op_type);
      case kIo: return QString("%1 %2").arg(QString::fromStdString(d.io)).arg(d.idx);
      case kDtype: return QString::fromStdString(d.dtype);
      case kShape: return QString::fromStdString(d.shape);
      case kMin: return optionalValue(d.min, role);
      case kMax: return optionalValue(d.max, role);
      case kMean: return optionalValue(d.mean, role);
      case kL2: return optionalValue(d.l2norm, role);
      case kNan: return count(d.nan_count);
      case kInf: return count(d.inf_count);
      case kBytes: return sort ? QVariant(static_cast<qlonglong>(d.data_bytes)) : QVariant(d.data_bytes ? formatBytes(d.data_bytes) : tr("stats only"));
    }
  }
  if (role == Qt::ForegroundRole && bad) return QBrush(QColor(0xa3, 0x16, 0x0e));
  if (role == Qt::BackgroundRole && bad) return QBrush(QColor(0xfd, 0xe4, 0xe1));
  if (role == Qt::FontRole && bad && (index.column() == kNan || index.column() == kInf)) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::TextAlignmentRole && index.column() >= kMin) {
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant DumpTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Step", "Op", "Type", "Tensor", "Dtype", "Shape", "Min",
                                 "Max",  "Mean", "L2 norm", "NaN", "Inf", "Stored"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- TableProxy -----------------------------------------------------------------------------

TableProxy::TableProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(kSortRole);
  setSortCaseSensitivity(Qt::CaseInsensitive);
}

void TableProxy::setFilter(const QString& text, std::vector<int> columns) {
  text_ = text;
  columns_ = std::move(columns);
  invalidateFilter();
}

void TableProxy::setRowPredicate(std::function<bool(int)> extra) {
  extra_ = std::move(extra);
  invalidateFilter();
}

bool TableProxy::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  if (extra_ && !extra_(source_row)) return false;
  if (text_.isEmpty()) return true;
  for (int c : columns_) {
    const QModelIndex i = sourceModel()->index(source_row, c, source_parent);
    if (sourceModel()->data(i, Qt::DisplayRole).toString().contains(text_, Qt::CaseInsensitive)) return true;
  }
  return false;
}

}  // namespace npuscope::gui
