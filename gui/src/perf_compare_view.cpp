#include "npuscope/gui/perf_compare_view.h"

#include <QBrush>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>
#include <cstdlib>

#include "npuscope/gui/models.h"
#include "npuscope/gui/units.h"

namespace npuscope::gui {

namespace {

const QString kDash = QStringLiteral("\u2013");
const QColor kSlowerText(0xa3, 0x16, 0x0e);
const QColor kFasterText(0x1d, 0x6b, 0x2c);
// Sorts "only B" (B/A undefined: infinitely slower) above every ratio.
constexpr double kOnlyBRatio = 1e300;

QString signedNs(int64_t ns) { return ns > 0 ? "+" + formatNs(ns) : formatNs(ns); }

QString ratioText(double r) {
  if (r > 0 && r < 0.005) return QStringLiteral("<0.01\u00d7");  // not "0.00×": B did take some time
  return QString("%1\u00d7").arg(r, 0, 'f', r >= 100 ? 0 : r >= 10 ? 1 : 2);
}

// "B is slower by 1.2 ms (+20.0 %)" for tooltips; `a`, `b` totals of both sides (a > 0).
QString ratioExplained(int64_t a, int64_t b) {
  const int64_t d = b - a;
  if (d == 0) return QObject::tr("B takes as long as A");
  const double pct = 100.0 * static_cast<double>(d) / static_cast<double>(a);
  return (d > 0 ? QObject::tr("B is slower than A by %1 (%2 %)") : QObject::tr("B is faster than A by %1 (%2 %)"))
      .arg(formatNs(std::llabs(d)))
      .arg(QString::number(pct, 'f', 1).prepend(pct > 0 ? "+" : ""));
}

QString deviceKindText(const std::string& kind) {
  if (kind == "real") return QObject::tr("real tasks");
  if (kind == "model") return QObject::tr("modeled op time");
  return QObject::tr("none");
}

QString tintSpan(PerfRowKind kind, const QString& text) {
  return QString("<span style='background:%1'>&nbsp;%2&nbsp;</span>").arg(perfRowTint(kind).name(), text);
}

bool validCell(const QAbstractItemModel* m, const QModelIndex& index) {
  return index.isValid() && !index.parent().isValid() && index.row() < m->rowCount() &&
         index.column() < m->columnCount();
}

constexpr int kRight = static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);

}  // namespace

PerfRowKind perfRowKind(const PerfRow& r) {
  if (r.onlyA()) return PerfRowKind::kOnlyA;
  if (r.onlyB()) return PerfRowKind::kOnlyB;
  if (r.diffNs() > 0) return PerfRowKind::kSlower;
  if (r.diffNs() < 0) return PerfRowKind::kFaster;
  return PerfRowKind::kSame;
}

QColor perfRowTint(PerfRowKind kind) {
  switch (kind) {
    case PerfRowKind::kSlower: return QColor(0xfb, 0xdd, 0xd8);
    case PerfRowKind::kFaster: return QColor(0xdc, 0xf1, 0xdf);
    case PerfRowKind::kOnlyA: return QColor(0xdd, 0xe7, 0xf7);
    case PerfRowKind::kOnlyB: return QColor(0xee, 0xdf, 0xf6);
    case PerfRowKind::kSame: break;
  }
  return {};
}

// ---- PerfTableModel -------------------------------------------------------------------------

void PerfTableModel::setRows(std::vector<PerfRow> rows, bool modeled) {
  beginResetModel();
  rows_ = std::move(rows);
  modeled_ = modeled;
  endResetModel();
}

const PerfRow* PerfTableModel::rowAt(int row) const {
  return row >= 0 && row < static_cast<int>(rows_.size()) ? &rows_[static_cast<size_t>(row)] : nullptr;
}

int PerfTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int PerfTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant PerfTableModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const PerfRow& r = rows_[static_cast<size_t>(index.row())];
  const PerfRowKind kind = perfRowKind(r);
  const int col = index.column();
  if (role == kPerfKindRole) return static_cast<int>(kind);
  if (role == kSortRole) {
    switch (col) {
      case kName: return QString::fromStdString(r.name);
      case kCallsA: return static_cast<qlonglong>(r.a.calls);
      case kTotalA: return static_cast<qlonglong>(r.a.total_ns);
      case kAvgA: return r.a.avgNs();
      case kMaxA: return static_cast<qlonglong>(r.a.max_ns);
      case kCallsB: return static_cast<qlonglong>(r.b.calls);
      case kTotalB: return static_cast<qlonglong>(r.b.total_ns);
      case kAvgB: return r.b.avgNs();
      case kMaxB: return static_cast<qlonglong>(r.b.max_ns);
      case kDiff: return static_cast<qlonglong>(r.diffNs());
      case kRatio: return r.onlyB() ? kOnlyBRatio : r.ratio();
    }
  }
  if (role == Qt::DisplayRole) {
    // A side the op is absent from shows dashes, not zeros.
    auto side = [&](const PerfSide& s, int which) -> QString {
      if (s.calls == 0) return kDash;
      switch (which) {
        case 0: return QString("%L1").arg(s.calls);
        case 1: return formatNs(s.total_ns);
        case 2: return formatNs(static_cast<int64_t>(std::llround(s.avgNs())));
        default: return formatNs(s.max_ns);
      }
    };
    switch (col) {
      case kName: return QString::fromStdString(r.name);
      case kCallsA: case kTotalA: case kAvgA: case kMaxA: return side(r.a, col - kCallsA);
      case kCallsB: case kTotalB: case kAvgB: case kMaxB: return side(r.b, col - kCallsB);
      case kDiff: return signedNs(r.diffNs());
      case kRatio:
        if (kind == PerfRowKind::kOnlyA) return tr("only A");
        if (kind == PerfRowKind::kOnlyB) return tr("only B");
        return ratioText(r.ratio());
    }
  }
  if (role == Qt::ToolTipRole) {
    QString tip = QString::fromStdString(r.name).toHtmlEscaped();
    if (kind == PerfRowKind::kOnlyA) tip += "<br>" + tr("only in run A (B has no call of it)");
    else if (kind == PerfRowKind::kOnlyB) tip += "<br>" + tr("only in run B (A has no call of it)");
    else tip += "<br>" + ratioExplained(r.a.total_ns, r.b.total_ns);
    if (modeled_ && (col == kMaxA || col == kMaxB)) tip += "<br>" + tr("modeled device time: max is the average");
    return tip;
  }
  if (role == Qt::BackgroundRole) {
    const QColor c = perfRowTint(kind);
    return c.isValid() ? QVariant(QBrush(c)) : QVariant();
  }
  if (role == Qt::ForegroundRole && col == kDiff && r.diffNs() != 0) {
    return QBrush(r.diffNs() > 0 ? kSlowerText : kFasterText);
  }
  if (role == Qt::TextAlignmentRole && col != kName) return kRight;
  return {};
}

QVariant PerfTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::BackgroundRole && section >= kCallsA && section <= kMaxB) {
    // A's columns in the only-A hue, B's in the only-B hue: the sides read apart at a glance.
    return QBrush(perfRowTint(section < kCallsB ? PerfRowKind::kOnlyA : PerfRowKind::kOnlyB));
  }
  if (role == Qt::DisplayRole) {
    static const char* kNames[] = {"Name",    "Calls A", "Total A", "Avg A",      "Max A",      "Calls B",
                                   "Total B", "Avg B",   "Max B",   "Diff (B\u2212A)", "Ratio (B/A)"};
    return tr(kNames[section]);
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kName: return tr("Op or device task name (device tasks without their trailing _N instance numbers)");
      case kDiff: return tr("Total time of B minus total time of A: positive means B spends more time");
      case kRatio:
        return tr("Total time of B divided by total time of A: above 1 B is slower, below 1 B is faster; "
                  "\"only A\" / \"only B\": the name occurs in one run only");
      case kMaxA: case kMaxB:
        return modeled_ ? tr("Longest call (modeled device rows keep no per-call time: the average)") : tr("Longest call");
      default: return section < kCallsB ? tr("Run A (the baseline)") : tr("Run B (compared with A)");
    }
  }
  return {};
}

// ---- PerfStepModel --------------------------------------------------------------------------

void PerfStepModel::setSteps(std::vector<PerfStepPair> steps) {
  beginResetModel();
  steps_ = std::move(steps);
  endResetModel();
}

