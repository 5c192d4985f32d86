// The timeline: one custom-painted widget (no widget per slice) over a TimelineData. From the
// top: a time ruler, a band of ProfilerStep#N slices, then one track per thread (nested op
// slices by depth; the backward thread included), the modeled device stream of each npu, and
// the real device streams of an imported run (a selected op's launch links drawn to its tasks),
// counter tracks for device memory and the loss scale. Each step's band carries a bar of the
// device's busy share of it (the whole-run view's time split) and its overflow / skipped mark.
//
// Viewport: the time at the plot's left edge and a scale in ns per pixel, so x = left +
// (t - begin) / ns_per_px. Slices narrower than a pixel are merged into blocks a few pixels
// wide, shaded by how many ops they hold, and the scan jumps a pixel at a time, so a frame
// costs O(pixels x depth x log n) whatever the run's size. Where a partial run's ops are not in
// memory the lanes show op density from the block summaries, and the view asks for the window
// once it is small enough (windowWanted).
//
// Input: Ctrl+wheel or W/S zoom around the mouse; drag or A/D pan (Shift+wheel too); plain wheel
// scrolls the tracks; F fits the step under the mouse (or the selected slice's), 0 fits the
// run; drag on the ruler or step band, or Shift+drag anywhere, selects a time range; click
// selects a slice (click a step band to fit that step); double-click zooms to a slice.
#pragma once

#include <QElapsedTimer>
#include <QTimer>
#include <QWidget>
#include <functional>
#include <vector>

#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/gui/timeline_data.h"

namespace npuscope::gui {

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineView(QWidget* parent = nullptr);

  // Shows `data` (not owned; nullptr clears). keep_view keeps the viewport (live refresh).
  void setData(const TimelineData* data, bool keep_view = false);
  const TimelineData* data() const { return data_; }
  // The memory counter track: a whole-run overview, and a provider asked for a finer window
  // after zooming (debounced, never from paintEvent).
  void setMemoryOverview(std::vector<MemorySample> samples);
  // Memory by owner: bytes by category over time (analysis/memory_breakdown.h) for the memory
  // track, drawn as stacked areas (hover: bytes per category; click: memoryClicked). Empty: the
  // track draws allocated bytes alone.
  void setMemoryCategories(std::vector<CategorySample> series);
  void setMemoryProvider(std::function<std::vector<MemorySample>(const TimeWindow&, size_t)> provider);
  // An imported run's real device busy time per step: drawn as a bar under the step's band
  // (busy / step time) and given in its tooltip. An npu run's steps show their predicted
  // timeline instead (TimelineData::predictedStep).
  void setStepDeviceTimes(std::vector<StepDeviceTime> times);
  // Partial runs (TimelineData::partial()): the most ops a window may hold to be asked for.
  void setWindowBudget(int64_t ops) { window_budget_ops_ = ops; }
  // The window to ask for now: the view plus half a view on each side, when the view is not in
  // memory and holds at most the budget's ops; an empty window otherwise.
  TimeWindow wantedWindow() const;

  // ---- viewport arithmetic (public for tests) ----
  int plotLeft() const { return kGutter; }
  int plotWidth() const { return std::max(1, width() - kGutter); }
  int64_t viewBegin() const { return view_begin_; }
  int64_t viewEnd() const { return timeAt(width()); }
  double nsPerPixel() const { return ns_per_px_; }
  double xAt(int64_t t) const;
  int64_t timeAt(double x) const;
  void setView(int64_t begin_ns, double ns_per_px);
  // Zooms by `factor` (< 1: in) keeping the time under x fixed.
  void zoomAt(double factor, double x);
  void panPixels(double dx);
  void fitAll();
  void fitWindow(int64_t begin_ns, int64_t end_ns);
  bool fitStep(int64_t step);

  // ---- hit testing ----
  SliceRef sliceAt(const QPoint& p) const;
  // The slice's rectangle in widget coordinates (may lie outside the visible area).
  QRectF sliceRect(SliceRef r) const;
  // The step whose band is at p (the step band row), or -1.
  int64_t stepAt(const QPoint& p) const;

  // ---- selection and highlight ----
  void selectSlice(SliceRef r, bool reveal);
  SliceRef selectedSlice() const { return selected_; }
  void setRange(const TimeWindow& w);
  TimeWindow range() const { return range_; }
  bool hasRange() const { return has_range_; }
  void clearRange();
  // Highlights every op named `name` (and with these input shapes when shapes is non-null).
  void setHighlight(const QString& name, const QString* shapes = nullptr);
  // Highlights every op whose name contains `needle` (case-insensitive): search results.
  void setHighlightContaining(const QString& needle);
  void clearHighlight();
  bool highlightOn() const { return highlight_on_; }
  // Search results to mark (not owned).
  void setMatches(const std::vector<SliceRef>* matches) { matches_ = matches; update(); }

