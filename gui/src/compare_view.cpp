#include "npuscope/gui/compare_view.h"

#include <QBrush>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "npuscope/gui/models.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/units.h"

namespace npuscope::gui {

namespace {

QColor verdictColor(compare::Verdict v) {
  switch (v) {
    case compare::Verdict::kPass: return QColor(0xe3, 0xf4, 0xe6);
    case compare::Verdict::kWarning: return QColor(0xfd, 0xf0, 0xc8);
    case compare::Verdict::kError: return QColor(0xfb, 0xd5, 0xd0);
    case compare::Verdict::kNotCompared: return QColor(0xee, 0xef, 0xf1);
  }
  return {};
}

QString opt(const std::optional<double>& v) { return v ? formatValue(*v) : QStringLiteral("\u2013"); }

}  // namespace

// ---- CompareModel ---------------------------------------------------------------------------

void CompareModel::setResult(compare::CompareResult result) {
  beginResetModel();
  result_ = std::move(result);
  order_.clear();
  // The first divergent op (of its step) on top, then everything else in dump order.
  for (size_t i = 0; i < result_.rows.size(); ++i) {
    const auto& r = result_.rows[i];
    if (!result_.first_divergent_op.empty() && r.op_name == result_.first_divergent_op &&
        r.step == result_.first_divergent_step) {
      order_.push_back(i);
    }
  }
  const size_t top = order_.size();
  for (size_t i = 0; i < result_.rows.size(); ++i) {
    if (std::find(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(top), i) ==
        order_.begin() + static_cast<std::ptrdiff_t>(top)) {
      order_.push_back(i);
    }
  }
  endResetModel();
}

const compare::CompareRow* CompareModel::rowAt(int row) const {
  return row >= 0 && row < static_cast<int>(order_.size()) ? &result_.rows[order_[static_cast<size_t>(row)]] : nullptr;
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(order_.size());
}
int CompareModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.parent().isValid() || index.row() >= rowCount() || index.column() >= kColumnCount) {
    return {};
  }
  const compare::CompareRow& r = *rowAt(index.row());
  if (role == Qt::DisplayRole || role == kSortRole) {
    const bool sort = role == kSortRole;
    auto metric = [&](double v) -> QVariant {
      if (!r.has_metrics) return sort ? QVariant(-1e308) : QVariant(QStringLiteral("\u2013"));
      return sort ? QVariant(v) : QVariant(formatValue(v));
    };
    switch (index.column()) {
      case kStep: return static_cast<qlonglong>(r.step);
      case kTensor:
        if (sort) return index.row();  // keeps the first-divergent-on-top order when sorted by it
        return QString::fromStdString(r.tensorName());
      case kVerdict: return sort ? QVariant(static_cast<int>(r.verdict)) : QVariant(compare::verdictName(r.verdict));
      case kCosine: return metric(r.metrics.cosine);
      case kMaxAbs: return metric(r.metrics.max_abs_err);
      case kMaxRel: return metric(r.metrics.max_relative_err);
      case kNpuDtype: return QString::fromStdString(r.npu_dtype);
      case kBenchDtype: return QString::fromStdString(r.bench_dtype);
      case kShape: return QString::fromStdString(r.npu_shape == r.bench_shape ? r.npu_shape : r.npu_shape + " vs " + r.bench_shape);
      case kMessage: return QString::fromStdString(r.message);
    }
  }
  if (role == Qt::BackgroundRole) return QBrush(verdictColor(r.verdict));
  if (role == Qt::ForegroundRole && r.verdict == compare::Verdict::kError) return QBrush(QColor(0x8a, 0x1c, 0x14));
  if (role == Qt::TextAlignmentRole && index.column() >= kCosine && index.column() <= kMaxRel) {
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Step", "Tensor", "Result", "Cosine", "MaxAbsErr", "MaxRelativeErr",
                                 "NPU dtype", "Bench dtype", "Shape", "Message"};
  return section >= 0 && section < kColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- CompareView ----------------------------------------------------------------------------

CompareView::CompareView(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  model_ = new CompareModel(this);
  proxy_ = new TableProxy(this);
  proxy_->setSourceModel(model_);
  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(CompareModel::kTensor, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(20);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  detail_ = new QLabel(this);
  detail_->setTextFormat(Qt::RichText);
  detail_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  detail_->setWordWrap(true);
  detail_->setMargin(6);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(detail_);
  split->setSizes({600, 160});
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 4, 6, 4);
  l->addWidget(summary_);
  l->addWidget(split, 1);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& cur) {
    if (cur.isValid()) showRow(proxy_->mapToSource(cur).row());
  });
  clear(tr("Select two runs in the run list (Ctrl+click) to compare their op dumps: the newer run is "
           "compared against the older one as the bench."));
}

