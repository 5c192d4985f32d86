#include "npuscope/gui/compare_view.h"

#include <QBrush>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableView>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <cmath>
#include <functional>
#include <map>

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

// A tree node's label: a module as its own name and class ("input_norm RMSNorm forward.0" for
// Module.m.layers.0.input_norm.RMSNorm.forward.0), a call as it is; the tooltip has the full name.
QString shortEntryName(const std::string& entry) {
  const QStringList parts = QString::fromStdString(entry).split('.');
  if (parts.size() >= 5 && (parts[0] == "Module" || parts[0] == "Cell")) {
    const int n = parts.size();
    return parts[n - 4] + " " + parts[n - 3] + " " + parts[n - 2] + "." + parts[n - 1];
  }
  return QString::fromStdString(entry);
}

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
    // Statistics only (msprobe's summary mode): the three metric columns show Max, Mean and
    // L2norm diff.
    auto diff = [&](double v) -> QVariant {
      if (!r.has_summary || std::isnan(v)) return sort ? QVariant(-1e308) : QVariant(QStringLiteral("\u2013"));
      return sort ? QVariant(std::fabs(v)) : QVariant(formatValue(v));
    };
    if (result_.statistics_only) {
      switch (index.column()) {
        case kCosine: return diff(r.summary.max_diff);
        case kMaxAbs: return diff(r.summary.mean_diff);
        case kMaxRel: return diff(r.summary.norm_diff);
        default: break;
      }
    }
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
  static const char* kSummary[] = {"Max diff", "Mean diff", "L2norm diff"};
  if (result_.statistics_only && section >= kCosine && section <= kMaxRel) return tr(kSummary[section - kCosine]);
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
  // msprobe's tensor names run to 120 characters: the column is cut (full name in the detail
  // below) so that the verdict and metrics stay in view.
  table_->horizontalHeader()->setMaximumSectionSize(460);
  table_->setTextElideMode(Qt::ElideMiddle);
  detail_ = new QLabel(this);
  detail_->setTextFormat(Qt::RichText);
  detail_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  detail_->setWordWrap(true);
  detail_->setMargin(6);
  tree_ = new QTreeWidget(this);
  tree_->setHeaderLabels({tr("Module / call"), tr("Result")});
  tree_->setUniformRowHeights(true);
  tree_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
  tree_->header()->setStretchLastSection(false);
  tree_->header()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  tree_->hide();
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* cur) {
    if (cur) selectEntry(cur->data(0, Qt::UserRole).toString());
  });
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(detail_);
  split->setSizes({600, 160});
  auto* sides = new QSplitter(Qt::Horizontal, this);
  sides->addWidget(tree_);
  sides->addWidget(split);
  sides->setSizes({340, 900});
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 4, 6, 4);
  l->addWidget(summary_);
  l->addWidget(sides, 1);
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
  buildTree(a);
  detail_->setText(res.rows.empty() ? tr("Neither run has tensor dumps to compare.") : tr("Click a row for both tensors' statistics."));
  return true;
}

void CompareView::buildTree(int64_t a) {
  tree_->clear();
  auto entries = doc_->reader()->dumpEntries(a);
  if (!entries.isOk() || entries->empty()) {
    tree_->hide();
    return;
  }
  const compare::CompareResult& res = model_->result();
  // The worst verdict of each call's rows.
  auto rank = [](compare::Verdict v) {
    switch (v) {
      case compare::Verdict::kError: return 3;
      case compare::Verdict::kWarning: return 2;
      case compare::Verdict::kPass: return 1;
      case compare::Verdict::kNotCompared: return 0;
    }
    return 0;
  };
  std::map<std::string, compare::Verdict> worst;
  for (const compare::CompareRow& r : res.rows) {
    if (r.only_in_bench) continue;
    auto it = worst.find(r.op_name);
    if (it == worst.end() || rank(r.verdict) > rank(it->second)) worst[r.op_name] = r.verdict;
  }
  // One node per entry under its parent's (a parent seen only as a parent gets a node too).
  std::map<std::string, QTreeWidgetItem*> items;
  std::map<std::string, std::string> parent_of;
  for (const DumpEntryRow& e : *entries) parent_of.emplace(e.name, e.parent);
  std::function<QTreeWidgetItem*(const std::string&, int)> node = [&](const std::string& name, int depth) {
    auto it = items.find(name);
    if (it != items.end()) return it->second;
    auto* item = new QTreeWidgetItem(QStringList{shortEntryName(name)});
    item->setData(0, Qt::UserRole, QString::fromStdString(name));
    item->setToolTip(0, QString::fromStdString(name));
    items[name] = item;
    const std::string parent = parent_of.count(name) ? parent_of[name] : std::string();
    if (parent.empty() || parent == name || depth > 64) {
      tree_->addTopLevelItem(item);
    } else {
      node(parent, depth + 1)->addChild(item);
    }
    return item;
  };
  for (const DumpEntryRow& e : *entries) node(e.name, 0);
  // Colour bottom-up: a module shows the worst verdict beneath it.
  std::function<int(QTreeWidgetItem*)> colour = [&](QTreeWidgetItem* item) {
    const std::string name = item->data(0, Qt::UserRole).toString().toStdString();
    auto w = worst.find(name);
    int best = w == worst.end() ? -1 : rank(w->second);
    for (int i = 0; i < item->childCount(); ++i) best = std::max(best, colour(item->child(i)));
    static const compare::Verdict kBy[] = {compare::Verdict::kNotCompared, compare::Verdict::kPass,
                                           compare::Verdict::kWarning, compare::Verdict::kError};
    if (best >= 0) {
      item->setText(1, compare::verdictName(kBy[best]));
      item->setBackground(0, QBrush(verdictColor(kBy[best])));
      item->setBackground(1, QBrush(verdictColor(kBy[best])));
    }
    return best;
  };
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) colour(tree_->topLevelItem(i));
  tree_->show();
  auto first = items.find(res.first_divergent_op);
  if (first != items.end()) {
    QFont bold = tree_->font();
    bold.setBold(true);
    first->second->setFont(0, bold);
    first->second->setText(1, first->second->text(1) + tr(" \u2190 first"));
    for (QTreeWidgetItem* p = first->second->parent(); p; p = p->parent()) p->setExpanded(true);
    QSignalBlocker block(tree_);
    tree_->setCurrentItem(first->second);
    tree_->scrollToItem(first->second);
  }
}

void CompareView::selectEntry(const QString& name) {
  for (int row = 0; row < proxy_->rowCount(); ++row) {
    const QModelIndex index = proxy_->index(row, CompareModel::kTensor);
    const compare::CompareRow* r = model_->rowAt(proxy_->mapToSource(index).row());
    if (r && QString::fromStdString(r->op_name) == name) {
      table_->setCurrentIndex(index);
      table_->scrollTo(index);
      return;
    }
  }
}

void CompareView::clear(const QString& message) {
  tree_->clear();
  tree_->hide();
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
  if (r->has_summary) {
    auto pct = [](double v) { return std::isnan(v) ? QStringLiteral("\u2013") : formatValue(100 * v) + "%"; };
    html += tr("Max diff %1 (%2) \u00b7 Min diff %3 (%4) \u00b7 Mean diff %5 (%6) \u00b7 L2norm diff %7 (%8)")
                .arg(formatValue(r->summary.max_diff), pct(r->summary.max_rel), formatValue(r->summary.min_diff),
                     pct(r->summary.min_rel), formatValue(r->summary.mean_diff), pct(r->summary.mean_rel),
                     formatValue(r->summary.norm_diff), pct(r->summary.norm_rel));
  }
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
