#include "npuscope/gui/dumps_view.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>
#include <cstring>

#include "npuscope/gui/models.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/units.h"
#include "npuscope/store/tensor_data.h"

namespace npuscope::gui {

StatusOr<std::vector<double>> decodeDumpValues(const TensorDumpData& data, const std::string& dtype) {
  return tensor::decodeDumpValues(data.bytes, data.zstd_frame, tensor::parseDType(dtype));
}

// ---- HistogramWidget ------------------------------------------------------------------------

HistogramWidget::HistogramWidget(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(160);
  message_ = tr("Select a tensor");
}

void HistogramWidget::clear(const QString& message) {
  bins_.clear();
  nan_ = pinf_ = ninf_ = count_ = 0;
  message_ = message;
  update();
}

void HistogramWidget::setValues(const std::vector<double>& values, int bins) {
  bins_.assign(static_cast<size_t>(std::max(1, bins)), 0);
  nan_ = pinf_ = ninf_ = 0;
  count_ = static_cast<int64_t>(values.size());
  lo_ = INFINITY;
  hi_ = -INFINITY;
  for (double v : values) {
    if (std::isnan(v)) ++nan_;
    else if (std::isinf(v)) ++(v > 0 ? pinf_ : ninf_);
    else {
      lo_ = std::min(lo_, v);
      hi_ = std::max(hi_, v);
    }
  }
  if (lo_ > hi_) lo_ = hi_ = 0;
  const double w = hi_ > lo_ ? (hi_ - lo_) / static_cast<double>(bins_.size()) : 1.0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    auto b = static_cast<size_t>(hi_ > lo_ ? (v - lo_) / w : 0);
    bins_[std::min(b, bins_.size() - 1)]++;
  }
  message_.clear();
  update();
}

void HistogramWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(0xfc, 0xfc, 0xfd));
  if (!message_.isEmpty() || bins_.empty()) {
    p.setPen(QColor(0x5d, 0x67, 0x75));
    p.drawText(rect(), Qt::AlignCenter, message_);
    return;
  }
  const bool bad = nan_ + pinf_ + ninf_ > 0;
  const int side = bad ? 110 : 0;
  const QRect plot = rect().adjusted(46, 12, -12 - side, -30);
  int64_t top = 1;
  for (int64_t b : bins_) top = std::max(top, b);
  p.setPen(QColor(0xc8, 0xcd, 0xd4));
  p.drawLine(plot.bottomLeft(), plot.bottomRight());
  p.drawLine(plot.bottomLeft(), plot.topLeft());
  const double bw = static_cast<double>(plot.width()) / static_cast<double>(bins_.size());
  for (size_t i = 0; i < bins_.size(); ++i) {
    const double h = static_cast<double>(plot.height()) * static_cast<double>(bins_[i]) / static_cast<double>(top);
    p.fillRect(QRectF(plot.left() + bw * static_cast<double>(i) + 0.5, plot.bottom() - h, std::max(1.0, bw - 1), h),
               QColor(0x4e, 0x79, 0xa7));
  }
  p.setPen(QColor(0x1d, 0x23, 0x2b));
  p.drawText(QRect(plot.left() - 4, plot.bottom() + 4, 120, 18), Qt::AlignLeft, formatValue(lo_));
  p.drawText(QRect(plot.right() - 120, plot.bottom() + 4, 124, 18), Qt::AlignRight, formatValue(hi_));
  p.drawText(QRect(plot.left(), plot.bottom() + 4, plot.width(), 18), Qt::AlignHCenter,
             tr("%L1 elements").arg(count_));
  p.drawText(QRect(0, plot.top() - 6, 42, 18), Qt::AlignRight, QString::number(top));
  p.drawText(QRect(0, plot.bottom() - 12, 42, 18), Qt::AlignRight, "0");
  if (bad) {
    const QRect box(width() - side - 4, plot.top(), side, plot.height());
    p.fillRect(box, QColor(0xfd, 0xe4, 0xe1));
    p.setPen(QColor(0xa3, 0x16, 0x0e));
    QFont f = font();
    f.setBold(true);
    p.setFont(f);
    p.drawText(box.adjusted(8, 8, -4, -4), Qt::AlignTop | Qt::AlignLeft,
               tr("non-finite\nNaN   %L1\n+inf  %L2\n-inf  %L3").arg(nan_).arg(pinf_).arg(ninf_));
  }
}

// ---- DumpsView ------------------------------------------------------------------------------