  // Last paint's duration and how many rectangles it drew (benchmarks, tests).
  double lastPaintMs() const { return last_paint_ms_; }
  int64_t lastPaintRects() const { return last_rects_; }

  QSize sizeHint() const override { return {1000, 520}; }

 signals:
  void sliceSelected(npuscope::gui::SliceRef ref);
  // The memory track was clicked at this time (its live set is wanted).
  void memoryClicked(qint64 ts_ns);
  void rangeSelected(qint64 begin_ns, qint64 end_ns);
  void rangeCleared();
  void viewChanged();
  // A partial run's view settled on a window whose ops are not in memory (debounced).
  void windowWanted(qint64 begin_ns, qint64 end_ns);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  bool event(QEvent*) override;

 public:
  static constexpr int kGutter = 168;
  static constexpr int kRuler = 22;
  static constexpr int kStepBand = 18;
  static constexpr int kRow = 17;
  static constexpr int kLaneGap = 8;
  static constexpr int kMemoryTrack = 56;
  static constexpr int kScaleTrack = 40;

 private:
  enum class TrackKind { kLane, kMemory, kLossScale };
  struct Track {
    TrackKind kind;
    int lane = -1;
    int top = 0;  // in track coordinates (before scrolling)
    int height = 0;
  };
  void layoutTracks();
  int tracksTop() const { return kRuler + kStepBand; }
  int contentHeight() const;
  int trackY(const Track& t) const { return tracksTop() + t.top - scroll_y_; }
  const Track* trackAt(int y) const;
  void clampView();
  void clampScroll();
  void emitViewChanged();

  void paintRuler(QPainter& p, int64_t tick);
  void paintSteps(QPainter& p);
  void paintLane(QPainter& p, const Track& t, int y);
  void paintRow(QPainter& p, const QFontMetrics& fm, const Lane& lane, int d, int ry);
  void paintHighlights(QPainter& p, const Lane& lane, int d, int ry);
  void paintSelection(QPainter& p, const Track& t, const Lane& lane);
  void paintLaneTitle(QPainter& p, const Track& t, const Lane& lane, int y);
  void paintDensity(QPainter& p, const Lane& lane, int y, int height);
  void paintLaunchLinks(QPainter& p);
  void paintMemory(QPainter& p, const Track& t, int y);
  void paintLossScale(QPainter& p, const Track& t, int y);
  bool highlighted(const Slice& s) const;

  const TimelineData* data_ = nullptr;
  std::vector<Track> tracks_;
  int64_t view_begin_ = 0;
  double ns_per_px_ = 1000;
  int scroll_y_ = 0;

  SliceRef selected_;
  TimeWindow range_;
  bool has_range_ = false;
  std::vector<uint8_t> highlight_names_;   // by string index
  uint32_t highlight_shapes_ = 0;          // 0: any shapes
  bool highlight_on_ = false;
  const std::vector<SliceRef>* matches_ = nullptr;

  std::vector<MemorySample> memory_overview_, memory_detail_;
  std::vector<CategorySample> memory_categories_;
  void paintMemoryCategories(QPainter& p, int y, double h, int64_t peak);
  // The category sample in force at `ts` (nullptr: none).
  const CategorySample* categorySampleAt(int64_t ts) const;
  std::vector<StepDeviceTime> step_device_;  // by step
  const StepDeviceTime* stepDevice(int64_t step) const;
  TimeWindow memory_detail_window_;
  std::function<std::vector<MemorySample>(const TimeWindow&, size_t)> memory_provider_;
  QTimer memory_timer_;
  QTimer window_timer_;
  int64_t window_budget_ops_ = 1500000;

  // Mouse interaction.
  enum class Drag { kNone, kPan, kSelect };
  Drag drag_ = Drag::kNone;
  QPoint press_pos_;
  int64_t press_view_begin_ = 0;
  int press_scroll_ = 0;
  bool moved_ = false;
  QPoint mouse_pos_;

  double last_paint_ms_ = 0;
  int64_t last_rects_ = 0;
};

// The colour of an op name: a stable pastel hue from the name's hash.
QColor sliceColor(const std::string& name);

}  // namespace npuscope::gui

Q_DECLARE_METATYPE(npuscope::gui::SliceRef)
