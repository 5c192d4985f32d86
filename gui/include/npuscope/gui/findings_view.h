// The Findings tab: the advisor's findings over the current run (analysis/advisor.h, the same as
// `npuscope advise`), most severe first, each with its evidence and suggestion. Activating a
// finding shows what it concerns: its ops highlighted on the timeline, or its first step opened.
#pragma once

#include <QWidget>
#include <vector>

#include "npuscope/analysis/advisor.h"

class QLabel;
class QTreeWidget;
class QTreeWidgetItem;

namespace npuscope::gui {

class TraceDocument;

class FindingsView : public QWidget {
  Q_OBJECT
 public:
  explicit FindingsView(TraceDocument* doc, QWidget* parent = nullptr);
  // Re-runs the advisor over the current run.
  void refresh();
  const std::vector<Finding>& findings() const { return findings_; }
  QTreeWidget* tree() const { return tree_; }
  // Shows what finding `i` concerns (as activating its row does).
  void activate(int i);

 signals:
  void opsActivated(const QStringList& ops);
  void stepActivated(qint64 step);

 private:
  TraceDocument* doc_;
  QLabel* summary_;
  QTreeWidget* tree_;
  std::vector<Finding> findings_;
};

}  // namespace npuscope::gui
