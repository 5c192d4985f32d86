#include "npuscope/gui/timeline_view.h"
#include "npuscope/gui/memory_view.h"

#include <QApplication>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <functional>

#include "npuscope/gui/units.h"

namespace npuscope::gui {

namespace {

constexpr double kMinNsPerPx = 0.02;

const QColor kBackground(0xfc, 0xfc, 0xfd);
const QColor kGutterBg(0xf1, 0xf3, 0xf6);
const QColor kGrid(0xe6, 0xe9, 0xee);

// Merged sub-pixel ops and op density: light at one op a pixel, dark at a thousand or more.
QColor densityColor(double ops_per_px) {
  const double f = std::clamp(std::log10(std::max(1.0, ops_per_px)) / 3.0, 0.0, 1.0);
  auto mix = [f](int a, int b) { return static_cast<int>(a + (b - a) * f); };
  return QColor(mix(0xb4, 0x2c), mix(0xc0, 0x44), mix(0xcf, 0x66));
}
const QColor kText(0x1d, 0x23, 0x2b);
const QColor kMutedText(0x5d, 0x67, 0x75);
const QColor kOverflow(0xd6, 0x45, 0x3d);

}  // namespace

QColor sliceColor(const std::string& name) {
  // Names that differ only by a prefix (autograd wrappers) share a hue with their node.
  std::string_view key = name;
  const std::string_view wrapper = "autograd::engine::evaluate_function: ";
  if (key.substr(0, wrapper.size()) == wrapper) key.remove_prefix(wrapper.size());
  const size_t h = std::hash<std::string_view>()(key);
  const int hue = static_cast<int>(h % 360);
  const int sat = 95 + static_cast<int>((h >> 12) % 60);
  const int val = 215 + static_cast<int>((h >> 20) % 30);
  return QColor::fromHsv(hue, sat, val);
}

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(400, 200);
  memory_timer_.setSingleShot(true);
  memory_timer_.setInterval(150);
  connect(&memory_timer_, &QTimer::timeout, this, [this] {
    if (!data_ || !memory_provider_) return;
    const int64_t span = viewEnd() - viewBegin();
    if (span * 2 > data_->endNs() - data_->beginNs()) {
      memory_detail_.clear();
      update();
      return;
    }
    TimeWindow w{viewBegin() - span / 2, viewEnd() + span / 2};
    memory_detail_ = memory_provider_(w, static_cast<size_t>(plotWidth()) * 2);
    memory_detail_window_ = w;
    update();
  });
  window_timer_.setSingleShot(true);
  window_timer_.setInterval(200);
  connect(&window_timer_, &QTimer::timeout, this, [this] {
    const TimeWindow w = wantedWindow();
    if (w.end_ns > w.begin_ns) emit windowWanted(w.begin_ns, w.end_ns);
  });
}

TimeWindow TimelineView::wantedWindow() const {
  if (!data_ || !data_->partial()) return {0, 0};
  const int64_t vb = viewBegin(), ve = viewEnd();
  if (data_->covers(vb, ve)) return {0, 0};
  if (data_->estimateOps(vb, ve) > window_budget_ops_) return {0, 0};
  // Half a view on each side, as far as the budget allows.
  const int64_t span = ve - vb;
  TimeWindow w{vb - span / 2, ve + span / 2};
  if (data_->estimateOps(w.begin_ns, w.end_ns) > window_budget_ops_) w = {vb, ve};
  return w;
}

void TimelineView::setData(const TimelineData* data, bool keep_view) {
  const int64_t vb = view_begin_;
  const double npp = ns_per_px_;
  // A host op stays selected across a refresh or a new window (by its id).
  int64_t selected_id = -1;
  if (keep_view && data_ && selected_.valid() &&
      data_->lanes()[static_cast<size_t>(selected_.lane)].kind == LaneKind::kThread) {
    selected_id = data_->slice(selected_).id;
  }
  data_ = data;
  selected_ = {};
  if (data_ && selected_id >= 0) selected_ = data_->findById(selected_id);
  memory_detail_.clear();
  if (!keep_view) {
    has_range_ = false;
    highlight_on_ = false;
    scroll_y_ = 0;
  } else if (highlight_on_) {
    highlight_on_ = false;  // string indices differ between loads
  }
  matches_ = nullptr;
  layoutTracks();
  if (keep_view && data_) {
    view_begin_ = vb;
    ns_per_px_ = npp;
    clampView();
  } else {
    fitAll();
  }
  if (data_ && data_->partial()) window_timer_.start();
  update();
}

void TimelineView::setStepDeviceTimes(std::vector<StepDeviceTime> times) {
  step_device_ = std::move(times);
  std::sort(step_device_.begin(), step_device_.end(),
            [](const StepDeviceTime& a, const StepDeviceTime& b) { return a.step < b.step; });
  update();
}

const StepDeviceTime* TimelineView::stepDevice(int64_t step) const {
  auto it = std::lower_bound(step_device_.begin(), step_device_.end(), step,
                             [](const StepDeviceTime& s, int64_t v) { return s.step < v; });
  return it != step_device_.end() && it->step == step ? &*it : nullptr;
}

void TimelineView::setMemoryCategories(std::vector<CategorySample> series) {
  memory_categories_ = std::move(series);
  std::stable_sort(memory_categories_.begin(), memory_categories_.end(),
                   [](const CategorySample& a, const CategorySample& b) { return a.ts_ns < b.ts_ns; });
  update();
}

const CategorySample* TimelineView::categorySampleAt(int64_t ts) const {
  auto it = std::upper_bound(memory_categories_.begin(), memory_categories_.end(), ts,
                             [](int64_t t, const CategorySample& s) { return t < s.ts_ns; });
  return it == memory_categories_.begin() ? nullptr : &*(it - 1);
}

