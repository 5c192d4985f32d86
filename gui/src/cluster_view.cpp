#include "npuscope/gui/cluster_view.h"

#include <QFileInfo>
#include <QHeaderView>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>
#include <limits>

#include "npuscope/gui/units.h"

namespace npuscope::gui {

namespace {

const QColor kText(0x22, 0x2a, 0x35);
const QColor kMuted(0x6b, 0x75, 0x82);
const QColor kComputing(0x4a, 0x7f, 0xc1);
const QColor kWaiting(0xf6, 0xdc, 0xb0);
const QColor kRunning(0xd9, 0x80, 0x1a);
const QColor kSlow(0xb3, 0x26, 0x1e);

QString ms(int64_t ns) { return QString::number(static_cast<double>(ns) / 1e6, 'f', 3); }

// "allreduce (group 1, #12)"; an imported rank's: "allreduce (#4 by order)".
QString collectiveName(const CollectiveRow& r) {
  const QString kind = QString::fromStdString(r.kind);
  if (r.group < 0) return QObject::tr("%1 (#%2 by order)").arg(kind).arg(r.seq);
  return QObject::tr("%1 (group %2, #%3)").arg(kind).arg(r.group).arg(r.seq);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ClusterTimeline

ClusterTimeline::ClusterTimeline(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAutoFillBackground(true);
  QPalette pal = palette();
  pal.setColor(QPalette::Window, Qt::white);
  setPalette(pal);
}

void ClusterTimeline::setReport(const cluster::Report* report) {
  report_ = report;
  has_selection_ = false;
  begin_ = std::numeric_limits<int64_t>::max();
  end_ = std::numeric_limits<int64_t>::min();
  if (report_ != nullptr) {
    for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) {
      const cluster::Rank& r = report_->ranks[i];
      for (const cluster::StepActivity& a : r.activity) {
        begin_ = std::min(begin_, wallOf(i, a.start_ns));
        end_ = std::max(end_, wallOf(i, a.start_ns + a.dur_ns));
      }
      for (const CollectiveRow& c : r.collective_rows) {
        const int64_t w = wallOf(i, c.start_ns);
        begin_ = std::min(begin_, w);
        end_ = std::max(end_, c.end_ns >= 0 ? wallOf(i, c.end_ns) : w);
      }
    }
  }
  if (begin_ >= end_) {
    begin_ = 0;
    end_ = 1;
  }
  updateGeometry();
  setMinimumHeight(sizeHint().height());
  fitAll();
}

int64_t ClusterTimeline::wallOf(int rank, int64_t t) const { return t + report_->ranks[rank].wall_offset_ns; }

double ClusterTimeline::xAt(int64_t wall) const {
  return kGutter + static_cast<double>(wall - view_begin_) / ns_per_px_;
}

int64_t ClusterTimeline::wallAt(double x) const {
  return view_begin_ + static_cast<int64_t>(std::llround((x - kGutter) * ns_per_px_));
}

void ClusterTimeline::setView(int64_t begin_wall, double ns_per_px) {
  ns_per_px_ = std::max(0.01, ns_per_px);
  view_begin_ = begin_wall;
  update();
}

void ClusterTimeline::zoomAt(double factor, double x) {
  const int64_t anchor = wallAt(x);
  const double scale = std::clamp(ns_per_px_ * factor, 0.01, static_cast<double>(end_ - begin_));
  setView(anchor - static_cast<int64_t>(std::llround((x - kGutter) * scale)), scale);
}

void ClusterTimeline::panPixels(double dx) { setView(view_begin_ + static_cast<int64_t>(dx * ns_per_px_), ns_per_px_); }

void ClusterTimeline::fitWindow(int64_t begin_wall, int64_t end_wall) {
  const int64_t span = std::max<int64_t>(1, end_wall - begin_wall);
  const int64_t pad = span / 50;
  setView(begin_wall - pad, static_cast<double>(span + 2 * pad) / plotWidth());
}

void ClusterTimeline::fitAll() { fitWindow(begin_, end_); }

bool ClusterTimeline::fitStep(int64_t step) {
  if (report_ == nullptr) return false;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) {
    for (const cluster::StepActivity& a : report_->ranks[i].activity) {
      if (a.step != step) continue;
      lo = std::min(lo, wallOf(i, a.start_ns));
      hi = std::max(hi, wallOf(i, a.start_ns + a.dur_ns));
    }
  }
  if (lo >= hi) return false;
  fitWindow(lo, hi);
  return true;
}

int ClusterTimeline::groupTop(int rank) const { return kRuler + rank * (kTitle + kLanes * kLane + kGap); }

int ClusterTimeline::laneTop(int rank, Lane lane) const { return groupTop(rank) + kTitle + lane * kLane; }

QSize ClusterTimeline::sizeHint() const {
  const int n = report_ ? static_cast<int>(report_->ranks.size()) : 0;
  return {1000, groupTop(n) + 4};
}

const CollectiveRow& ClusterTimeline::row(CollectiveRef c) const {
  return report_->ranks[c.rank].collective_rows[c.index];
}

CollectiveKey ClusterTimeline::keyOf(CollectiveRef c) const {
  if (!c.valid() || report_ == nullptr) return {};
  const CollectiveRow& r = row(c);
  return {r.group, r.seq};
}

std::pair<int64_t, int> ClusterTimeline::lastArrival(CollectiveKey key) const {
  if (report_ == nullptr) return {-1, -1};
  auto it = report_->last_arrival.find({key.group, key.seq});
  return it == report_->last_arrival.end() ? std::make_pair(int64_t{-1}, -1)
                                           : std::make_pair(it->second.wall_ns, it->second.rank_index);
}

QRectF ClusterTimeline::collectiveRect(CollectiveRef c) const {
  const CollectiveRow& r = row(c);
  const double x0 = xAt(wallOf(c.rank, r.start_ns));
  const double x1 = r.end_ns >= 0 ? xAt(wallOf(c.rank, r.end_ns)) : x0;
  return QRectF(x0, laneTop(c.rank, kCommunicationLane) + 2, std::max(2.0, x1 - x0), kLane - 4);
}

CollectiveRef ClusterTimeline::collectiveAt(const QPoint& p) const {
  if (report_ == nullptr || p.x() < kGutter) return {};
  for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) {
    const int top = laneTop(i, kCommunicationLane);
    if (p.y() < top || p.y() >= top + kLane) continue;
    // The collective under the pointer, else the nearest within 3 px (thin slices).
    CollectiveRef best;
    double best_d = 3.5;
    const auto& rows = report_->ranks[i].collective_rows;
    for (int k = 0; k < static_cast<int>(rows.size()); ++k) {
      const QRectF r = collectiveRect({i, k});
      const double d = p.x() < r.left() ? r.left() - p.x() : (p.x() > r.right() ? p.x() - r.right() : 0);
      if (d < best_d) {
        best = {i, k};
        best_d = d;
      }
    }
    return best;
  }
  return {};
}