const PerfStepPair* PerfStepModel::stepAt(int row) const {
  return row >= 0 && row < static_cast<int>(steps_.size()) ? &steps_[static_cast<size_t>(row)] : nullptr;
}

int PerfStepModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(steps_.size());
}
int PerfStepModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant PerfStepModel::data(const QModelIndex& index, int role) const {
  if (!validCell(this, index)) return {};
  const PerfStepPair& s = steps_[static_cast<size_t>(index.row())];
  const bool both = s.dur_a >= 0 && s.dur_b >= 0;
  const int64_t diff = both ? s.dur_b - s.dur_a : 0;
  if (role == kSortRole) {
    // A missing side sorts below every real value.
    switch (index.column()) {
      case kIndex: return static_cast<qlonglong>(s.index);
      case kStepA: return static_cast<qlonglong>(s.step_a);
      case kDurA: return static_cast<qlonglong>(s.dur_a);
      case kStepB: return static_cast<qlonglong>(s.step_b);
      case kDurB: return static_cast<qlonglong>(s.dur_b);
      case kDiff: return both ? QVariant(static_cast<qlonglong>(diff)) : QVariant(-1e300);
      case kRatio: return both && s.dur_a > 0 ? static_cast<double>(s.dur_b) / static_cast<double>(s.dur_a) : -1.0;
    }
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kIndex: return static_cast<qlonglong>(s.index);
      case kStepA: return s.dur_a >= 0 ? QVariant(static_cast<qlonglong>(s.step_a)) : QVariant(kDash);
      case kDurA: return s.dur_a >= 0 ? formatNs(s.dur_a) : kDash;
      case kStepB: return s.dur_b >= 0 ? QVariant(static_cast<qlonglong>(s.step_b)) : QVariant(kDash);
      case kDurB: return s.dur_b >= 0 ? formatNs(s.dur_b) : kDash;
      case kDiff: return both ? signedNs(diff) : kDash;
      case kRatio:
        if (!both) return s.dur_a >= 0 ? tr("only A") : tr("only B");
        return s.dur_a > 0 ? ratioText(static_cast<double>(s.dur_b) / static_cast<double>(s.dur_a)) : kDash;
    }
  }
  if (role == Qt::BackgroundRole) {
    PerfRowKind k = PerfRowKind::kSame;
    if (!both) k = s.dur_a >= 0 ? PerfRowKind::kOnlyA : PerfRowKind::kOnlyB;
    else if (diff != 0) k = diff > 0 ? PerfRowKind::kSlower : PerfRowKind::kFaster;
    const QColor c = perfRowTint(k);
    return c.isValid() ? QVariant(QBrush(c)) : QVariant();
  }
  if (role == Qt::ForegroundRole && index.column() == kDiff && diff != 0) {
    return QBrush(diff > 0 ? kSlowerText : kFasterText);
  }
  if (role == Qt::ToolTipRole && both && s.dur_a > 0) return ratioExplained(s.dur_a, s.dur_b);
  if (role == Qt::TextAlignmentRole) return kRight;
  return {};
}

QVariant PerfStepModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::BackgroundRole && (section == kStepA || section == kDurA || section == kStepB || section == kDurB)) {
    return QBrush(perfRowTint(section <= kDurA ? PerfRowKind::kOnlyA : PerfRowKind::kOnlyB));
  }
  if (role == Qt::DisplayRole) {
    static const char* kNames[] = {"#", "Step A", "Duration A", "Step B", "Duration B", "Diff (B\u2212A)", "Ratio (B/A)"};
    return tr(kNames[section]);
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kIndex: return tr("Position among each run's recorded steps: the n-th step of A beside the n-th of B");
      case kDiff: return tr("Step duration of B minus A: positive means B's step is slower");
      case kRatio: return tr("Step duration of B divided by A: above 1 B is slower");
      default: return {};
    }
  }
  return {};
}

// ---- PerfCompareView ------------------------------------------------------------------------