// Stacked areas, one per category in category order (parameters at the bottom), as columns of
// pixels: each column shows the highest sample in it.
void TimelineView::paintMemoryCategories(QPainter& p, int y, double h, int64_t peak) {
  const int x0 = kGutter, x1 = width();
  const CategorySample* prev = categorySampleAt(viewBegin());
  auto it = std::upper_bound(memory_categories_.begin(), memory_categories_.end(), viewBegin(),
                             [](int64_t t, const CategorySample& s) { return t < s.ts_ns; });
  int x = x0;
  while (x < x1) {
    const int64_t t_end = timeAt(x + 1);
    const CategorySample* best = prev;
    while (it != memory_categories_.end() && it->ts_ns < t_end) {
      if (!best || it->allocated > best->allocated) best = &*it;
      prev = &*it;
      ++it;
    }
    // Runs of pixels with no event keep the last sample: one wide rectangle.
    int x_next = x + 1;
    if (best == prev) {
      const int64_t next_ts = it == memory_categories_.end() ? INT64_MAX : it->ts_ns;
      while (x_next < x1 && timeAt(x_next + 1) <= next_ts) ++x_next;
    }
    if (best && best->allocated > 0) {
      double bottom = y + 3 + h;
      for (int c = 0; c < kMemoryCategoryCount; ++c) {
        if (best->bytes[c] <= 0) continue;
        const double hh = h * static_cast<double>(best->bytes[c]) / static_cast<double>(peak);
        p.fillRect(QRectF(x, bottom - hh, x_next - x, hh), memoryCategoryColor(c));
        bottom -= hh;
      }
    }
    x = x_next;
  }
}

void TimelineView::setMemoryOverview(std::vector<MemorySample> samples) {
  memory_overview_ = std::move(samples);
  std::sort(memory_overview_.begin(), memory_overview_.end(),
            [](const MemorySample& a, const MemorySample& b) { return a.ts_ns < b.ts_ns; });
  memory_detail_.clear();
  layoutTracks();
  update();
}

void TimelineView::setMemoryProvider(std::function<std::vector<MemorySample>(const TimeWindow&, size_t)> provider) {
  memory_provider_ = std::move(provider);
}

// ---------------------------------------------------------------------------------------------
// Viewport

double TimelineView::xAt(int64_t t) const {
  return kGutter + static_cast<double>(t - view_begin_) / ns_per_px_;
}

int64_t TimelineView::timeAt(double x) const {
  return view_begin_ + static_cast<int64_t>(std::llround((x - kGutter) * ns_per_px_));
}

void TimelineView::clampView() {
  if (!data_) return;
  const double span = static_cast<double>(data_->endNs() - data_->beginNs());
  const double max_npp = std::max(kMinNsPerPx, span * 1.5 / plotWidth());
  ns_per_px_ = std::clamp(ns_per_px_, kMinNsPerPx, max_npp);
  const auto visible = static_cast<int64_t>(ns_per_px_ * plotWidth());
  const int64_t lo = data_->beginNs() - visible / 2;
  const int64_t hi = std::max(lo, data_->endNs() - visible / 2);
  view_begin_ = std::clamp(view_begin_, lo, hi);
}

void TimelineView::setView(int64_t begin_ns, double ns_per_px) {
  view_begin_ = begin_ns;
  ns_per_px_ = ns_per_px;
  clampView();
  emitViewChanged();
}

void TimelineView::zoomAt(double factor, double x) {
  const int64_t anchor = timeAt(x);
  const double before = ns_per_px_;
  ns_per_px_ = ns_per_px_ * factor;
  clampView();
  if (ns_per_px_ == before && factor != 1.0) return;
  view_begin_ = anchor - static_cast<int64_t>(std::llround((x - kGutter) * ns_per_px_));
  clampView();
  emitViewChanged();
}

void TimelineView::panPixels(double dx) {
  view_begin_ += static_cast<int64_t>(std::llround(dx * ns_per_px_));
  clampView();
  emitViewChanged();
}

void TimelineView::fitAll() {
  if (!data_) return;
  fitWindow(data_->beginNs(), data_->endNs());
}

void TimelineView::fitWindow(int64_t begin_ns, int64_t end_ns) {
  if (end_ns <= begin_ns) end_ns = begin_ns + 1000;
  const int64_t margin = (end_ns - begin_ns) / 50;
  ns_per_px_ = static_cast<double>(end_ns - begin_ns + 2 * margin) / plotWidth();
  view_begin_ = begin_ns - margin;
  clampView();
  emitViewChanged();
}

bool TimelineView::fitStep(int64_t step) {
  if (!data_) return false;
  const StepRow* s = data_->stepByIndex(step);
  if (!s) return false;
  fitWindow(s->start_ns, s->start_ns + s->dur_ns);
  return true;
}

void TimelineView::emitViewChanged() {
  update();
  memory_timer_.start();
  if (data_ && data_->partial()) window_timer_.start();
  emit viewChanged();
}

void TimelineView::resizeEvent(QResizeEvent*) {
  clampScroll();
  clampView();
}

// ---------------------------------------------------------------------------------------------
// Tracks

void TimelineView::layoutTracks() {
  tracks_.clear();
  if (!data_) return;
  int top = 0;
  for (size_t i = 0; i < data_->lanes().size(); ++i) {
    const Lane& lane = data_->lanes()[i];
    // A partial run's thread lanes keep room for their density where no ops are loaded.
    const int rows = std::max(lane.kind == LaneKind::kThread && data_->partial() ? 3 : 1, lane.depthCount());
    Track t{TrackKind::kLane, static_cast<int>(i), top, rows * kRow + 4};
    tracks_.push_back(t);
    top += t.height + kLaneGap;
  }
  if (!memory_overview_.empty()) {
    tracks_.push_back({TrackKind::kMemory, -1, top, kMemoryTrack});
    top += kMemoryTrack + kLaneGap;
  }
  bool any_scale = false;
  for (const StepRow& s : data_->steps()) any_scale = any_scale || s.loss_scale.has_value();
  if (any_scale) tracks_.push_back({TrackKind::kLossScale, -1, top, kScaleTrack});
  clampScroll();
}

int TimelineView::contentHeight() const {
  return tracks_.empty() ? 0 : tracks_.back().top + tracks_.back().height + kLaneGap;
}

void TimelineView::clampScroll() {
  const int room = height() - tracksTop();
  scroll_y_ = std::clamp(scroll_y_, 0, std::max(0, contentHeight() - room));
}