int64_t ClusterTimeline::stepAt(const QPoint& p) const {
  if (report_ == nullptr || p.x() < kGutter) return -1;
  for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) {
    const int top = laneTop(i, kStepsLane);
    if (p.y() < top || p.y() >= top + kLane) continue;
    const int64_t t = wallAt(p.x());
    for (const cluster::StepActivity& a : report_->ranks[i].activity) {
      if (t >= wallOf(i, a.start_ns) && t < wallOf(i, a.start_ns + a.dur_ns)) return a.step;
    }
  }
  return -1;
}

bool ClusterTimeline::selectCollective(CollectiveKey key) {
  if (report_ == nullptr || report_->last_arrival.count({key.group, key.seq}) == 0) return false;
  has_selection_ = true;
  selected_ = key;
  update();
  emit collectiveSelected(key.group, key.seq);
  return true;
}

void ClusterTimeline::clearSelection() {
  if (!has_selection_) return;
  has_selection_ = false;
  update();
  emit selectionCleared();
}

std::vector<CollectiveRef> ClusterTimeline::selectedRows() const {
  std::vector<CollectiveRef> out;
  if (!has_selection_ || report_ == nullptr) return out;
  for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) {
    const auto& rows = report_->ranks[i].collective_rows;
    for (int k = 0; k < static_cast<int>(rows.size()); ++k) {
      if (rows[k].group == selected_.group && rows[k].seq == selected_.seq) out.push_back({i, k});
    }
  }
  return out;
}