PerfCompareView::PerfCompareView(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel(this);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText(tr("Filter by name"));
  filter_->setClearButtonEnabled(true);
  show_ = new QComboBox(this);
  show_->addItem(tr("All rows"));
  show_->addItem(tr("Slower in B"));
  show_->addItem(tr("Faster in B"));
  show_->addItem(tr("Only in A"));
  show_->addItem(tr("Only in B"));
  show_->addItem(tr("In both runs"));
  reset_order_ = new QToolButton(this);
  reset_order_->setText(tr("Largest |diff| first"));
  reset_order_->setToolTip(tr("Back to the default order: largest absolute difference of total time first"));
  legend_ = new QLabel(this);
  legend_->setTextFormat(Qt::RichText);
  legend_->setText(tintSpan(PerfRowKind::kSlower, tr("slower in B")) + " " +
                   tintSpan(PerfRowKind::kFaster, tr("faster in B")) + " " +
                   tintSpan(PerfRowKind::kOnlyA, tr("only A")) + " " + tintSpan(PerfRowKind::kOnlyB, tr("only B")));

  host_model_ = new PerfTableModel(this);
  device_model_ = new PerfTableModel(this);
  step_model_ = new PerfStepModel(this);
  host_proxy_ = new TableProxy(this);
  host_proxy_->setSourceModel(host_model_);
  device_proxy_ = new TableProxy(this);
  device_proxy_->setSourceModel(device_model_);
  step_proxy_ = new TableProxy(this);
  step_proxy_->setSourceModel(step_model_);
  host_proxy_->setRowPredicate([this](int r) { return acceptsRow(host_model_, r); });
  device_proxy_->setRowPredicate([this](int r) { return acceptsRow(device_model_, r); });
  host_table_ = makeTable(host_proxy_);
  device_table_ = makeTable(device_proxy_);
  step_table_ = makeTable(step_proxy_);
  step_table_->sortByColumn(PerfStepModel::kIndex, Qt::AscendingOrder);
  for (QTableView* t : {host_table_, device_table_}) {
    // Long op names (autograd nodes, device kernels) keep both ends visible; the tooltip has all.
    t->setTextElideMode(Qt::ElideMiddle);
    t->horizontalHeader()->setSectionResizeMode(PerfTableModel::kName, QHeaderView::Stretch);
  }
  // Step columns are short numbers: at least a readable width each, the rest of the row empty.
  step_table_->horizontalHeader()->setMinimumSectionSize(64);

  tabs_ = new QTabWidget(this);
  tabs_->addTab(host_table_, QString());
  tabs_->addTab(device_table_, QString());
  tabs_->addTab(step_table_, QString());
  caption_ = new QLabel(this);
  caption_->setWordWrap(true);
  caption_->setText(tr("Diff = B \u2212 A of the total time. Ratio = B / A: above 1\u00d7 B is slower, below 1\u00d7 B "
                       "is faster. Click a header to sort by it; \u201cLargest |diff| first\u201d restores the "
                       "default order."));
  caption_->setToolTip(perfCompareRatioHelp());

  auto* bar = new QHBoxLayout();
  bar->setContentsMargins(0, 0, 0, 0);
  bar->addWidget(filter_, 1);
  bar->addWidget(show_);
  bar->addWidget(reset_order_);
  bar->addSpacing(12);
  bar->addWidget(legend_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 4, 6, 4);
  layout->addWidget(summary_);
  layout->addLayout(bar);
  layout->addWidget(tabs_, 1);
  layout->addWidget(caption_);

  connect(filter_, &QLineEdit::textChanged, this, [this] { applyFilter(); });
  connect(show_, QOverload<int>::of(&QComboBox::currentIndexChanged), this, [this] { applyFilter(); });
  connect(reset_order_, &QToolButton::clicked, this, [this] { resetOrder(); });
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int tab) {
    // The name filter and the row choice act on the op tables; the step table has no names.
    for (QWidget* w : std::initializer_list<QWidget*>{filter_, show_, reset_order_}) w->setEnabled(tab != kStepTab);
  });
  clear(tr("Choose two runs to compare their performance: host ops, device time and steps, B against A."));
}

QString perfCompareRatioHelp() {
  return QObject::tr("Ratio = B / A of the total time: 1.25\u00d7 means B takes 25 % longer than A (B is slower), "
                     "0.80\u00d7 means B takes 20 % less time (B is faster).");
}

QTableView* PerfCompareView::makeTable(QAbstractItemModel* proxy) {
  auto* t = new QTableView(this);
  t->setModel(proxy);
  t->setSortingEnabled(true);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->setWordWrap(false);
  t->verticalHeader()->hide();
  t->verticalHeader()->setDefaultSectionSize(20);
  t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  t->horizontalHeader()->setHighlightSections(false);
  // No sort column: the model's order (largest |diff| first) until a header is clicked.
  t->sortByColumn(-1, Qt::DescendingOrder);
  return t;
}

