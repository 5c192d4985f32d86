// The cluster view of a multi-rank job (msprof-analyze's cluster analysis, HTA's temporal
// breakdown, Perfetto's multi-process timeline): core's cluster report of the job's rank files,
// its ranks stacked as lane groups on one wall-clock axis — each rank's steps, the time its
// device computed, and its collectives — and tables of every step's breakdown and of the
// communication per rank.
//
// A collective's slice is split where the last rank of its group enqueued it: before that the
// rank was waiting for its peers (pale), after it the collective ran (solid). Clicking a
// collective selects it on every rank by its (group, seq) pair — the same collective has the
// same pair on each rank — outlines it everywhere, marks the last arrival with a line across the
// groups and lists it rank by rank. Clicking a step fits that step on every rank.
//
// Input as on the timeline: Ctrl+wheel or W/S zoom around the mouse, drag or A/D pan, 0 fits
// the job; plain wheel scrolls the ranks.
#pragma once

#include <QFutureWatcher>
#include <QWidget>
#include <memory>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "npuscope/analysis/cluster.h"

class QLabel;
class QSplitter;
class QTableWidget;
class QTabWidget;

namespace npuscope::gui {

// A collective of the job: its (group, seq) pair. Imported runs: group -1, seq its place among
// the rank's collectives of the same kind.
struct CollectiveKey {
  int64_t group = 0, seq = 0;
  bool operator<(const CollectiveKey& o) const { return group != o.group ? group < o.group : seq < o.seq; }
  bool operator==(const CollectiveKey& o) const { return group == o.group && seq == o.seq; }
};

// One collective row of one rank: rank index into the report's ranks, row index into its
// collective_rows.
struct CollectiveRef {
  int rank = -1;
  int index = -1;
  bool valid() const { return rank >= 0; }
};

class ClusterTimeline : public QWidget {
  Q_OBJECT
 public:
  explicit ClusterTimeline(QWidget* parent = nullptr);

  // Shows the report (not owned; nullptr clears) and fits the job.
  void setReport(const cluster::Report* report);

  // ---- the job's axis: wall-clock nanoseconds ----
  // A rank's own time on the job's axis (Unix ns).
  int64_t wallOf(int rank, int64_t t) const;
  int64_t jobBegin() const { return begin_; }
  int64_t jobEnd() const { return end_; }
  double xAt(int64_t wall) const;
  int64_t wallAt(double x) const;
  int64_t viewBegin() const { return view_begin_; }
  double nsPerPixel() const { return ns_per_px_; }
  void setView(int64_t begin_wall, double ns_per_px);
  void zoomAt(double factor, double x);
  void panPixels(double dx);
  void fitAll();
  void fitWindow(int64_t begin_wall, int64_t end_wall);
  // Fits step `step` across every rank (the earliest start to the latest end); false if no rank has it.
  bool fitStep(int64_t step);

  // ---- geometry and hit testing ----
  enum Lane { kStepsLane, kComputingLane, kCommunicationLane, kLanes };
  // The top of rank group `rank` (its title row), and of one of its lanes.
  int groupTop(int rank) const;
  int laneTop(int rank, Lane lane) const;
  QRectF collectiveRect(CollectiveRef c) const;
  CollectiveRef collectiveAt(const QPoint& p) const;
  // The step whose box is at p on a steps lane, or -1.
  int64_t stepAt(const QPoint& p) const;

  // ---- the selected collective ----
  // Selects the collective `key` on every rank; false when no rank has it.
  bool selectCollective(CollectiveKey key);
  void clearSelection();
  bool hasSelection() const { return has_selection_; }
  CollectiveKey selection() const { return selected_; }
  // Every rank's row of the selected collective (one per rank that has it, in rank order).
  std::vector<CollectiveRef> selectedRows() const;
  // When the last rank of a collective enqueued it (its wall time), and which rank that was.
  std::pair<int64_t, int> lastArrival(CollectiveKey key) const;
  const CollectiveRow& row(CollectiveRef c) const;
  CollectiveKey keyOf(CollectiveRef c) const;

  QSize sizeHint() const override;

  static constexpr int kGutter = 150;
  static constexpr int kRuler = 22;
  static constexpr int kTitle = 20;
  static constexpr int kLane = 18;
  static constexpr int kGap = 6;

 signals:
  void collectiveSelected(qint64 group, qint64 seq);
  void selectionCleared();
  void stepClicked(qint64 step);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  bool event(QEvent*) override;

 private:
  int plotWidth() const { return std::max(1, width() - kGutter); }
  QString tooltipAt(const QPoint& p) const;
  void paintRank(class QPainter& p, int rank);

  const cluster::Report* report_ = nullptr;
  int64_t begin_ = 0, end_ = 1;
  int64_t view_begin_ = 0;
  double ns_per_px_ = 1;
  bool has_selection_ = false;
  CollectiveKey selected_;
  QPoint press_pos_;
  int64_t press_view_ = 0;
  bool dragging_ = false;
};

class ClusterView : public QWidget {
  Q_OBJECT
 public:
  explicit ClusterView(QWidget* parent = nullptr);

  // Reads the job's rank files (trace files or folders of them; of several jobs the newest
  // unless `job` names one) and shows it; jobLoaded follows. On an error: the message in the
  // view, errorOccurred, false. Not `sync`: read on a worker thread (every step of every rank
  // is read), the view saying so meanwhile; returns true, a newer request replaces a waiting one.
  bool openJob(const std::vector<std::string>& paths, const std::string& job = "", bool sync = true);
  bool loading() const { return watcher_ != nullptr; }
  void clear(const QString& message);

  const cluster::Report* report() const { return has_report_ ? &report_ : nullptr; }
  ClusterTimeline* timeline() const { return timeline_; }
  QLabel* summary() const { return summary_; }
  // Rows: rank and step; columns: the breakdown (ms).
  QTableWidget* stepTable() const { return steps_; }
  // The selected collective on every rank.
  QTableWidget* collectiveTable() const { return selected_; }
  // Communication per rank and collective kind.
  QTableWidget* communicationTable() const { return comm_; }
  QTabWidget* tables() const { return tables_; }

 signals:
  void errorOccurred(const QString& message);
  void jobLoaded(bool ok);

 private:
  bool present(StatusOr<cluster::Report> rep);
  void fillTables();
  void showSelected();
  QFutureWatcher<std::shared_ptr<StatusOr<cluster::Report>>>* watcher_ = nullptr;
  bool has_pending_ = false;
  std::vector<std::string> pending_paths_;
  std::string pending_job_;

  cluster::Report report_;
  bool has_report_ = false;
  QLabel* summary_;
  ClusterTimeline* timeline_;
  QSplitter* split_;
  QTabWidget* tables_;
  QTableWidget* steps_;
  QTableWidget* selected_;
  QTableWidget* comm_;
};

}  // namespace npuscope::gui