void ClusterTimeline::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (report_ == nullptr || report_->ranks.empty()) return;
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  p.setFont(small);
  // Ruler and step-aligned grid.
  const int64_t tick = rulerTick(ns_per_px_);
  p.setPen(QColor(0xee, 0xf0, 0xf3));
  const int64_t first = (view_begin_ - begin_) / tick * tick + begin_;
  for (int64_t t = first; xAt(t) < width(); t += tick) {
    if (xAt(t) >= kGutter) p.drawLine(QPointF(xAt(t), kRuler), QPointF(xAt(t), height()));
  }
  p.setPen(kMuted);
  for (int64_t t = first; xAt(t) < width(); t += tick) {
    const double x = xAt(t);
    if (x < kGutter) continue;
    p.drawLine(QPointF(x, kRuler - 6), QPointF(x, kRuler));
    p.drawText(QRectF(x + 3, 0, 120, kRuler - 2), Qt::AlignVCenter | Qt::AlignLeft, formatOffset(t, begin_, tick));
  }
  p.drawText(QRect(8, 0, kGutter - 12, kRuler), Qt::AlignVCenter | Qt::AlignLeft, tr("wall clock"));
  for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) paintRank(p, i);
  // The selected collective: its last arrival, across the groups.
  if (has_selection_) {
    const auto [wall, rank] = lastArrival(selected_);
    const double x = xAt(wall);
    if (x >= kGutter && x <= width()) {
      p.setPen(QPen(kSlow, 1.5, Qt::DashLine));
      p.drawLine(QPointF(x, kRuler), QPointF(x, height()));
      const QString label = tr("last arrival: rank %1").arg(report_->ranks[rank].rank);
      const QFontMetrics fm(p.font());
      QRectF box(x + 4, 3, fm.horizontalAdvance(label) + 8, kRuler - 6);
      if (box.right() > width()) box.moveRight(x - 4);
      p.fillRect(box, kSlow);
      p.setPen(Qt::white);
      p.drawText(box, Qt::AlignCenter, label);
    }
  }
  p.setPen(QColor(0xd0, 0xd5, 0xdc));
  p.drawLine(kGutter - 1, kRuler, kGutter - 1, height());
  p.drawLine(0, kRuler - 1, width(), kRuler - 1);
}