void PerfCompareView::resetOrder() {
  host_table_->sortByColumn(-1, Qt::DescendingOrder);
  device_table_->sortByColumn(-1, Qt::DescendingOrder);
}

bool PerfCompareView::acceptsRow(const PerfTableModel* m, int source_row) const {
  const PerfRow* r = m->rowAt(source_row);
  if (!r) return false;
  const PerfRowKind k = perfRowKind(*r);
  switch (show_->currentIndex()) {
    case kShowSlower: return k == PerfRowKind::kSlower;
    case kShowFaster: return k == PerfRowKind::kFaster;
    case kShowOnlyA: return k == PerfRowKind::kOnlyA;
    case kShowOnlyB: return k == PerfRowKind::kOnlyB;
    case kShowBoth: return k != PerfRowKind::kOnlyA && k != PerfRowKind::kOnlyB;
    default: return true;
  }
}

void PerfCompareView::applyFilter() {
  // setFilter re-evaluates the row predicate too (the Show choice).
  host_proxy_->setFilter(filter_->text(), {PerfTableModel::kName});
  device_proxy_->setFilter(filter_->text(), {PerfTableModel::kName});
  updateTabTitles();
}

void PerfCompareView::updateTabTitles() {
  auto count = [](const QAbstractItemModel* shown, const QAbstractItemModel* all) {
    return shown->rowCount() == all->rowCount() ? QString("%L1").arg(all->rowCount())
                                                : QString("%L1 / %L2").arg(shown->rowCount()).arg(all->rowCount());
  };
  tabs_->setTabText(kHostTab, tr("Host ops (%1)").arg(count(host_proxy_, host_model_)));
  QString device = tr("Device");
  if (result_.device_a == result_.device_b && result_.device_a == "real") device = tr("Device tasks");
  else if (result_.device_a == result_.device_b && result_.device_a == "model") device = tr("Device (modeled)");
  tabs_->setTabText(kDeviceTab, tr("%1 (%2)").arg(device, count(device_proxy_, device_model_)));
  tabs_->setTabText(kStepTab, tr("Steps (%L1)").arg(step_model_->rowCount()));
}

