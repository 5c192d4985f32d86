#include "npuscope/gui/training_view.h"
#include "npuscope/analysis/overflow_text.h"
#include "npuscope/analysis/step_summary.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <cmath>

#include "npuscope/gui/models.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/units.h"

using namespace QtCharts;

namespace npuscope::gui {

namespace {

// A chart view that reports the x value (step) of a left click.
class ClickChartView : public QChartView {
 public:
  ClickChartView(QChart* chart, std::function<void(double)> on_click, QWidget* parent)
      : QChartView(chart, parent), on_click_(std::move(on_click)) {
    setRenderHint(QPainter::Antialiasing);
  }

 protected:
  void mousePressEvent(QMouseEvent* e) override {
    if (e->button() == Qt::LeftButton && chart()->plotArea().contains(e->pos())) {
      on_click_(chart()->mapToValue(e->pos()).x());
    }
    QChartView::mousePressEvent(e);
  }

 private:
  std::function<void(double)> on_click_;
};

QChart* makeChart(const QString& title) {
  auto* c = new QChart();
  c->setTitle(title);
  c->legend()->setAlignment(Qt::AlignTop);
  c->setMargins(QMargins(4, 2, 4, 2));
  c->setBackgroundRoundness(0);
  return c;
}

}  // namespace

TrainingView::TrainingView(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  loss_view_ = new ClickChartView(lossChart(), [this](double x) { pick(x); }, this);
  scale_view_ = new ClickChartView(scaleChart(), [this](double x) { pick(x); }, this);
  for (QScatterSeries* marks : {overflow_marks_, skipped_marks_, scale_marks_}) {
    connect(marks, &QScatterSeries::clicked, this, [this](const QPointF& p) { pick(p.x()); });
  }
  buildStepTable();
  QWidget* side = sidePanel();

  auto* charts = new QSplitter(Qt::Vertical, this);
  charts->addWidget(loss_view_);
  charts->addWidget(scale_view_);
  charts->addWidget(step_table_);
  charts->setSizes({300, 240, 180});
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(charts);
  split->addWidget(side);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(split);

  connect(doc_, &TraceDocument::runLoaded, this, [this] { refresh(); });
}

// Loss per step, with markers at overflows and skipped steps.
QChart* TrainingView::lossChart() {
  auto* loss_chart = makeChart(tr("Loss per step"));
  loss_ = new QLineSeries();
  loss_->setName(tr("loss"));
  loss_->setPen(QPen(QColor(0x2f, 0x6f, 0xb5), 1.6));
  overflow_marks_ = new QScatterSeries();
  overflow_marks_->setName(tr("overflow"));
  overflow_marks_->setColor(QColor(0xd6, 0x45, 0x3d));
  overflow_marks_->setBorderColor(QColor(0x8a, 0x1c, 0x14));
  overflow_marks_->setMarkerSize(11);
  skipped_marks_ = new QScatterSeries();
  skipped_marks_->setName(tr("skipped step"));
  skipped_marks_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  skipped_marks_->setColor(QColor(0xf0, 0x9a, 0x1a));
  skipped_marks_->setBorderColor(QColor(0x8a, 0x55, 0x00));
  skipped_marks_->setMarkerSize(7);
  loss_chart->addSeries(loss_);
  loss_chart->addSeries(overflow_marks_);
  loss_chart->addSeries(skipped_marks_);
  loss_x_ = new QValueAxis();
  loss_x_->setTitleText(tr("step"));
  loss_x_->setLabelFormat("%d");
  loss_y_ = new QValueAxis();
  loss_y_->setTitleText(tr("loss"));
  loss_chart->addAxis(loss_x_, Qt::AlignBottom);
  loss_chart->addAxis(loss_y_, Qt::AlignLeft);
  for (auto* s : std::initializer_list<QAbstractSeries*>{loss_, overflow_marks_, skipped_marks_}) {
    s->attachAxis(loss_x_);
    s->attachAxis(loss_y_);
  }
  return loss_chart;
}

// The loss scale per step on a log2 axis, with markers at overflows.
QChart* TrainingView::scaleChart() {
  auto* scale_chart = makeChart(tr("Loss scale per step (log\u2082 axis)"));
  scale_ = new QLineSeries();
  scale_->setName(tr("loss scale"));
  scale_->setPen(QPen(QColor(0x2a, 0x7a, 0x4b), 1.6));
  scale_marks_ = new QScatterSeries();
  scale_marks_->setName(tr("overflow"));
  scale_marks_->setColor(QColor(0xd6, 0x45, 0x3d));
  scale_marks_->setBorderColor(QColor(0x8a, 0x1c, 0x14));
  scale_marks_->setMarkerSize(11);
  scale_chart->addSeries(scale_);
  scale_chart->addSeries(scale_marks_);
  scale_x_ = new QValueAxis();
  scale_x_->setTitleText(tr("step"));
  scale_x_->setLabelFormat("%d");
  scale_y_ = new QLogValueAxis();
  scale_y_->setBase(2);
  scale_y_->setLabelFormat("%g");
  scale_y_->setTitleText(tr("scale"));
  scale_chart->addAxis(scale_x_, Qt::AlignBottom);
  scale_chart->addAxis(scale_y_, Qt::AlignLeft);
  for (auto* s : std::initializer_list<QAbstractSeries*>{scale_, scale_marks_}) {
    s->attachAxis(scale_x_);
    s->attachAxis(scale_y_);
  }
  return scale_chart;
}

// The steps as a sortable table: a click shows a step, a double click opens it in the timeline.
void TrainingView::buildStepTable() {
  steps_ = new StepTableModel(this);
  auto* step_proxy = new TableProxy(this);
  step_proxy->setSourceModel(steps_);
  step_table_ = new QTableView(this);
  step_table_->setModel(step_proxy);
  step_table_->setSortingEnabled(true);
  step_table_->sortByColumn(StepTableModel::kStep, Qt::AscendingOrder);
  step_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  step_table_->setSelectionMode(QAbstractItemView::SingleSelection);
  step_table_->verticalHeader()->hide();
  step_table_->verticalHeader()->setDefaultSectionSize(20);
  step_table_->horizontalHeader()->setStretchLastSection(true);
  connect(step_table_, &QTableView::clicked, this, [this, step_proxy](const QModelIndex& i) {
    const StepRow* s = steps_->stepAt(step_proxy->mapToSource(i).row());
    if (s) showStep(s->step);
  });
  connect(step_table_, &QTableView::doubleClicked, this, [this, step_proxy](const QModelIndex& i) {
    const StepRow* s = steps_->stepAt(step_proxy->mapToSource(i).row());
    if (s) emit stepActivated(s->step);
  });
}

// The side panel: the overflow cost, the shown step, its overflow events and dumped tensors.
QWidget* TrainingView::sidePanel() {
  cost_label_ = new QLabel(this);
  cost_label_->setWordWrap(true);
  cost_label_->setTextFormat(Qt::RichText);
  step_label_ = new QLabel(tr("Click a marker, a point or a step row."), this);
  step_label_->setWordWrap(true);
  step_label_->setTextFormat(Qt::RichText);
  connect(step_label_, &QLabel::linkActivated, this, [this](const QString& link) {
    if (link.startsWith("op:")) emit opActivated(link.mid(3).toLongLong());
  });
  auto* open = new QPushButton(tr("Open step in timeline"), this);
  connect(open, &QPushButton::clicked, this, [this] {
    if (shown_ >= 0) emit stepActivated(shown_);
  });
  overflow_ = new OverflowModel(this);
  auto* ov_table = new QTableView(this);
  ov_table->setModel(overflow_);
  ov_table->verticalHeader()->hide();
  ov_table->verticalHeader()->setDefaultSectionSize(20);
  ov_table->horizontalHeader()->setStretchLastSection(true);
  connect(ov_table, &QTableView::activated, this, [this](const QModelIndex& i) {
    const OverflowEventRow* e = overflow_->eventAt(i.row());
    if (e && e->op_id >= 0) emit opActivated(e->op_id);
  });
  dumps_ = new DumpTableModel(this);
  auto* dump_table = new QTableView(this);
  dump_table->setModel(dumps_);
  dump_table->verticalHeader()->hide();
  dump_table->verticalHeader()->setDefaultSectionSize(20);
  dump_table->setColumnHidden(DumpTableModel::kStep, true);
  dump_table->setColumnHidden(DumpTableModel::kOpType, true);
  dump_table->setColumnHidden(DumpTableModel::kBytes, true);
  dump_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  ov_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  ov_table->horizontalHeader()->setStretchLastSection(true);

  auto* side = new QWidget(this);
  auto* sl = new QVBoxLayout(side);
  sl->setContentsMargins(4, 4, 4, 4);
  sl->addWidget(cost_label_);
  sl->addWidget(step_label_);
  sl->addWidget(open);
  sl->addWidget(new QLabel(tr("<b>Overflow events</b>"), side));
  sl->addWidget(ov_table, 1);
  sl->addWidget(new QLabel(tr("<b>Dumped tensors</b>"), side));
  sl->addWidget(dump_table, 2);
  return side;
}

void TrainingView::refresh() {
  const TimelineData* d = doc_->timeline();
  std::vector<StepRow> steps = d ? d->steps() : std::vector<StepRow>();
  QVector<QPointF> loss, scale, over, skip, scale_over;
  double lo = 1e300, hi = -1e300, slo = 1e300, shi = -1e300;
  for (const StepRow& s : steps) {
    const double x = static_cast<double>(s.step);
    if (s.loss && std::isfinite(*s.loss)) {
      loss << QPointF(x, *s.loss);
      lo = std::min(lo, *s.loss);
      hi = std::max(hi, *s.loss);
    }
    if (s.loss_scale && *s.loss_scale > 0 && std::isfinite(*s.loss_scale)) {
      scale << QPointF(x, *s.loss_scale);
      slo = std::min(slo, *s.loss_scale);
      shi = std::max(shi, *s.loss_scale);
      if (s.overflow) scale_over << QPointF(x, *s.loss_scale);
    }
  }
  if (lo > hi) lo = 0, hi = 1;
  // Overflow markers sit on the loss curve, skipped-step markers on a row along the bottom, so
  // a step that is both shows both.
  const double pad = (hi - lo) * 0.12 + 1e-6;
  for (const StepRow& s : steps) {
    const double y = s.loss && std::isfinite(*s.loss) ? *s.loss : hi;
    if (s.overflow) over << QPointF(static_cast<double>(s.step), y);
    if (s.skipped) skip << QPointF(static_cast<double>(s.step), lo - pad * 0.6);
  }
  loss_->replace(loss);
  overflow_marks_->replace(over);
  skipped_marks_->replace(skip);
  scale_->replace(scale);
  scale_marks_->replace(scale_over);
  const double x0 = steps.empty() ? 0 : static_cast<double>(steps.front().step);
  const double x1 = steps.empty() ? 1 : std::max(x0 + 1, static_cast<double>(steps.back().step));
  loss_x_->setRange(x0 - 0.5, x1 + 0.5);
  scale_x_->setRange(x0 - 0.5, x1 + 0.5);
  loss_y_->setRange(lo - pad, hi + pad);
  const double span = x1 - x0;
  double interval = std::pow(10.0, std::floor(std::log10(std::max(1.0, span / 6))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (interval * m) <= 8) {
      interval *= m;
      break;
    }
  }
  for (QValueAxis* a : {loss_x_, scale_x_}) {
    a->setTickType(QValueAxis::TicksDynamic);
    a->setTickAnchor(0);
    a->setTickInterval(interval);
  }
  if (slo > shi) slo = 1, shi = 2;
  scale_y_->setRange(slo / 2, shi * 2);
  {
    // The cost of overflow, beside compute: steps whose work was thrown away.
    const StepSummary summary = summarizeSteps(steps);
    const int64_t total = summary.total_ns, lost = summary.skipped_ns, skipped = summary.skipped_steps;
    cost_label_->setText(
        steps.empty() ? QString()
        : skipped == 0
            ? tr("No step skipped for overflow (%L1 steps, %2).").arg(steps.size()).arg(formatNs(total))
            : tr("<b>Overflow cost:</b> %L1 of %L2 steps skipped, <span style='color:#b36b00'><b>%3</b></span> of %4 "
                 "step time (%5 %) thrown away.")
                  .arg(skipped)
                  .arg(steps.size())
                  .arg(formatNs(lost))
                  .arg(formatNs(total))
                  .arg(100.0 * static_cast<double>(lost) / static_cast<double>(std::max<int64_t>(total, 1)), 0, 'f', 1));
  }
  steps_->setSteps(std::move(steps));
  if (shown_ >= 0 && d && d->stepByIndex(shown_)) showStep(shown_);
  else {
    shown_ = -1;
    overflow_->setEvents(doc_->overflowEvents());
    dumps_->setDumps({});
    step_label_->setText(tr("%L1 overflow events in this run. Click a marker, a point or a step row.")
                             .arg(doc_->overflowEvents().size()));
  }
}

QString TrainingView::overflowCostText() const { return cost_label_->text(); }

void TrainingView::pick(double x) {
  const TimelineData* d = doc_->timeline();
  if (!d || d->steps().empty()) return;
  // The nearest recorded step.
  const auto& steps = d->steps();
  const StepRow* best = &steps.front();
  for (const StepRow& s : steps) {
    if (std::fabs(static_cast<double>(s.step) - x) < std::fabs(static_cast<double>(best->step) - x)) best = &s;
  }
  showStep(best->step);
  emit stepActivated(best->step);
}

void TrainingView::showStep(int64_t step) {
  shown_ = step;
  const TimelineData* d = doc_->timeline();
  const StepRow* s = d ? d->stepByIndex(step) : nullptr;
  std::vector<OverflowEventRow> events;
  for (const auto& e : doc_->overflowEvents()) {
    if (e.step == step) events.push_back(e);
  }
  std::vector<TensorDumpInfo> dumps;
  for (const auto& t : doc_->dumps()) {
    if (t.step == step) dumps.push_back(t);
  }
  if (s) {
    step_label_->setText(
        tr("<b>Step %1</b> \u2014 %2, loss %3, loss scale %4%5%6")
            .arg(step)
            .arg(formatNs(s->dur_ns))
            .arg(s->loss ? formatValue(*s->loss) : QStringLiteral("\u2013"))
            .arg(s->loss_scale ? formatValue(*s->loss_scale) : QStringLiteral("\u2013"))
            .arg(s->overflow ? tr(", <span style='color:#b3261e'><b>overflow</b></span>") : QString())
            .arg(s->skipped ? tr(", <span style='color:#b36b00'><b>optimizer step skipped</b></span>") : QString()));
  } else {
    step_label_->setText(tr("<b>Step %1</b> (not recorded)").arg(step));
  }
  for (const auto& e : events) {
    if (e.source != "first_op") continue;
    const QString op = QString::fromStdString(e.op_name).toHtmlEscaped();
    step_label_->setText(step_label_->text() +
                         tr("<br>First overflowing op: %1")
                             .arg(e.op_id >= 0 ? QString("<a href='op:%1'>%2 #%1</a>").arg(e.op_id).arg(op) : op) +
                         "<br><small>" + QString::fromStdString(describeOverflowEvent(e)).toHtmlEscaped() + "</small>");
    break;
  }
  overflow_->setEvents(std::move(events));
  dumps_->setDumps(std::move(dumps));
  const int row = steps_->rowOfStep(step);
  if (row >= 0) {
    auto* proxy = static_cast<QSortFilterProxyModel*>(step_table_->model());
    const QModelIndex i = proxy->mapFromSource(steps_->index(row, 0));
    step_table_->setCurrentIndex(i);
    step_table_->scrollTo(i);
  }
}

}  // namespace npuscope::gui