void ClusterTimeline::paintRank(QPainter& p, int i) {
  const cluster::Rank& r = report_->ranks[i];
  const bool slow = report_->slow.found && report_->slow.rank == r.rank;
  const int top = groupTop(i);
  p.fillRect(QRect(0, top, width(), kTitle), QColor(0xee, 0xf1, 0xf5));
  QFont bold = p.font();
  bold.setBold(true);
  const QFont normal = p.font();
  p.setFont(bold);
  p.setPen(slow ? kSlow : kText);
  const QString title = tr("rank %1").arg(r.rank) + (slow ? tr("  (slow rank)") : QString());
  p.drawText(QRect(8, top, width() - 16, kTitle), Qt::AlignVCenter | Qt::AlignLeft, title);
  p.setFont(normal);
  p.setPen(kMuted);
  p.drawText(QRect(kGutter + 4, top, width() - kGutter - 8, kTitle), Qt::AlignVCenter | Qt::AlignLeft,
             tr("%1 \u00b7 run #%2 \u00b7 %3").arg(QFileInfo(QString::fromStdString(r.path)).fileName()).arg(r.run.id)
                 .arg(QString::fromStdString(r.run.status)));
  const QString names[kLanes] = {tr("steps"), tr("computing"), tr("communication")};
  for (int l = 0; l < kLanes; ++l) {
    p.setPen(kMuted);
    p.drawText(QRect(18, laneTop(i, Lane(l)), kGutter - 22, kLane), Qt::AlignVCenter | Qt::AlignLeft, names[l]);
  }
  p.save();
  p.setClipRect(QRect(kGutter, top, width() - kGutter, kTitle + kLanes * kLane));
  const QFontMetrics fm(p.font());
  // Steps.
  const int sy = laneTop(i, kStepsLane);
  for (const cluster::StepActivity& a : r.activity) {
    const double x0 = xAt(wallOf(i, a.start_ns)), x1 = xAt(wallOf(i, a.start_ns + a.dur_ns));
    if (x1 < kGutter || x0 > width()) continue;
    const bool worst = slow && a.step == report_->slow.step;
    const QRectF box(x0, sy + 2, std::max(1.0, x1 - x0 - 1), kLane - 4);
    p.fillRect(box, worst ? QColor(0xf2, 0xb8, 0xb2) : (a.step % 2 ? QColor(0xc9, 0xd6, 0xe6) : QColor(0xdb, 0xe4, 0xef)));
    const QString label = tr("#%1").arg(a.step);
    if (box.width() > fm.horizontalAdvance(label) + 6) {
      p.setPen(worst ? kSlow : kText);
      p.drawText(box.adjusted(3, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft, label);
    }
  }
  // Computing: each step's united intervals, sub-pixel ones merged.
  const int cy = laneTop(i, kComputingLane);
  double run_x0 = -1, run_x1 = -1;
  auto flush = [&] {
    if (run_x1 > run_x0) p.fillRect(QRectF(run_x0, cy + 3, std::max(1.0, run_x1 - run_x0), kLane - 6), kComputing);
  };
  for (const cluster::StepActivity& a : r.activity) {
    for (const cluster::Interval& c : a.computing) {
      const double x0 = xAt(wallOf(i, c.begin_ns)), x1 = xAt(wallOf(i, c.end_ns));
      if (x1 < kGutter || x0 > width()) continue;
      if (run_x1 >= 0 && x0 <= run_x1 + 1) {
        run_x1 = std::max(run_x1, x1);
      } else {
        flush();
        run_x0 = x0;
        run_x1 = std::max(x1, x0 + 1);
      }
    }
  }
  flush();
  // Communication: waiting for the last arrival, then running.
  for (int k = 0; k < static_cast<int>(r.collective_rows.size()); ++k) {
    const CollectiveRow& c = r.collective_rows[k];
    const QRectF box = collectiveRect({i, k});
    if (box.right() < kGutter || box.left() > width()) continue;
    const double xl = std::clamp(xAt(lastArrival({c.group, c.seq}).first), box.left(), box.right());
    if (c.end_ns < 0) {
      p.fillRect(QRectF(box.left(), box.top(), 2, box.height()), kSlow);
    } else {
      if (xl > box.left()) p.fillRect(QRectF(box.left(), box.top(), xl - box.left(), box.height()), kWaiting);
      p.fillRect(QRectF(xl, box.top(), std::max(1.0, box.right() - xl), box.height()), kRunning);
    }
    const bool sel = has_selection_ && selected_ == CollectiveKey{c.group, c.seq};
    const QString label = QString::fromStdString(c.kind);
    if (box.width() > fm.horizontalAdvance(label) + 6) {
      p.setPen(kText);
      p.drawText(box.adjusted(3, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft, label);
    }
    if (sel) {
      p.setPen(QPen(QColor(0x10, 0x10, 0x10), 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(box.adjusted(-1, -1, 1, 1));
    }
  }
  p.restore();
}

QString ClusterTimeline::tooltipAt(const QPoint& pos) const {
  const CollectiveRef c = collectiveAt(pos);
  if (c.valid()) {
    const CollectiveRow& r = row(c);
    const auto [last, last_rank] = lastArrival({r.group, r.seq});
    const int64_t start = wallOf(c.rank, r.start_ns);
    QString s = tr("<b>%1</b> on rank %2<br>%3 %4")
                    .arg(collectiveName(r).toHtmlEscaped()).arg(report_->ranks[c.rank].rank)
                    .arg(formatBytes(r.bytes), QString::fromStdString(r.dtype));
    s += tr("<br>enqueued at %1").arg(formatOffset(start, begin_, 1000));
    if (r.end_ns >= 0) {
      const int64_t wait = std::clamp<int64_t>(last - start, 0, r.end_ns - r.start_ns);
      s += tr(", completed after %1<br>waited %2 for rank %3, the last to arrive")
               .arg(formatNs(r.end_ns - r.start_ns), formatNs(wait)).arg(report_->ranks[last_rank].rank);
    } else {
      s += tr("<br>never completed");
    }
    return s;
  }
  const int64_t step = stepAt(pos);
  if (step >= 0) {
    for (int i = 0; i < static_cast<int>(report_->ranks.size()); ++i) {
      if (pos.y() < laneTop(i, kStepsLane) || pos.y() >= laneTop(i, kStepsLane) + kLane) continue;
      for (const cluster::StepBreakdown& b : report_->ranks[i].steps) {
        if (b.step != step) continue;
        return tr("<b>step %1</b> on rank %2: %3<br>computing %4, communication not overlapped %5, free %6<br>"
                  "click to fit the step on every rank")
            .arg(step).arg(report_->ranks[i].rank)
            .arg(formatNs(b.step_ns), formatNs(b.computing), formatNs(b.not_overlapped), formatNs(b.free));
      }
    }
  }
  return {};
}

bool ClusterTimeline::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && report_ != nullptr) {
    auto* h = static_cast<QHelpEvent*>(e);
    const QString tip = tooltipAt(h->pos());
    if (tip.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(h->globalPos(), tip, this);
    return true;
  }
  return QWidget::event(e);
}

void ClusterTimeline::mousePressEvent(QMouseEvent* e) {
  press_pos_ = e->pos();
  press_view_ = view_begin_;
  dragging_ = false;
}

void ClusterTimeline::mouseMoveEvent(QMouseEvent* e) {
  if (!(e->buttons() & Qt::LeftButton)) return;
  if (!dragging_ && (e->pos() - press_pos_).manhattanLength() > 3) dragging_ = true;
  if (dragging_) setView(press_view_ - static_cast<int64_t>((e->pos().x() - press_pos_.x()) * ns_per_px_), ns_per_px_);
}

void ClusterTimeline::mouseReleaseEvent(QMouseEvent* e) {
  if (dragging_ || report_ == nullptr) {
    dragging_ = false;
    return;
  }
  const CollectiveRef c = collectiveAt(e->pos());
  if (c.valid()) {
    selectCollective(keyOf(c));
    return;
  }
  const int64_t step = stepAt(e->pos());
  if (step >= 0) {
    fitStep(step);
    emit stepClicked(step);
    return;
  }
  clearSelection();
}

void ClusterTimeline::wheelEvent(QWheelEvent* e) {
  if (!(e->modifiers() & Qt::ControlModifier)) {
    e->ignore();  // the scroll area scrolls the ranks
    return;
  }
  zoomAt(std::pow(0.85, e->angleDelta().y() / 120.0), std::max<double>(e->position().x(), kGutter));
  e->accept();
}

void ClusterTimeline::keyPressEvent(QKeyEvent* e) {
  const double mid = kGutter + plotWidth() / 2.0;
  switch (e->key()) {
    case Qt::Key_W: zoomAt(0.8, mid); break;
    case Qt::Key_S: zoomAt(1.25, mid); break;
    case Qt::Key_A: panPixels(-plotWidth() * 0.15); break;
    case Qt::Key_D: panPixels(plotWidth() * 0.15); break;
    case Qt::Key_0: fitAll(); break;
    case Qt::Key_Escape: clearSelection(); break;
    default: QWidget::keyPressEvent(e); return;
  }
}

void ClusterTimeline::resizeEvent(QResizeEvent* e) {
  const int64_t span = static_cast<int64_t>(ns_per_px_ * std::max(1, e->oldSize().width() - kGutter));
  QWidget::resizeEvent(e);
  if (e->oldSize().width() > kGutter) setView(view_begin_, static_cast<double>(span) / plotWidth());
  else if (report_ != nullptr) fitAll();
}

// ---------------------------------------------------------------------------------------------
// ClusterView

namespace {

QTableWidget* makeTable(QWidget* parent, const QStringList& headers) {
  auto* t = new QTableWidget(parent);
  t->setColumnCount(headers.size());
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->hide();
  t->verticalHeader()->setDefaultSectionSize(20);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->horizontalHeader()->setStretchLastSection(true);
  t->setSortingEnabled(false);
  return t;
}

QTableWidgetItem* cell(const QString& text, bool number = false) {
  auto* it = new QTableWidgetItem(text);
  if (number) it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return it;
}

}  // namespace

ClusterView::ClusterView(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setContentsMargins(6, 4, 6, 4);
  timeline_ = new ClusterTimeline(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(timeline_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  tables_ = new QTabWidget(this);
  steps_ = makeTable(tables_, {tr("Rank"), tr("Step"), tr("Step (ms)"), tr("Computing"), tr("Comm. not overlapped"),
                               tr("Overlapped"), tr("Communication"), tr("Free"), tr("Stage"), tr("Preparing")});
  selected_ = makeTable(tables_, {tr("Rank"), tr("Collective"), tr("Bytes"), tr("Enqueued (ms)"), tr("Completed (ms)"),
                                  tr("Duration (ms)"), tr("Waited for peers (ms)"), tr("")});
  comm_ = makeTable(tables_, {tr("Rank"), tr("Collective"), tr("Count"), tr("Bytes"), tr("Time (ms)"), tr("Wait (ms)"),
                              tr("Transit (ms)"), tr("Max (ms)"), tr("GB/s (transit)"), tr("Never completed")});
  tables_->addTab(steps_, tr("Steps"));
  tables_->addTab(selected_, tr("Selected collective"));
  tables_->addTab(comm_, tr("Communication"));
  split_ = new QSplitter(Qt::Vertical, this);
  split_->addWidget(scroll);
  split_->addWidget(tables_);
  split_->setStretchFactor(0, 3);
  split_->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(summary_);
  layout->addWidget(split_, 1);
  connect(timeline_, &ClusterTimeline::collectiveSelected, this, [this] {
    showSelected();
    tables_->setCurrentWidget(selected_);
  });
  connect(timeline_, &ClusterTimeline::selectionCleared, this, [this] { showSelected(); });
  connect(steps_, &QTableWidget::cellClicked, this, [this](int row, int) {
    if (auto* it = steps_->item(row, 1)) timeline_->fitStep(it->text().toLongLong());
  });
  clear(tr("File > Open Cluster\u2026 reads the trace files of a multi-rank job (one per rank, or a folder of "
           "them); selecting a rank's run opens its job here."));
}

void ClusterView::clear(const QString& message) {
  has_report_ = false;
  timeline_->setReport(nullptr);
  summary_->setText(message.toHtmlEscaped());
  for (QTableWidget* t : {steps_, selected_, comm_}) t->setRowCount(0);
}

bool ClusterView::openJob(const std::vector<std::string>& paths, const std::string& job, bool sync) {
  if (sync) {
    if (watcher_) watcher_->waitForFinished();
    return present(cluster::analyze(paths, job));
  }
  if (watcher_) {  // the newest request runs next; the one under way finishes and is dropped
    has_pending_ = true;
    pending_paths_ = paths;
    pending_job_ = job;
    return true;
  }
  clear(tr("Reading the job's rank files\u2026"));
  watcher_ = new QFutureWatcher<std::shared_ptr<StatusOr<cluster::Report>>>(this);
  connect(watcher_, &QFutureWatcherBase::finished, this, [this] {
    auto result = watcher_->result();
    watcher_->deleteLater();
    watcher_ = nullptr;
    if (has_pending_) {
      has_pending_ = false;
      openJob(pending_paths_, pending_job_, false);
      return;
    }
    present(std::move(*result));
  });
  watcher_->setFuture(QtConcurrent::run([paths, job] {
    return std::make_shared<StatusOr<cluster::Report>>(cluster::analyze(paths, job));
  }));
  return true;
}

bool ClusterView::present(StatusOr<cluster::Report> rep) {
  if (!rep.isOk()) {
    const QString m = QString::fromStdString(rep.status().message());
    clear(m);
    emit errorOccurred(m);
    emit jobLoaded(false);
    return false;
  }
  report_ = std::move(*rep);
  has_report_ = true;
  const cluster::Report& r = report_;
  QString html = tr("<b>Job</b> %1 \u00b7 %2 rank(s)").arg(QString::fromStdString(r.job.empty() ? "(unnamed)" : r.job).toHtmlEscaped())
                     .arg(r.ranks.size());
  if (!r.ranks.empty() && r.ranks.front().run.world_size > 0) html += tr(" of a world of %1").arg(r.ranks.front().run.world_size);
  if (!r.common_steps.empty()) {
    html += tr(" \u00b7 steps %1\u2013%2 on every rank").arg(r.common_steps.front()).arg(r.common_steps.back());
  }
  const cluster::SlowRank& s = r.slow;
  if (s.found) {
    html += tr("<br><span style='color:#b3261e'><b>Slow rank %1</b></span>: own time %2 ms vs %3 ms on rank %4 "
               "over %5 step(s) (spread %6 %); worst in step %7 (%8 ms lost")
                .arg(s.rank).arg(ms(s.own_ns), ms(s.fastest_own_ns)).arg(s.fastest).arg(s.steps)
                .arg(s.spread * 100, 0, 'f', 1).arg(s.step).arg(ms(s.step_lost_ns));
    if (!s.op.empty()) html += tr(", where: <b>%1</b> self time +%2 ms").arg(QString::fromStdString(s.op).toHtmlEscaped(), ms(s.op_more_ns));
    html += ")";
  } else if (r.ranks.size() > 1) {
    html += tr("<br>No slow rank: own times within %1 % of each other.").arg(s.spread * 100, 0, 'f', 1);
  }
  for (const std::string& n : r.notes) html += "<br><span style='color:#6b7582'>" + QString::fromStdString(n).toHtmlEscaped() + "</span>";
  html += tr("<br><span style='color:#6b7582'>Communication: pale = waiting for the last rank to enqueue it, solid = "
             "running. Click a collective to follow it on every rank.</span>");
  summary_->setText(html);
  timeline_->setReport(&report_);
  // Every rank's lanes in sight where they fit (at most 70 % of the view), the tables below.
  const int total = std::max(300, split_->height());
  const int top = std::min(timeline_->sizeHint().height() + 16, total * 7 / 10);
  split_->setSizes({top, total - top});
  fillTables();
  showSelected();
  emit jobLoaded(true);
  return true;
}

void ClusterView::fillTables() {
  const cluster::Report& r = report_;
  steps_->setRowCount(0);
  for (const cluster::Rank& k : r.ranks) {
    for (const cluster::StepBreakdown& b : k.steps) {
      const int row = steps_->rowCount();
      steps_->insertRow(row);
      steps_->setItem(row, 0, cell(QString::number(k.rank), true));
      steps_->setItem(row, 1, cell(QString::number(b.step), true));
      const int64_t v[] = {b.step_ns, b.computing, b.not_overlapped, b.overlapped, b.communication, b.free, b.stage, b.preparing};
      for (int c = 0; c < 8; ++c) steps_->setItem(row, 2 + c, cell(ms(v[c]), true));
      if (r.slow.found && k.rank == r.slow.rank && b.step == r.slow.step) {
        for (int c = 0; c < steps_->columnCount(); ++c) steps_->item(row, c)->setBackground(QColor(0xfb, 0xe0, 0xdd));
      }
    }
  }
  steps_->resizeColumnsToContents();
  comm_->setRowCount(0);
  for (const cluster::Rank& k : r.ranks) {
    for (const cluster::CollectiveStat& c : k.collectives) {
      const int row = comm_->rowCount();
      comm_->insertRow(row);
      comm_->setItem(row, 0, cell(QString::number(k.rank), true));
      comm_->setItem(row, 1, cell(QString::fromStdString(c.kind)));
      comm_->setItem(row, 2, cell(QString::number(c.count), true));
      comm_->setItem(row, 3, cell(formatBytes(c.bytes), true));
      comm_->setItem(row, 4, cell(ms(c.time_ns), true));
      comm_->setItem(row, 5, cell(ms(c.wait_ns), true));
      comm_->setItem(row, 6, cell(ms(c.transitNs()), true));
      comm_->setItem(row, 7, cell(ms(c.max_ns), true));
      comm_->setItem(row, 8, cell(QString::number(c.gbps(), 'f', 3), true));
      comm_->setItem(row, 9, cell(QString::number(c.incomplete), true));
    }
  }
  comm_->resizeColumnsToContents();
}

void ClusterView::showSelected() {
  selected_->setRowCount(0);
  if (!timeline_->hasSelection()) return;
  const CollectiveKey key = timeline_->selection();
  const auto [last, last_rank] = timeline_->lastArrival(key);
  const std::vector<CollectiveRef> rows = timeline_->selectedRows();
  for (const CollectiveRef& c : rows) {
    const CollectiveRow& r = timeline_->row(c);
    const int row = selected_->rowCount();
    selected_->insertRow(row);
    const int64_t start = timeline_->wallOf(c.rank, r.start_ns);
    selected_->setItem(row, 0, cell(QString::number(report_.ranks[c.rank].rank), true));
    selected_->setItem(row, 1, cell(collectiveName(r)));
    selected_->setItem(row, 2, cell(formatBytes(r.bytes), true));
    selected_->setItem(row, 3, cell(ms(start - timeline_->jobBegin()), true));
    if (r.end_ns >= 0) {
      selected_->setItem(row, 4, cell(ms(timeline_->wallOf(c.rank, r.end_ns) - timeline_->jobBegin()), true));
      selected_->setItem(row, 5, cell(ms(r.end_ns - r.start_ns), true));
      selected_->setItem(row, 6, cell(ms(std::clamp<int64_t>(last - start, 0, r.end_ns - r.start_ns)), true));
    } else {
      selected_->setItem(row, 4, cell(tr("never"), true));
    }
    const bool last_one = rows.size() > 1 && c.rank == last_rank;  // alone, it waited for nobody
    selected_->setItem(row, 7, cell(last_one ? tr("last to arrive") : QString()));
    if (last_one) {
      for (int k = 0; k < selected_->columnCount(); ++k) {
        if (auto* it = selected_->item(row, k)) it->setForeground(kSlow);
      }
    }
  }
  selected_->resizeColumnsToContents();
}

}  // namespace npuscope::gui