const TimelineView::Track* TimelineView::trackAt(int y) const {
  if (y < tracksTop()) return nullptr;
  for (const Track& t : tracks_) {
    const int ty = trackY(t);
    if (y >= ty && y < ty + t.height) return &t;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Hit testing

SliceRef TimelineView::sliceAt(const QPoint& p) const {
  if (!data_ || p.x() < kGutter) return {};
  const Track* t = trackAt(p.y());
  if (!t || t->kind != TrackKind::kLane) return {};
  const Lane& lane = data_->lanes()[static_cast<size_t>(t->lane)];
  const int d = (p.y() - trackY(*t) - 2) / kRow;
  if (d < 0 || d >= lane.depthCount()) return {};
  const int64_t at = timeAt(p.x());
  const int64_t hit = lane.at(d, at);
  if (hit >= 0) return {t->lane, static_cast<uint32_t>(hit)};
  // Within two pixels (a merged block): the nearest slice.
  auto [first, last] = lane.visible(d, timeAt(p.x() - 2), timeAt(p.x() + 3));
  SliceRef best;
  double best_dist = 1e18;
  for (uint32_t i = first; i < last && i < first + 4096; ++i) {
    const Slice& s = lane.slices[i];
    const double dist = std::fabs(static_cast<double>(std::clamp(at, s.start_ns, s.end()) - at));
    if (dist < best_dist) {
      best_dist = dist;
      best = {t->lane, i};
    }
  }
  return best;
}

QRectF TimelineView::sliceRect(SliceRef r) const {
  if (!data_ || !r.valid()) return {};
  const Slice& s = data_->slice(r);
  for (const Track& t : tracks_) {
    if (t.kind != TrackKind::kLane || t.lane != r.lane) continue;
    const double x0 = xAt(s.start_ns), x1 = xAt(s.end());
    return QRectF(x0, trackY(t) + 2 + s.depth * kRow, std::max(1.0, x1 - x0), kRow - 1);
  }
  return {};
}

int64_t TimelineView::stepAt(const QPoint& p) const {
  if (!data_ || p.y() < kRuler || p.y() >= kRuler + kStepBand || p.x() < kGutter) return -1;
  const StepRow* s = data_->stepAt(timeAt(p.x()));
  return s ? s->step : -1;
}

// ---------------------------------------------------------------------------------------------
// Selection and highlight

void TimelineView::selectSlice(SliceRef r, bool reveal) {
  selected_ = r;
  if (r.valid() && reveal && data_) {
    const Slice& s = data_->slice(r);
    const double w = static_cast<double>(s.dur_ns) / ns_per_px_;
    if (w < 3 || w > plotWidth()) {
      // Zoom so the slice takes a fifth of the width.
      const int64_t span = std::max<int64_t>(s.dur_ns * 5, 2000);
      fitWindow(s.start_ns + s.dur_ns / 2 - span / 2, s.start_ns + s.dur_ns / 2 + span / 2);
    } else if (s.start_ns < viewBegin() || s.end() > viewEnd()) {
      view_begin_ = s.start_ns + s.dur_ns / 2 - static_cast<int64_t>(ns_per_px_ * plotWidth() / 2);
      clampView();
      emitViewChanged();
    }
    const QRectF rect = sliceRect(r);
    if (rect.top() < tracksTop() || rect.bottom() > height()) {
      scroll_y_ += static_cast<int>(rect.center().y()) - (tracksTop() + height()) / 2;
      clampScroll();
    }
  }
  update();
  emit sliceSelected(r);
}

void TimelineView::setRange(const TimeWindow& w) {
  range_ = w;
  has_range_ = w.end_ns > w.begin_ns;
  update();
}

void TimelineView::clearRange() {
  has_range_ = false;
  update();
  emit rangeCleared();
}

void TimelineView::setHighlight(const QString& name, const QString* shapes) {
  highlight_on_ = false;
  if (!data_) return;
  highlight_names_.assign(data_->stringCount(), 0);
  const uint32_t n = data_->stringIndex(name.toStdString());
  if (n) highlight_names_[n] = 1;
  highlight_shapes_ = shapes ? data_->stringIndex(shapes->toStdString()) : 0;
  highlight_on_ = n != 0;
  update();
}

void TimelineView::setHighlightContaining(const QString& needle) {
  highlight_on_ = false;
  if (!data_ || needle.isEmpty()) {
    update();
    return;
  }
  highlight_names_.assign(data_->stringCount(), 0);
  for (size_t i = 1; i < data_->stringCount(); ++i) {
    if (QString::fromStdString(data_->str(static_cast<uint32_t>(i))).contains(needle, Qt::CaseInsensitive)) {
      highlight_names_[i] = 1;
      highlight_on_ = true;
    }
  }
  highlight_shapes_ = 0;
  update();
}

void TimelineView::clearHighlight() {
  highlight_on_ = false;
  update();
}

bool TimelineView::highlighted(const Slice& s) const {
  return highlight_on_ && highlight_names_[s.name] && (highlight_shapes_ == 0 || s.shapes == highlight_shapes_);
}

// ---------------------------------------------------------------------------------------------
// Painting

void TimelineView::paintEvent(QPaintEvent*) {
  QElapsedTimer timer;
  timer.start();
  last_rects_ = 0;
  QPainter p(this);
  p.fillRect(rect(), kBackground);
  if (!data_) {
    p.setPen(kMutedText);
    p.drawText(rect(), Qt::AlignCenter, tr("Open a trace file and pick a run"));
    return;
  }
  const int64_t tick_ns = rulerTick(ns_per_px_);

  // Tracks, clipped below the fixed header.
  p.save();
  p.setClipRect(QRect(0, tracksTop(), width(), height() - tracksTop()));
  // Step shading and the grid behind the tracks.
  {
    const auto& steps = data_->steps();
    auto it = std::upper_bound(steps.begin(), steps.end(), viewBegin(),
                               [](int64_t v, const StepRow& s) { return v < s.start_ns; });
    if (it != steps.begin()) --it;
    for (; it != steps.end() && it->start_ns < viewEnd(); ++it) {
      const double x0 = std::max<double>(kGutter, xAt(it->start_ns));
      const double x1 = std::min<double>(width(), xAt(it->start_ns + it->dur_ns));
      if (x1 - x0 < 0.5) continue;
      if (it->overflow) p.fillRect(QRectF(x0, tracksTop(), x1 - x0, height()), QColor(0xfb, 0xec, 0xea));
      else if (it->step % 2) p.fillRect(QRectF(x0, tracksTop(), x1 - x0, height()), QColor(0xf4, 0xf6, 0xf9));
    }
    p.setPen(kGrid);
    for (int64_t t = (viewBegin() - data_->beginNs()) / tick_ns * tick_ns + data_->beginNs(); t < viewEnd();
         t += tick_ns) {
      const double x = xAt(t);
      if (x >= kGutter) p.drawLine(QPointF(x, tracksTop()), QPointF(x, height()));
    }
  }
  for (const Track& t : tracks_) {
    const int y = trackY(t);
    if (y > height() || y + t.height < tracksTop()) continue;
    switch (t.kind) {
      case TrackKind::kLane: paintLane(p, t, y); break;
      case TrackKind::kMemory: paintMemory(p, t, y); break;
      case TrackKind::kLossScale: paintLossScale(p, t, y); break;
    }
  }
  paintLaunchLinks(p);
  // Range selection overlay.
  if (has_range_) {
    const double x0 = std::max<double>(kGutter, xAt(range_.begin_ns));
    const double x1 = std::min<double>(width(), xAt(range_.end_ns));
    if (x1 > x0) p.fillRect(QRectF(x0, tracksTop(), x1 - x0, height()), QColor(50, 110, 220, 38));
    p.setPen(QPen(QColor(50, 110, 220), 1));
    p.drawLine(QPointF(xAt(range_.begin_ns), tracksTop()), QPointF(xAt(range_.begin_ns), height()));
    p.drawLine(QPointF(xAt(range_.end_ns), tracksTop()), QPointF(xAt(range_.end_ns), height()));
  }
  p.restore();

  // Gutter background behind lane titles is drawn per track; the fixed header last.
  p.fillRect(QRect(0, 0, width(), tracksTop()), kBackground);
  paintRuler(p, tick_ns);
  paintSteps(p);
  p.fillRect(QRect(0, 0, kGutter, tracksTop()), kGutterBg);
  p.setPen(kMutedText);
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  p.setFont(small);
  p.drawText(QRect(8, 0, kGutter - 12, kRuler), Qt::AlignVCenter | Qt::AlignLeft,
             tr("%1 / px").arg(formatNs(static_cast<int64_t>(std::max(1.0, ns_per_px_)))));
  p.drawText(QRect(8, kRuler, kGutter - 12, kStepBand), Qt::AlignVCenter | Qt::AlignLeft, tr("steps"));
  p.setPen(QColor(0xd0, 0xd5, 0xdc));
  p.drawLine(0, tracksTop() - 1, width(), tracksTop() - 1);
  p.drawLine(kGutter - 1, 0, kGutter - 1, height());
  if (has_range_) {
    const double x0 = xAt(range_.begin_ns), x1 = xAt(range_.end_ns);
    const QString label = formatNs(range_.end_ns - range_.begin_ns);
    QRectF box(std::max<double>(kGutter, (x0 + x1) / 2 - 50), 2, 100, kRuler - 4);
    p.fillRect(box, QColor(50, 110, 220));
    p.setPen(Qt::white);
    p.drawText(box, Qt::AlignCenter, label);
  }
  last_paint_ms_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

void TimelineView::paintRuler(QPainter& p, int64_t tick_ns) {
  p.setPen(kMutedText);
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  const int64_t origin = data_->beginNs();
  for (int64_t t = (viewBegin() - origin) / tick_ns * tick_ns + origin; t < viewEnd(); t += tick_ns) {
    const double x = xAt(t);
    if (x < kGutter) continue;
    p.drawLine(QPointF(x, kRuler - 6), QPointF(x, kRuler));
    p.drawText(QRectF(x + 3, 0, 120, kRuler - 2), Qt::AlignVCenter | Qt::AlignLeft, formatOffset(t, origin, tick_ns));
  }
}

void TimelineView::paintSteps(QPainter& p) {
  const auto& steps = data_->steps();
  auto it = std::upper_bound(steps.begin(), steps.end(), viewBegin(),
                             [](int64_t v, const StepRow& s) { return v < s.start_ns; });
  if (it != steps.begin()) --it;
  const QFontMetrics fm(p.font());
  double last_x1 = -1;
  for (; it != steps.end() && it->start_ns < viewEnd(); ++it) {
    const double x0 = std::max<double>(kGutter, xAt(it->start_ns));
    const double x1 = std::min<double>(width(), xAt(it->start_ns + it->dur_ns));
    if (x1 <= kGutter || x1 - x0 < 0.3 || x1 <= last_x1) continue;
    last_x1 = x1;
    const QRectF r(x0, kRuler + 1, std::max(1.0, x1 - x0 - 1), kStepBand - 2);
    p.fillRect(r, it->overflow ? QColor(0xf2, 0xb8, 0xb2) : (it->step % 2 ? QColor(0xc9, 0xd6, 0xe6) : QColor(0xdb, 0xe4, 0xef)));
    // The device's busy share of the step (an npu run: of its predicted step on a real npu; an
    // imported run: of the recorded step, from the real device lanes): a bar along the band's foot.
    double share = -1;
    if (const PredictedStep* ps = data_->predictedStep(it->step)) {
      share = 1 - ps->deviceIdleShare();
    } else if (const StepDeviceTime* sd = stepDevice(it->step); sd && it->dur_ns > 0 && sd->device_ops > 0) {
      share = std::clamp(static_cast<double>(sd->device_busy_ns) / static_cast<double>(it->dur_ns), 0.0, 1.0);
    }
    if (share >= 0) {
      const QRectF foot(r.left(), r.bottom() - 3, r.width(), 3);
      p.fillRect(foot, QColor(0xa9, 0xb4, 0xc2));
      p.fillRect(QRectF(foot.left(), foot.top(), std::max(1.0, foot.width() * share), foot.height()),
                 QColor(0x2e, 0x8b, 0x57));
    }
    if (r.width() > 18) {
      QString label = QString("ProfilerStep#%1").arg(it->step);
      if (it->overflow) label += tr(" \u00b7 overflow");
      if (it->skipped) label += tr(" \u00b7 skipped");
      if (fm.horizontalAdvance(label) > r.width() - 6) label = QString("#%1").arg(it->step);
      p.setPen(it->overflow ? QColor(0x8a, 0x1c, 0x14) : kText);
      p.drawText(r.adjusted(4, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(label, Qt::ElideRight, static_cast<int>(r.width()) - 6));
    }
  }
}

void TimelineView::paintLane(QPainter& p, const Track& t, int y) {
  const Lane& lane = data_->lanes()[static_cast<size_t>(t.lane)];
  const int64_t vb = viewBegin(), ve = viewEnd();
  const bool device = lane.kind != LaneKind::kThread;
  if (lane.kind == LaneKind::kDevice) p.fillRect(QRect(kGutter, y, width() - kGutter, t.height), QColor(0xf6, 0xf3, 0xfb));
  if (lane.kind == LaneKind::kTasks) p.fillRect(QRect(kGutter, y, width() - kGutter, t.height), QColor(0xf1, 0xf7, 0xf2));
  if (!device && !data_->covers(vb, ve)) paintDensity(p, lane, y, t.height);
  const QFontMetrics fm(p.font());
  for (int d = 0; d < lane.depthCount(); ++d) {
    const int ry = y + 2 + d * kRow;
    if (ry > height() || ry + kRow < tracksTop()) continue;
    paintRow(p, fm, lane, d, ry);
    if (highlight_on_) paintHighlights(p, lane, d, ry);  // on top, at least a pixel wide even when merged
  }
  paintSelection(p, t, lane);
  paintLaneTitle(p, t, lane, y);
}

// One depth of a lane: slices a pixel or wider as named boxes, runs of narrower ones as blocks.
void TimelineView::paintRow(QPainter& p, const QFontMetrics& fm, const Lane& lane, int d, int ry) {
  const int64_t vb = viewBegin(), ve = viewEnd();
  auto [i, last] = lane.visible(d, vb, ve);
  const auto begin_it = lane.slices.begin();
  while (i < last) {
    const Slice& s = lane.slices[i];
    const double x0 = xAt(s.start_ns), x1 = xAt(s.end());
    if (x1 - x0 >= 1.0) {
      const double cx0 = std::max<double>(x0, kGutter), cx1 = std::min<double>(x1, width() + 1);
      QColor c = sliceColor(data_->str(s.name));
      if (highlight_on_ && !highlighted(s)) c = QColor::fromHsv(c.hue(), c.saturation() / 4, 238);
      const QRectF r(cx0, ry, std::max(1.0, cx1 - cx0 - (x1 - x0 > 3 ? 1 : 0)), kRow - 1);
      p.fillRect(r, c);
      ++last_rects_;
      if (r.width() > 36) {
        p.setPen(highlight_on_ && !highlighted(s) ? kMutedText : kText);
        const QString name = QString::fromStdString(data_->str(s.name));
        p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(name, Qt::ElideRight, static_cast<int>(r.width()) - 5));
      }
      ++i;
      continue;
    }
    // A run of sub-pixel slices: one grey block, advancing a pixel at a time.
    double bx0 = std::max<double>(x0, kGutter), bx1 = x0 + 1.0;
    uint32_t j = i + 1;
    uint32_t merged = 1;
    while (j < last && bx1 - bx0 < 4.0) {  // blocks of a few pixels, so density shows
      const int64_t t_next = timeAt(bx1 + 1.0);
      const uint32_t k = static_cast<uint32_t>(
          std::lower_bound(begin_it + j, begin_it + last, t_next,
                           [](const Slice& a, int64_t v) { return a.start_ns < v; }) -
          begin_it);
      if (k == j) break;
      const Slice& tail = lane.slices[k - 1];
      if (xAt(tail.end()) - xAt(tail.start_ns) >= 1.0) {  // a wide slice: merge up to it
        if (k - 1 > j) bx1 = std::max(bx1, xAt(lane.slices[k - 2].end()));
        merged += k - 1 - j;
        j = k - 1;
        break;
      }
      bx1 = std::max(bx1, xAt(tail.end()));
      merged += k - j;
      j = k;
    }
    const QColor c = merged == 1 ? sliceColor(data_->str(s.name))
                                 : densityColor(merged / std::max(1.0, bx1 - bx0));
    p.fillRect(QRectF(bx0, ry, std::max(1.0, bx1 - bx0), kRow - 1),
               highlight_on_ ? QColor(c.red(), c.green(), c.blue(), 70) : c);
    ++last_rects_;
    i = j;
  }
}

// One depth's highlighted ops, each at least two pixels wide.
void TimelineView::paintHighlights(QPainter& p, const Lane& lane, int d, int ry) {
  const int64_t vb = viewBegin(), ve = viewEnd();
  const auto begin_it = lane.slices.begin();
  auto [k, last] = lane.visible(d, vb, ve);
  while (k < last) {
    const Slice& s = lane.slices[k];
    if (!highlighted(s)) {
      ++k;
      continue;
    }
    const double x0 = std::max<double>(xAt(s.start_ns), kGutter), x1 = xAt(s.end());
    p.fillRect(QRectF(x0, ry, std::max(2.0, x1 - x0), kRow - 1), QColor(0xf0, 0x8c, 0x00));
    ++last_rects_;
    // Next slice that starts a pixel further on.
    const int64_t t_next = timeAt(std::max(x0, x1) + 1.0);
    const uint32_t jump = static_cast<uint32_t>(
        std::lower_bound(begin_it + k + 1, begin_it + last, t_next,
                         [](const Slice& a, int64_t v) { return a.start_ns < v; }) - begin_it);
    // Scan the skipped ones only when they are few; otherwise accept the pixel's sample.
    k = jump;
  }
}

// The selected slice outlined: the host op, its device copy or tasks, or a task's launching op.
void TimelineView::paintSelection(QPainter& p, const Track& t, const Lane& lane) {
  const bool device = lane.kind != LaneKind::kThread;
  auto outline = [&](SliceRef r) {
    if (!r.valid() || r.lane != t.lane) return;
    const QRectF rr = sliceRect(r);
    p.setPen(QPen(QColor(0x10, 0x10, 0x10), 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(rr.adjusted(0, 0, std::max(0.0, 2 - rr.width()), 0));
  };
  outline(selected_);
  if (selected_.valid()) {
    const LaneKind sk = data_->lanes()[static_cast<size_t>(selected_.lane)].kind;
    if (sk == LaneKind::kThread) {
      if (lane.kind == LaneKind::kDevice) outline(data_->deviceCopyOf(selected_));
      if (lane.kind == LaneKind::kTasks) {
        for (SliceRef r : data_->tasksOf(selected_)) outline(r);
      }
    } else if (sk == LaneKind::kDevice && !device) {
      outline(data_->findById(data_->slice(selected_).id));
    } else if (sk == LaneKind::kTasks && !device) {
      outline(data_->launchOf(selected_));
    }
  }
}

// The lane's title and size in the gutter, and the line under the lane.
void TimelineView::paintLaneTitle(QPainter& p, const Track& t, const Lane& lane, int y) {
  p.fillRect(QRect(0, y, kGutter - 1, t.height), kGutterBg);
  p.setPen(kText);
  QFont bold = p.font();
  bold.setBold(true);
  p.save();
  p.setFont(bold);
  p.drawText(QRect(8, y + 2, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft,
             QFontMetrics(bold).elidedText(QString::fromStdString(lane.title), Qt::ElideRight, kGutter - 14));
  p.restore();
  p.setPen(kMutedText);
  QString sub;
  if (lane.kind == LaneKind::kDevice && lane.device >= 0) sub = tr("%L1 kernels of a real npu").arg(lane.slices.size());
  else if (lane.kind == LaneKind::kDevice) sub = tr("%L1 ops of a real host").arg(lane.slices.size());
  else if (lane.kind == LaneKind::kTasks) sub = tr("%L1 tasks").arg(lane.slices.size());
  else if (data_->partial()) sub = tr("%L1 ops (%L2 loaded)").arg(lane.total_ops).arg(lane.slices.size());
  else sub = tr("%L1 ops").arg(lane.slices.size());
  if (t.height >= 2 * kRow) p.drawText(QRect(8, y + 2 + kRow, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft, sub);
  p.setPen(kGrid);
  p.drawLine(0, y + t.height + kLaneGap / 2, width(), y + t.height + kLaneGap / 2);
}

void TimelineView::paintDensity(QPainter& p, const Lane& lane, int y, int height) {
  const int bins = std::max(1, plotWidth() / 2);
  std::vector<double> ops(static_cast<size_t>(bins), 0.0);
  const int64_t vb = viewBegin(), ve = viewEnd();
  for (const DensityBlock& b : lane.blocks) {
    if (b.end_ns <= vb || b.begin_ns >= ve) continue;
    // The block's ops spread evenly over its span, into 2-pixel bins.
    const double x0 = (xAt(b.begin_ns) - kGutter) / 2, x1 = (xAt(std::max(b.end_ns, b.begin_ns + 1)) - kGutter) / 2;
    const double per = static_cast<double>(b.ops) / std::max(1e-9, x1 - x0);
    for (int k = std::max(0, static_cast<int>(x0)); k < bins && k <= static_cast<int>(x1); ++k) {
      const double part = std::min<double>(k + 1, x1) - std::max<double>(k, x0);
      if (part > 0) ops[static_cast<size_t>(k)] += per * part;
    }
  }
  const int rows_h = height - 4;
  for (int k = 0; k < bins; ++k) {
    const double v = ops[static_cast<size_t>(k)];
    if (v <= 0) continue;
    p.fillRect(QRectF(kGutter + 2.0 * k, y + 2, 2.0, rows_h), densityColor(v / 2));
    ++last_rects_;
  }
  // Whether a window is read depends on the ops of every lane in view; the text gives this lane's.
  double here = 0;
  for (double v : ops) here += v;
  const qint64 lane_ops = std::llround(here);
  QString text = data_->estimateOps(vb, ve) > window_budget_ops_
                     ? tr("~%L1 ops here \u00b7 zoom in to see them").arg(lane_ops)
                     : tr("loading ~%L1 ops\u2026").arg(lane_ops);
  const QFontMetrics fm(p.font());
  QRectF box(kGutter + 8, y + 2 + rows_h / 2.0 - kRow / 2.0, fm.horizontalAdvance(text) + 12, kRow);
  p.fillRect(box, QColor(255, 255, 255, 220));
  p.setPen(kText);
  p.drawText(box, Qt::AlignCenter, text);
}

void TimelineView::paintLaunchLinks(QPainter& p) {
  if (!selected_.valid()) return;
  std::vector<std::pair<SliceRef, SliceRef>> links;  // (host op, task)
  const LaneKind sk = data_->lanes()[static_cast<size_t>(selected_.lane)].kind;
  if (sk == LaneKind::kThread) {
    for (SliceRef t : data_->tasksOf(selected_)) links.push_back({selected_, t});
  } else if (sk == LaneKind::kTasks) {
    const SliceRef h = data_->launchOf(selected_);
    if (h.valid()) links.push_back({h, selected_});
  }
  if (links.size() > 256) links.resize(256);
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  const QColor c(0x1f, 0x5f, 0xbf);
  p.setPen(QPen(c, 1.4));
  for (const auto& [h, t] : links) {
    const QRectF hr = sliceRect(h), tr_ = sliceRect(t);
    if (hr.isNull() || tr_.isNull()) continue;
    const bool below = tr_.top() >= hr.bottom();  // device lanes sit below the host threads
    const QPointF a(std::max<double>(kGutter, hr.left()), below ? hr.bottom() : hr.top());
    const QPointF b(std::max<double>(kGutter, tr_.left()), below ? tr_.top() : tr_.bottom());
    p.drawLine(a, b);
    // Arrow head at the task.
    const double ang = std::atan2(b.y() - a.y(), b.x() - a.x());
    QPolygonF head;
    head << b << b - QPointF(7 * std::cos(ang - 0.4), 7 * std::sin(ang - 0.4))
         << b - QPointF(7 * std::cos(ang + 0.4), 7 * std::sin(ang + 0.4));
    p.setBrush(c);
    p.drawPolygon(head);
  }
  p.restore();
}

void TimelineView::paintMemory(QPainter& p, const Track& t, int y) {
  const bool detail = !memory_detail_.empty() && memory_detail_window_.begin_ns <= viewBegin() &&
                      memory_detail_window_.end_ns >= viewEnd();
  const auto& samples = detail ? memory_detail_ : memory_overview_;
  int64_t peak = 1;
  for (const auto& s : memory_overview_) peak = std::max(peak, s.reserved);
  for (const auto& s : memory_categories_) peak = std::max(peak, s.allocated);
  const double h = t.height - 6;
  auto yOf = [&](int64_t v) { return y + 3 + h - h * static_cast<double>(v) / static_cast<double>(peak); };
  // One device per polygon; samples are in time order.
  std::vector<int32_t> devices;
  for (const auto& s : samples) {
    if (std::find(devices.begin(), devices.end(), s.device) == devices.end()) devices.push_back(s.device);
  }
  p.save();
  p.setClipRect(QRect(kGutter, std::max(y, tracksTop()), width() - kGutter, t.height));
  p.setRenderHint(QPainter::Antialiasing, false);
  const bool stacked = !memory_categories_.empty();
  if (stacked) paintMemoryCategories(p, y, h, peak);
  for (size_t di = 0; di < devices.size(); ++di) {
    QPolygonF alloc, reserved;
    double last_x = -1e9;
    int64_t last_a = 0, last_r = 0;
    alloc << QPointF(kGutter, y + 3 + h);
    for (const auto& s : samples) {
      if (s.device != devices[di]) continue;
      const double x = std::clamp(xAt(s.ts_ns), static_cast<double>(kGutter) - 1, static_cast<double>(width()) + 1);
      if (x - last_x < 1.0 && !alloc.isEmpty() && alloc.size() > 1) {
        // Same pixel: keep the higher value (peaks survive).
        if (s.allocated > last_a) alloc.back().setY(yOf(last_a = s.allocated));
        if (s.reserved > last_r) reserved.back().setY(yOf(last_r = s.reserved));
        continue;
      }
      if (alloc.size() > 1) {
        alloc << QPointF(x, alloc.back().y());
        reserved << QPointF(x, reserved.back().y());
      }
      alloc << QPointF(x, yOf(s.allocated));
      reserved << QPointF(x, yOf(s.reserved));
      last_x = x;
      last_a = s.allocated;
      last_r = s.reserved;
    }
    if (alloc.size() < 2) continue;
    alloc << QPointF(width(), alloc.back().y()) << QPointF(width(), y + 3 + h);
    reserved << QPointF(width(), reserved.back().y());
    const QColor c = QColor::fromHsv((205 + static_cast<int>(di) * 90) % 360, 150, 190);
    if (!stacked) {  // the categories show allocated bytes already
      p.setPen(Qt::NoPen);
      p.setBrush(QColor(c.red(), c.green(), c.blue(), 120));
      p.drawPolygon(alloc);
    }
    p.setPen(QPen(c.darker(130), 1));
    p.setBrush(Qt::NoBrush);
    p.drawPolyline(reserved);
    ++last_rects_;
  }
  p.restore();
  p.fillRect(QRect(0, y, kGutter - 1, t.height), kGutterBg);
  QFont bold = p.font();
  bold.setBold(true);
  p.save();
  p.setFont(bold);
  p.setPen(kText);
  p.drawText(QRect(8, y + 2, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft, tr("npu memory"));
  p.restore();
  p.setPen(kMutedText);
  p.drawText(QRect(8, y + 2 + kRow, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft,
             tr("peak %1 reserved").arg(formatBytes(peak)));
  p.drawText(QRect(8, y + 2 + 2 * kRow, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft,
             memory_categories_.empty() ? tr("area: allocated") : tr("areas: by owner (hover, click)"));
}

void TimelineView::paintLossScale(QPainter& p, const Track& t, int y) {
  const auto& steps = data_->steps();
  double lo = 1e300, hi = -1e300;
  for (const StepRow& s : steps) {
    if (!s.loss_scale || *s.loss_scale <= 0) continue;
    lo = std::min(lo, std::log2(*s.loss_scale));
    hi = std::max(hi, std::log2(*s.loss_scale));
  }
  if (lo > hi) return;
  if (hi - lo < 1) {
    lo -= 0.5;
    hi += 0.5;
  }
  const double h = t.height - 8;
  auto yOf = [&](double scale) { return y + 4 + h - h * (std::log2(scale) - lo) / (hi - lo); };
  p.save();
  p.setClipRect(QRect(kGutter, std::max(y, tracksTop()), width() - kGutter, t.height));
  QPolygonF line;
  for (const StepRow& s : steps) {
    if (!s.loss_scale || *s.loss_scale <= 0) continue;
    const double x0 = xAt(s.start_ns), x1 = xAt(s.start_ns + s.dur_ns);
    if (x1 < kGutter - 2 || x0 > width() + 2) continue;
    const double yy = yOf(*s.loss_scale);
    line << QPointF(std::max<double>(x0, kGutter - 2), yy) << QPointF(std::min<double>(x1, width() + 2), yy);
    if (s.overflow && x1 - x0 >= 0) {
      const double cx = std::clamp((x0 + x1) / 2, static_cast<double>(kGutter), static_cast<double>(width()));
      QPolygonF tri;
      tri << QPointF(cx - 4, y + 2) << QPointF(cx + 4, y + 2) << QPointF(cx, y + 9);
      p.setPen(Qt::NoPen);
      p.setBrush(kOverflow);
      p.drawPolygon(tri);
    }
  }
  p.setPen(QPen(QColor(0x2a, 0x7a, 0x4b), 1.5));
  p.setBrush(Qt::NoBrush);
  p.drawPolyline(line);
  p.restore();
  p.fillRect(QRect(0, y, kGutter - 1, t.height), kGutterBg);
  QFont bold = p.font();
  bold.setBold(true);
  p.save();
  p.setFont(bold);
  p.setPen(kText);
  p.drawText(QRect(8, y + 2, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft, tr("loss scale (log)"));
  p.restore();
  p.setPen(kMutedText);
  p.drawText(QRect(8, y + 2 + kRow, kGutter - 14, kRow), Qt::AlignVCenter | Qt::AlignLeft,
             tr("2^%1 \u2013 2^%2").arg(std::ceil(lo)).arg(std::floor(hi)));
}

// ---------------------------------------------------------------------------------------------
// Input

void TimelineView::mousePressEvent(QMouseEvent* e) {
  setFocus();
  press_pos_ = e->pos();
  press_view_begin_ = view_begin_;
  press_scroll_ = scroll_y_;
  moved_ = false;
  if (e->button() == Qt::LeftButton) {
    const bool header = e->pos().y() < tracksTop();
    drag_ = (header || (e->modifiers() & Qt::ShiftModifier)) ? Drag::kSelect : Drag::kPan;
  } else if (e->button() == Qt::MiddleButton || e->button() == Qt::RightButton) {
    drag_ = Drag::kPan;
  }
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  mouse_pos_ = e->pos();
  if (drag_ == Drag::kNone) return;
  if (!moved_ && (e->pos() - press_pos_).manhattanLength() < 4) return;
  moved_ = true;
  if (drag_ == Drag::kPan) {
    setCursor(Qt::ClosedHandCursor);
    view_begin_ = press_view_begin_ - static_cast<int64_t>(std::llround((e->pos().x() - press_pos_.x()) * ns_per_px_));
    scroll_y_ = press_scroll_ - (e->pos().y() - press_pos_.y());
    clampScroll();
    clampView();
    emitViewChanged();
  } else {
    const int64_t a = timeAt(std::max(press_pos_.x(), kGutter)), b = timeAt(std::max(e->pos().x(), kGutter));
    setRange({std::min(a, b), std::max(a, b)});
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  const Drag drag = drag_;
  drag_ = Drag::kNone;
  unsetCursor();
  if (drag == Drag::kNone) return;
  if (moved_) {
    if (drag == Drag::kSelect && has_range_) emit rangeSelected(range_.begin_ns, range_.end_ns);
    return;
  }
  // A click.
  const int64_t step = stepAt(e->pos());
  if (step >= 0) {
    fitStep(step);
    return;
  }
  if (e->pos().y() < tracksTop()) return;
  if (const Track* t = trackAt(e->pos().y());
      t && t->kind == TrackKind::kMemory && e->pos().x() >= kGutter && !memory_categories_.empty()) {
    emit memoryClicked(timeAt(e->pos().x()));
    return;
  }
  const SliceRef r = sliceAt(e->pos());
  if (!r.valid() && has_range_) clearRange();
  selectSlice(r, false);
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* e) {
  const SliceRef r = sliceAt(e->pos());
  if (!r.valid() || !data_) return;
  const Slice& s = data_->slice(r);
  fitWindow(s.start_ns, s.end());
  selectSlice(r, false);
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  const QPoint delta = e->angleDelta();
  const double x = e->position().x();
  if (e->modifiers() & Qt::ControlModifier) {
    zoomAt(std::pow(0.85, delta.y() / 120.0), std::max<double>(x, kGutter));
  } else if ((e->modifiers() & Qt::ShiftModifier) || std::abs(delta.x()) > std::abs(delta.y())) {
    const int d = delta.x() != 0 ? delta.x() : delta.y();
    panPixels(-d / 120.0 * plotWidth() * 0.1);
  } else {
    scroll_y_ -= delta.y() / 3;
    clampScroll();
    update();
  }
  e->accept();
}

void TimelineView::keyPressEvent(QKeyEvent* e) {
  const double anchor = rect().contains(mouse_pos_) && mouse_pos_.x() >= kGutter ? mouse_pos_.x()
                                                                                 : kGutter + plotWidth() / 2.0;
  switch (e->key()) {
    case Qt::Key_W: zoomAt(0.8, anchor); break;
    case Qt::Key_S: zoomAt(1.25, anchor); break;
    case Qt::Key_A: panPixels(-plotWidth() * 0.15); break;
    case Qt::Key_D: panPixels(plotWidth() * 0.15); break;
    case Qt::Key_F: {
      const StepRow* s = nullptr;
      if (selected_.valid()) s = data_ ? data_->stepByIndex(data_->slice(selected_).step) : nullptr;
      if (!s && data_) s = data_->stepAt(timeAt(anchor));
      if (s) fitStep(s->step);
      break;
    }
    case Qt::Key_0:
    case Qt::Key_Home: fitAll(); break;
    case Qt::Key_Escape:
      clearRange();
      selectSlice({}, false);
      break;
    default: QWidget::keyPressEvent(e); return;
  }
  e->accept();
}

bool TimelineView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && data_) {
    auto* he = static_cast<QHelpEvent*>(e);
    const SliceRef r = sliceAt(he->pos());
    const int64_t band_step = stepAt(he->pos());
    if (band_step >= 0) {
      const StepRow* st = data_->stepByIndex(band_step);
      QString text = tr("<b>ProfilerStep#%1</b><br>%2").arg(band_step).arg(st ? formatNs(st->dur_ns) : QString());
      if (st && st->overflow) text += tr(" \u00b7 overflow");
      if (st && st->skipped) text += tr(" \u00b7 skipped");
      if (const PredictedStep* ps = data_->predictedStep(band_step)) {
        text += tr(" (emulator, measured)<br>predicted on a real npu: %1")
                    .arg(QString::fromStdString(describePredictedStep(*ps)).toHtmlEscaped());
      } else if (const StepDeviceTime* sd = stepDevice(band_step); sd && st && st->dur_ns > 0 && sd->device_ops > 0) {
        text += tr("<br>device busy %1 (%2 %) \u00b7 idle %3 \u2014 real device lane")
                    .arg(formatNs(sd->device_busy_ns))
                    .arg(100.0 * static_cast<double>(sd->device_busy_ns) / static_cast<double>(st->dur_ns), 0, 'f', 1)
                    .arg(formatNs(std::max<int64_t>(0, st->dur_ns - sd->device_busy_ns)));
      }
      QToolTip::showText(he->globalPos(), text, this);
    } else if (const Track* t = trackAt(he->pos().y());
               t && t->kind == TrackKind::kMemory && he->pos().x() >= kGutter && !memory_categories_.empty()) {
      const CategorySample* m = categorySampleAt(timeAt(he->pos().x()));
      if (!m) {
        QToolTip::hideText();
        return true;
      }
      QString text = tr("<b>npu memory</b> %1 allocated").arg(formatBytes(m->allocated));
      for (int c = 0; c < kMemoryCategoryCount; ++c) {
        if (m->bytes[c] <= 0) continue;
        text += QString("<br><span style='color:%1'>■</span> %2 %3")
                    .arg(memoryCategoryColor(c).name(), QString::fromLatin1(memoryCategoryName(c)),
                         formatBytes(m->bytes[c]));
      }
      text += tr("<br><i>click: the live tensors then</i>");
      QToolTip::showText(he->globalPos(), text, this);
    } else if (r.valid()) {
      const Slice& s = data_->slice(r);
      QString text = QString("<b>%1</b><br>%2").arg(QString::fromStdString(data_->str(s.name)).toHtmlEscaped(),
                                                     formatNs(s.dur_ns));
      if (s.step >= 0) text += tr(" \u00b7 step %1").arg(s.step);
      QToolTip::showText(he->globalPos(), text, this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace npuscope::gui