DumpsView::DumpsView(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText(tr("Filter by op name or type"));
  filter_->setClearButtonEnabled(true);
  bad_only_ = new QCheckBox(tr("Only tensors with NaN / inf"), this);
  summary_ = new QLabel(this);
  model_ = new DumpTableModel(this);
  proxy_ = new TableProxy(this);
  proxy_->setSourceModel(model_);
  proxy_->setFilter(QString(), {DumpTableModel::kOpName, DumpTableModel::kOpType});
  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(DumpTableModel::kStep, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(20);
  table_->setColumnWidth(DumpTableModel::kOpName, 150);
  stats_ = new QLabel(tr("Select a tensor to see its values."), this);
  stats_->setWordWrap(true);
  stats_->setTextFormat(Qt::RichText);
  stats_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  hist_ = new HistogramWidget(this);

  auto* bar = new QHBoxLayout();
  bar->setContentsMargins(6, 4, 6, 2);
  bar->addWidget(filter_, 1);
  bar->addWidget(bad_only_);
  bar->addWidget(summary_);
  auto* side = new QWidget(this);
  auto* sl = new QVBoxLayout(side);
  sl->addWidget(stats_);
  sl->addWidget(hist_, 1);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(table_);
  split->addWidget(side);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(bar);
  layout->addWidget(split, 1);

  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& t) {
    proxy_->setFilter(t, {DumpTableModel::kOpName, DumpTableModel::kOpType});
  });
  connect(bad_only_, &QCheckBox::toggled, this, &DumpsView::setOnlyNonFinite);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& cur) {
    if (cur.isValid()) showDump(proxy_->mapToSource(cur).row());
  });
  connect(doc_, &TraceDocument::runLoaded, this, [this] { refresh(); });
}

void DumpsView::setOnlyNonFinite(bool on) {
  if (bad_only_->isChecked() != on) bad_only_->setChecked(on);
  if (on) {
    proxy_->setRowPredicate([this](int row) {
      const TensorDumpInfo* d = model_->dumpAt(row);
      return d && (d->nan_count.value_or(0) > 0 || d->inf_count.value_or(0) > 0);
    });
  } else {
    proxy_->setRowPredicate(nullptr);
  }
}

void DumpsView::refresh() {
  const auto& dumps = doc_->dumps();
  int64_t bad = 0;
  for (const auto& d : dumps) bad += d.nan_count.value_or(0) > 0 || d.inf_count.value_or(0) > 0;
  summary_->setText(bad ? tr("%L1 tensors, <span style='color:#b3261e'><b>%L2 with NaN/inf</b></span>")
                              .arg(dumps.size())
                              .arg(bad)
                        : tr("%L1 tensors").arg(dumps.size()));
  model_->setDumps(dumps);
  hist_->clear(dumps.empty() ? tr("This run has no tensor dumps (record with ACL_DUMP_DATA=1)")
                             : tr("Select a tensor"));
  stats_->setText(dumps.empty() ? QString() : tr("Select a tensor to see its values."));
}

bool DumpsView::selectDumpId(int64_t id) {
  for (int row = 0; row < model_->rowCount(); ++row) {
    const TensorDumpInfo* d = model_->dumpAt(row);
    if (!d || d->id != id) continue;
    filter_->clear();
    setOnlyNonFinite(false);
    const QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
    table_->setCurrentIndex(i);
    table_->scrollTo(i);
    showDump(row);
    return true;
  }
  return false;
}

void DumpsView::showDump(int row) {
  const TensorDumpInfo* d = model_->dumpAt(row);
  if (!d || !doc_->reader()) return;
  auto opt = [](const std::optional<double>& v) { return v ? formatValue(*v) : QStringLiteral("\u2013"); };
  const int64_t nans = d->nan_count.value_or(0), infs = d->inf_count.value_or(0);
  QString text = tr("<b>%1</b> %2 %3 \u2014 %4 %5 (%6), step %7<br>"
                    "min %8 \u00b7 max %9 \u00b7 mean %10 \u00b7 L2 %11")
                     .arg(QString::fromStdString(d->op_name).toHtmlEscaped(),
                          QString::fromStdString(d->io), QString::number(d->idx),
                          QString::fromStdString(d->dtype), QString::fromStdString(d->shape),
                          QString::fromStdString(d->op_type).toHtmlEscaped())
                     .arg(d->step)
                     .arg(opt(d->min), opt(d->max), opt(d->mean), opt(d->l2norm));
  if (nans || infs) {
    text += tr("<br><span style='color:#b3261e'><b>NaN %L1 \u00b7 inf %L2</b></span>").arg(nans).arg(infs);
  }
  stats_->setText(text);
  if (d->data_bytes == 0) {
    hist_->clear(tr("Statistics only: no payload was stored"));
    return;
  }
  auto data = doc_->reader()->tensorDumpData(d->id);
  if (!data.isOk()) {
    hist_->clear(QString::fromStdString(data.status().message()));
    return;
  }
  auto values = decodeDumpValues(data.value(), d->dtype);
  if (!values.isOk()) {
    hist_->clear(QString::fromStdString(values.status().message()));
    return;
  }
  hist_->setValues(values.value());
}

}  // namespace npuscope::gui
