#include "npuscope/gui/findings_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "npuscope/gui/trace_document.h"

namespace npuscope::gui {

namespace {

QColor severityColor(Severity s) {
  switch (s) {
    case Severity::kCritical: return QColor(0xf4, 0xc7, 0xc3);
    case Severity::kWarning: return QColor(0xfb, 0xe6, 0xb8);
    case Severity::kInfo: break;
  }
  return QColor(0xdd, 0xe9, 0xf7);
}

// Long evidence and suggestions on several lines (the tree does not wrap by itself).
QString wrapped(const std::string& text, int width = 130) {
  QString out;
  int line = 0;
  for (const QString& word : QString::fromStdString(text).split(' ')) {
    if (line > 0 && line + word.size() + 1 > width) {
      out += '\n';
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
  }
  return out;
}

}  // namespace

FindingsView::FindingsView(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  tree_ = new QTreeWidget(this);
  tree_->setColumnCount(3);
  tree_->setHeaderLabels({tr("Severity"), tr("Finding"), tr("Rule")});
  tree_->setRootIsDecorated(true);
  tree_->setWordWrap(true);
  tree_->setUniformRowHeights(false);
  tree_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  tree_->header()->setSectionResizeMode(1, QHeaderView::Stretch);
  tree_->header()->setSectionResizeMode(2, QHeaderView::ResizeToContents);
  tree_->header()->setStretchLastSection(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(tree_, 1);
  connect(doc_, &TraceDocument::runLoaded, this, [this](qint64, bool refreshed) {
    if (!refreshed) refresh();
  });
  connect(tree_, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) {
    while (item->parent()) item = item->parent();
    activate(tree_->indexOfTopLevelItem(item));
  });
  refresh();
}

void FindingsView::refresh() {
  tree_->clear();
  findings_.clear();
  if (!doc_->reader() || doc_->currentRun() < 0) {
    summary_->setText(tr("Open a trace file and pick a run: its findings appear here."));
    return;
  }
  auto f = advise(*doc_->reader(), doc_->currentRun());
  if (!f.isOk()) {
    summary_->setText(QString::fromStdString(f.status().message()));
    emit doc_->errorOccurred(QString::fromStdString(f.status().message()));
    return;
  }
  findings_ = std::move(f).value();
  int critical = 0, warning = 0;
  for (const Finding& x : findings_) {
    critical += x.severity == Severity::kCritical;
    warning += x.severity == Severity::kWarning;
    auto* item = new QTreeWidgetItem(tree_, {QString(severityName(x.severity)), QString::fromStdString(x.title),
                                             QString::fromStdString(x.rule)});
    for (int c = 0; c < 3; ++c) item->setBackground(c, severityColor(x.severity));
    QFont bold = item->font(1);
    bold.setBold(true);
    item->setFont(1, bold);
    auto* ev = new QTreeWidgetItem(item, {tr("evidence"), wrapped(x.evidence)});
    auto* sug = new QTreeWidgetItem(item, {tr("suggestion"), wrapped(x.suggestion)});
    for (auto* child : {ev, sug}) child->setForeground(0, QColor(0x5d, 0x67, 0x75));
    if (!x.ops.empty() || !x.steps.empty()) {
      new QTreeWidgetItem(item, {QString(), x.ops.empty() ? tr("double-click: open step %1 on the timeline").arg(x.steps.front())
                                                          : tr("double-click: highlight the ops on the timeline")});
    }
    item->setExpanded(true);
  }
  summary_->setText(findings_.empty()
                        ? tr("<b>No findings</b>: none of the advisor's rules fired on run #%1.").arg(doc_->currentRun())
                        : tr("<b>%1 finding(s)</b> on run #%2: %3 critical, %4 warnings. The same rules as "
                             "<tt>npuscope advise</tt>.")
                              .arg(findings_.size())
                              .arg(doc_->currentRun())
                              .arg(critical)
                              .arg(warning));
}

void FindingsView::activate(int i) {
  if (i < 0 || i >= static_cast<int>(findings_.size())) return;
  const Finding& f = findings_[static_cast<size_t>(i)];
  if (!f.ops.empty()) {
    QStringList ops;
    for (const std::string& o : f.ops) ops << QString::fromStdString(o);
    emit opsActivated(ops);
  } else if (!f.steps.empty()) {
    emit stepActivated(f.steps.front());
  }
}

}  // namespace npuscope::gui