bool PerfCompareView::compareRuns(TraceReader& a, int64_t run_a, const QString& label_a, TraceReader& b,
                                  int64_t run_b, const QString& label_b) {
  auto r = comparePerf(a, run_a, b, run_b);
  if (!r.isOk()) {
    const QString msg = QString::fromStdString(r.status().message());
    clear(tr("Comparing %1 with %2 failed: %3").arg(label_a.toHtmlEscaped(), label_b.toHtmlEscaped(), msg.toHtmlEscaped()));
    emit errorOccurred(msg);
    return false;
  }
  result_ = std::move(r).value();
  const PerfCompareResult& res = result_;

  // Totals: host op time, device time (with what it is), steps (count and mean duration), and
  // how many names each table has on one side only.
  const QString pad = QStringLiteral(" style='padding-left:18px'");
  auto totalsRow = [&pad](const QString& what, const QString& a_text, const QString& b_text, int64_t a, int64_t b,
                          bool comparable, const QString& names) {
    QString diff = kDash, ratio = kDash;
    if (comparable) {
      const QString colour = b > a ? kSlowerText.name() : b < a ? kFasterText.name() : QStringLiteral("black");
      diff = QString("<span style='color:%1'>%2</span>").arg(colour, signedNs(b - a));
      if (a > 0) ratio = ratioText(static_cast<double>(b) / static_cast<double>(a)).toHtmlEscaped();  // "<0.01×"
    }
    return QString("<tr><td><b>%1</b></td><td align=right%7>%2</td><td align=right%7>%3</td><td align=right%7>%4</td>"
                   "<td align=right%7>%5</td><td%7>%6</td></tr>")
        .arg(what, a_text, b_text, diff, ratio, names, pad);
  };
  auto namesText = [](const std::vector<PerfRow>& rows) {
    int only_a = 0, only_b = 0;
    for (const PerfRow& r : rows) only_a += r.onlyA(), only_b += r.onlyB();
    if (rows.empty()) return QString();
    if (only_a == 0 && only_b == 0) return tr("%L1 names, all in both runs").arg(rows.size());
    return tr("%L1 names: %L2 in both, %3, %4")
        .arg(rows.size())
        .arg(static_cast<int>(rows.size()) - only_a - only_b)
        .arg(tintSpan(PerfRowKind::kOnlyA, tr("%L1 only A").arg(only_a)),
             tintSpan(PerfRowKind::kOnlyB, tr("%L1 only B").arg(only_b)));
  };
  int64_t step_sum_a = 0, step_sum_b = 0, steps_a = 0, steps_b = 0;
  for (const PerfStepPair& s : res.steps) {
    if (s.dur_a >= 0) step_sum_a += s.dur_a, ++steps_a;
    if (s.dur_b >= 0) step_sum_b += s.dur_b, ++steps_b;
  }
  const int64_t mean_a = steps_a ? step_sum_a / steps_a : 0, mean_b = steps_b ? step_sum_b / steps_b : 0;
  // The kind of device rows goes into the row's label when both sides agree, else into each cell.
  const bool same_kind = res.device_a == res.device_b;
  auto deviceText = [same_kind](int64_t total, const std::string& kind) {
    if (kind == "none") return tr("none");
    return same_kind ? formatNs(total) : QString("%1 (%2)").arg(formatNs(total), deviceKindText(kind));
  };
  auto stepText = [](int64_t n, int64_t mean) {
    if (n == 0) return tr("none");
    return (n == 1 ? tr("1 step") : tr("%L1 steps").arg(n)) + tr(", mean %1").arg(formatNs(mean));
  };
  QString html = tr("<b>A</b> = %1 &nbsp;&nbsp;vs&nbsp;&nbsp; <b>B</b> = %2")
                     .arg(label_a.toHtmlEscaped(), label_b.toHtmlEscaped());
  html += "<table cellspacing=0 cellpadding=1 style='margin-top:3px'>";
  html += QString("<tr><th></th><th align=right%1>A</th><th align=right%1>B</th><th align=right%1>%2</th>"
                  "<th align=right%1>%3</th><th></th></tr>")
              .arg(pad, tr("Diff (B\u2212A)"), tr("Ratio (B/A)"));
  html += totalsRow(tr("Host ops"), formatNs(res.host_total_a), formatNs(res.host_total_b), res.host_total_a,
                    res.host_total_b, true, namesText(res.host));
  html += totalsRow(same_kind && res.device_a != "none" ? tr("Device (%1)").arg(deviceKindText(res.device_a)) : tr("Device"),
                    deviceText(res.device_total_a, res.device_a), deviceText(res.device_total_b, res.device_b),
                    res.device_total_a, res.device_total_b, res.device_a != "none" && res.device_b != "none",
                    namesText(res.device));
  html += totalsRow(tr("Steps"), stepText(steps_a, mean_a), stepText(steps_b, mean_b), mean_a, mean_b,
                    steps_a > 0 && steps_b > 0, steps_a > 0 && steps_b > 0 ? tr("diff and ratio of the mean") : QString());
  html += "</table>";
  html += tr("<small>Host ops: the host time covered by ops (the sum of their self times).");
  if (!same_kind && res.device_a != "none" && res.device_b != "none") {
    html += tr(" A's device rows are %1, B's %2: their names rarely match, so most device rows are on one side only.")
                .arg(deviceKindText(res.device_a), deviceKindText(res.device_b));
  }
  html += "</small>";
  summary_->setText(html);
  summary_->setToolTip(perfCompareRatioHelp());

  host_model_->setRows(res.host);
  device_model_->setRows(res.device, res.device_a == "model" || res.device_b == "model");
  step_model_->setSteps(res.steps);
  resetOrder();
  step_table_->sortByColumn(PerfStepModel::kIndex, Qt::AscendingOrder);
  applyFilter();
  return true;
}

void PerfCompareView::clear(const QString& message) {
  result_ = {};
  host_model_->setRows({});
  device_model_->setRows({});
  step_model_->setSteps({});
  summary_->setText(message);
  summary_->setToolTip(QString());
  updateTabTitles();
}

}  // namespace npuscope::gui