bool CompareView::compareRuns(int64_t a, int64_t b) {
  if (!doc_->reader()) return false;
  auto r = compare::compareRuns(*doc_->reader(), a, *doc_->reader(), b);
  if (!r.isOk()) {
    clear(tr("Comparing run #%1 with #%2 failed: %3").arg(a).arg(b).arg(QString::fromStdString(r.status().message())));
    emit doc_->errorOccurred(QString::fromStdString(r.status().message()));
    return false;
  }
  const compare::CompareResult& res = r.value();
  QString first = res.first_divergent_op.empty()
                      ? tr("every compared tensor passes")
                      : tr("first divergent op: <b>%1</b> (step %2)")
                            .arg(QString::fromStdString(res.first_divergent_op).toHtmlEscaped())
                            .arg(res.first_divergent_step);
  summary_->setText(tr("Run <b>#%1</b> (NPU) vs run <b>#%2</b> (bench): %L3 tensors \u2014 "
                       "<span style='background:#e3f4e6'>&nbsp;%L4 pass&nbsp;</span> "
                       "<span style='background:#fdf0c8'>&nbsp;%L5 warning&nbsp;</span> "
                       "<span style='background:#fbd5d0'>&nbsp;%L6 error&nbsp;</span> "
                       "<span style='background:#eeeff1'>&nbsp;%L7 n/a&nbsp;</span>; %8")
                        .arg(a)
                        .arg(b)
                        .arg(res.rows.size())
                        .arg(res.pass)
                        .arg(res.warning)
                        .arg(res.error)
                        .arg(res.not_compared)
                        .arg(first));
  model_->setResult(std::move(r).value());
  table_->sortByColumn(CompareModel::kTensor, Qt::AscendingOrder);
  detail_->setText(res.rows.empty() ? tr("Neither run has tensor dumps to compare.") : tr("Click a row for both tensors' statistics."));
  return true;
}

void CompareView::clear(const QString& message) {
  model_->setResult({});
  summary_->setText(message);
  detail_->clear();
}

void CompareView::showRow(int source_row) {
  const compare::CompareRow* r = model_->rowAt(source_row);
  if (!r) return;
  QString html = QString("<b>%1</b> (step %2) \u2014 %3<table cellpadding=3>")
                     .arg(QString::fromStdString(r->tensorName()).toHtmlEscaped())
                     .arg(r->step)
                     .arg(compare::verdictName(r->verdict));
  html += "<tr><th></th><th>dtype</th><th>shape</th><th>min</th><th>max</th><th>mean</th><th>L2 norm</th></tr>";
  html += QString("<tr><td><b>NPU</b></td><td>%1</td><td>%2</td><td>%3</td><td>%4</td><td>%5</td><td>%6</td></tr>")
              .arg(QString::fromStdString(r->npu_dtype), QString::fromStdString(r->npu_shape), opt(r->npu_min),
                   opt(r->npu_max), opt(r->npu_mean), opt(r->npu_l2norm));
  html += QString("<tr><td><b>Bench</b></td><td>%1</td><td>%2</td><td>%3</td><td>%4</td><td>%5</td><td>%6</td></tr>")
              .arg(QString::fromStdString(r->bench_dtype), QString::fromStdString(r->bench_shape), opt(r->bench_min),
                   opt(r->bench_max), opt(r->bench_mean), opt(r->bench_l2norm));
  html += "</table>";
  if (r->has_metrics) {
    html += tr("Cosine %1 \u00b7 EucDist %2 \u00b7 MaxAbsErr %3 \u00b7 MaxRelativeErr %4 \u00b7 "
               "One\u2030 ratio %5 \u00b7 Five\u2030 ratio %6")
                .arg(formatValue(r->metrics.cosine), formatValue(r->metrics.euc_dist), formatValue(r->metrics.max_abs_err),
                     formatValue(r->metrics.max_relative_err), formatValue(r->metrics.one_thousandth_ratio),
                     formatValue(r->metrics.five_thousandths_ratio));
  }
  if (!r->message.empty()) html += "<br>" + QString::fromStdString(r->message).toHtmlEscaped();
  detail_->setText(html);
}

}  // namespace npuscope::gui
