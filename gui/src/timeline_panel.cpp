#include "npuscope/gui/timeline_panel.h"
#include "npuscope/gui/memory_view.h"

#include <QTimer>

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QShortcut>
#include <QSplitter>
#include <QTableView>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

#include "npuscope/gui/models.h"
#include "npuscope/gui/timeline_view.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/units.h"

namespace npuscope::gui {

TimelinePanel::TimelinePanel(TraceDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  view_ = new TimelineView(this);
  QHBoxLayout* bar = toolBar();  // first: the focus chain follows creation
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(view_);
  split->addWidget(bottomPane());
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setSizes({520, 220});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar);
  layout->addWidget(split, 1);

  connectView();
  connectDocument();
}

// Search with its previous / next buttons and match count, the fit buttons, the keys hint.
QHBoxLayout* TimelinePanel::toolBar() {
  search_ = new QLineEdit(this);
  search_->setPlaceholderText(tr("Search ops by name (Enter: next)"));
  search_->setClearButtonEnabled(true);
  search_->setMaximumWidth(320);
  auto* prev = new QToolButton(this);
  prev->setText(tr("\u25b2 Prev"));
  auto* next = new QToolButton(this);
  next->setText(tr("\u25bc Next"));
  match_label_ = new QLabel(this);
  match_label_->setMinimumWidth(90);
  auto* fit = new QToolButton(this);
  fit->setText(tr("Fit run"));
  auto* fit_step = new QToolButton(this);
  fit_step->setText(tr("Fit step"));
  auto* hint = new QLabel(tr("Ctrl+wheel / W S: zoom \u00b7 drag / A D: pan \u00b7 Shift+drag or drag on ruler: "
                             "select range \u00b7 F: fit step \u00b7 click: details"),
                          this);
  hint->setStyleSheet("color: #6b7480;");
  hint->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  search_->setMinimumWidth(220);

  auto* bar = new QHBoxLayout();
  bar->setContentsMargins(6, 4, 6, 2);
  bar->addWidget(search_);
  bar->addWidget(prev);
  bar->addWidget(next);
  bar->addWidget(match_label_);
  bar->addSpacing(12);
  bar->addWidget(fit);
  bar->addWidget(fit_step);
  bar->addStretch(1);
  bar->addWidget(hint);

  connect(search_, &QLineEdit::textChanged, this, [this](const QString& t) { search(t); });
  connect(search_, &QLineEdit::returnPressed, this, &TimelinePanel::nextMatch);
  connect(next, &QToolButton::clicked, this, &TimelinePanel::nextMatch);
  connect(prev, &QToolButton::clicked, this, &TimelinePanel::previousMatch);
  connect(fit, &QToolButton::clicked, view_, &TimelineView::fitAll);
  connect(fit_step, &QToolButton::clicked, this, [this] {
    const TimelineData* d = view_->data();
    if (!d) return;
    const StepRow* s = view_->selectedSlice().valid() ? d->stepByIndex(d->slice(view_->selectedSlice()).step)
                                                      : d->stepAt((view_->viewBegin() + view_->viewEnd()) / 2);
    if (s) view_->fitStep(s->step);
  });
  return bar;
}

// Below the timeline: the clicked slice's details beside the selected range's op table.
QWidget* TimelinePanel::bottomPane() {
  details_ = new QTextBrowser(this);
  details_->setOpenLinks(false);
  details_->setPlaceholderText(tr("Click a slice to see its details."));
  range_label_ = new QLabel(tr("Select a time range (Shift+drag, or drag on the ruler) for its op summary."), this);
  range_label_->setWordWrap(true);
  range_model_ = new OpTableModel(this);
  range_proxy_ = new TableProxy(this);
  range_proxy_->setSourceModel(range_model_);
  range_table_ = new QTableView(this);
  range_table_->setModel(range_proxy_);
  range_table_->setSortingEnabled(true);
  range_table_->sortByColumn(OpTableModel::kSelf, Qt::DescendingOrder);
  range_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  range_table_->verticalHeader()->hide();
  range_table_->verticalHeader()->setDefaultSectionSize(20);
  range_table_->setColumnHidden(OpTableModel::kShapes, true);
  range_table_->setColumnHidden(OpTableModel::kTotalPct, true);
  range_table_->setColumnHidden(OpTableModel::kMin, true);
  range_table_->setColumnHidden(OpTableModel::kMax, true);
  range_table_->setColumnHidden(OpTableModel::kDeviceCalls, true);
  range_table_->setColumnHidden(OpTableModel::kAvg, true);
  range_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  range_table_->horizontalHeader()->setSectionResizeMode(OpTableModel::kName, QHeaderView::Stretch);

  auto* range_box = new QWidget(this);
  auto* rl = new QVBoxLayout(range_box);
  rl->setContentsMargins(0, 0, 0, 0);
  rl->addWidget(range_label_);
  rl->addWidget(range_table_);

  auto* bottom = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(details_);
  bottom->addWidget(range_box);
  bottom->setStretchFactor(0, 2);
  bottom->setStretchFactor(1, 3);
  return bottom;
}

// The view's clicks, ranges and links (and Ctrl+F) answered in the panel.
void TimelinePanel::connectView() {
  auto* find = new QShortcut(QKeySequence::Find, this);
  connect(find, &QShortcut::activated, search_, [this] { search_->setFocus(); search_->selectAll(); });
  connect(view_, &TimelineView::sliceSelected, this, [this](SliceRef r) { details_->setHtml(describe(r)); });
  connect(view_, &TimelineView::rangeSelected, this, [this](qint64 b, qint64 e) { summarizeRange(b, e); });
  connect(details_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    const TimelineData* d = view_->data();
    if (url.scheme() == "dump") {
      emit dumpActivated(url.path().toLongLong());
      return;
    }
    if (!d || url.scheme() != "op") return;
    const SliceRef r = d->findById(url.path().toLongLong());
    if (r.valid()) view_->selectSlice(r, true);
  });
}

// Runs, windows, step times and memory as the document loads them.
void TimelinePanel::connectDocument() {
  connect(doc_, &TraceDocument::runLoaded, this, &TimelinePanel::onRunLoaded);
  // A newly opened file (or the same one again) frees the old run's data at once.
  connect(doc_, &TraceDocument::fileOpened, this, [this] {
    view_->setData(nullptr);
    details_->clear();
  });
  // A partial run: the view asks for the ops of a window, the document loads them.
  connect(view_, &TimelineView::windowWanted, doc_, [this](qint64 b, qint64 e) { doc_->loadWindow({b, e}); });
  connect(doc_, &TraceDocument::stepTimesLoaded, this, [this] { view_->setStepDeviceTimes(doc_->stepDeviceTimes()); });
  connect(doc_, &TraceDocument::memoryLoaded, this, [this] { view_->setMemoryOverview(doc_->memoryOverview()); });
  connect(doc_, &TraceDocument::windowLoaded, this, [this] {
    view_->setData(doc_->timeline(), true);
    if (!search_->text().isEmpty()) search(search_->text());
  });
  view_->setMemoryProvider([this](const TimeWindow& w, size_t n) { return doc_->memory(w, n); });
  connect(view_, &TimelineView::memoryClicked, this, &TimelinePanel::showLiveMemory);
}

// Memory by owner on the memory track: read after the first paint (a run's blocks can be many).
void TimelinePanel::loadMemoryCategories() {
  view_->setMemoryCategories({});
  if (!doc_->reader() || doc_->currentRun() < 0) return;
  const std::vector<MemoryBlockRecord>& blocks = doc_->memoryBlocks();
  if (blocks.empty()) return;
  view_->setMemoryCategories(categorySeries(blocks, blocks.front().device, 4000));
}

void TimelinePanel::showLiveMemory(qint64 ts) {
  const std::vector<MemoryBlockRecord>& blocks = doc_->memoryBlocks();
  if (blocks.empty()) return;
  const LiveSet live = liveAtTime(blocks, blocks.front().device, ts);
  QString html = tr("<h3>npu:%1 memory at %2</h3><p>%3 in %4 live blocks: %5</p>")
                     .arg(live.device)
                     .arg(formatNs(view_->data() ? ts - view_->data()->beginNs() : ts))
                     .arg(formatBytes(live.allocated))
                     .arg(live.blocks.size())
                     .arg(QString::fromStdString(categorySummary(live)).toHtmlEscaped());
  html += tr("<table><tr><th align=right>size</th><th>category</th><th align=left>owner / allocating op</th></tr>");
  const size_t shown = std::min<size_t>(live.blocks.size(), 25);
  for (size_t i = 0; i < shown; ++i) {
    const MemoryBlockRecord& b = live.blocks[i];
    QString owner = QString::fromStdString(blockOwnerText(b, *doc_->reader())).toHtmlEscaped();
    if (b.owner.empty() && b.op_id >= 0) owner = QString("<a href='op:%1'>%2</a>").arg(b.op_id).arg(owner);
    html += QString("<tr><td align=right>%1</td><td><span style='color:%2'>■</span> %3</td><td>%4</td></tr>")
                .arg(formatBytes(b.size), memoryCategoryColor(b.category).name(),
                     QString::fromLatin1(memoryCategoryName(b.category)), owner);
  }
  html += "</table>";
  if (live.blocks.size() > shown) html += tr("<p>%1 more blocks (npuscope memory --at-op lists all)</p>").arg(live.blocks.size() - shown);
  details_->setHtml(html);
}

void TimelinePanel::onRunLoaded(qint64, bool refreshed) {
  view_->setData(doc_->timeline(), refreshed);  // first: the old data is gone
  if (!refreshed) view_->setStepDeviceTimes({});
  view_->setMemoryOverview(doc_->memoryOverview());
  if (!refreshed) {
    view_->setMemoryCategories({});
    QTimer::singleShot(0, this, &TimelinePanel::loadMemoryCategories);
  }
  matches_.clear();
  match_ = -1;
  if (!search_->text().isEmpty()) search(search_->text());
  if (!refreshed) {
    details_->clear();
    range_model_->setTable({}, false);
  }
}

int TimelinePanel::search(const QString& text) {
  matches_.clear();
  match_ = -1;
  const TimelineData* d = view_->data();
  if (d && !text.isEmpty()) matches_ = d->search(text.toStdString());
  if (text.isEmpty()) {
    match_label_->clear();
    view_->clearHighlight();
  } else {
    match_label_->setText(matches_.empty() ? tr("no match") : tr("%L1 matches").arg(matches_.size()));
    // Highlight every name that matched.
    if (!matches_.empty()) view_->setHighlightContaining(text);
    else view_->clearHighlight();
  }
  return static_cast<int>(matches_.size());
}

void TimelinePanel::nextMatch() {
  if (matches_.empty()) return;
  // The first match after the view's centre when starting, else the following one.
  if (match_ < 0) {
    const int64_t centre = (view_->viewBegin() + view_->viewEnd()) / 2;
    match_ = 0;
    while (match_ < static_cast<int>(matches_.size()) - 1 &&
           view_->data()->slice(matches_[static_cast<size_t>(match_)]).start_ns < view_->viewBegin() &&
           view_->data()->slice(matches_[static_cast<size_t>(match_)]).start_ns < centre) {
      ++match_;
    }
  } else {
    match_ = (match_ + 1) % static_cast<int>(matches_.size());
  }
  showMatch();
}

void TimelinePanel::previousMatch() {
  if (matches_.empty()) return;
  match_ = match_ <= 0 ? static_cast<int>(matches_.size()) - 1 : match_ - 1;
  showMatch();
}

void TimelinePanel::showMatch() {
  const SliceRef r = matches_[static_cast<size_t>(match_)];
  view_->selectSlice(r, true);
  match_label_->setText(tr("%L1 of %L2").arg(match_ + 1).arg(matches_.size()));
}

QString TimelinePanel::describe(SliceRef r) const {
  const TimelineData* d = view_->data();
  if (!d || !r.valid()) return {};
  const Lane& lane = d->lanes()[static_cast<size_t>(r.lane)];
  auto esc = [](const std::string& v) { return QString::fromStdString(v).toHtmlEscaped(); };
  auto row = [](const QString& k, const QString& v) {
    return QString("<tr><td style='color:#5d6775;padding-right:12px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  if (lane.kind == LaneKind::kTasks) {  // a real device task of an imported run
    const Slice& t = d->slice(r);
    QString html = QString("<h3 style='margin:2px 0'>%1</h3><table cellspacing=0 cellpadding=1>").arg(esc(d->str(t.name)));
    html += row(tr("Stream"), esc(lane.title));
    html += row(tr("Task type"), t.dtypes ? esc(d->str(t.dtypes)) : tr("not recorded"));
    html += row(tr("Start"), formatOffset(t.start_ns, d->beginNs(), 1000));
    html += row(tr("Duration (real)"), formatNs(t.dur_ns));
    html += row(tr("Step"), t.step >= 0 ? QString::number(t.step) : tr("\u2013"));
    if (t.shapes) html += row(tr("Input shapes"), esc(d->str(t.shapes)));
    const SliceRef h = d->launchOf(r);
    if (h.valid()) {
      const Slice& hs = d->slice(h);
      html += row(tr("Launched by"), QString("<a href='op:%1'>%2</a> (%3, %4 before the task)")
                                         .arg(hs.id)
                                         .arg(esc(d->str(hs.name)))
                                         .arg(esc(d->lanes()[static_cast<size_t>(h.lane)].title))
                                         .arg(formatNs(t.start_ns - hs.start_ns)));
    } else {
      html += row(tr("Launched by"), t.parent_id >= 0 ? tr("op #%1 (not loaded)").arg(t.parent_id) : tr("unknown"));
    }
    html += row(tr("Task id"), QString::number(t.id));
    return html + "</table>";
  }
  SliceRef host = r;
  if (lane.kind == LaneKind::kDevice) host = d->findById(d->slice(r).id);
  if (!host.valid()) return {};
  const Slice& s = d->slice(host);
  const Lane& hl = d->lanes()[static_cast<size_t>(host.lane)];
  QString html = QString("<h3 style='margin:2px 0'>%1</h3><table cellspacing=0 cellpadding=1>").arg(esc(d->str(s.name)));
  html += row(tr("Thread"), esc(hl.title));
  html += row(tr("Start"), formatOffset(s.start_ns, d->beginNs(), 1000));
  html += row(tr("Total"), formatNs(s.dur_ns));
  html += row(tr("Self"), formatNs(d->selfNs(host)));
  html += row(tr("Step"), s.step >= 0 ? QString::number(s.step) : tr("\u2013"));
  html += row(tr("Depth"), QString::number(s.depth));
  if (s.parent_id >= 0) {
    const SliceRef p = d->findById(s.parent_id);
    html += row(tr("Parent"), p.valid() ? QString("<a href='op:%1'>%2</a>").arg(s.parent_id).arg(esc(d->str(d->slice(p).name)))
                                        : tr("#%1 (not recorded)").arg(s.parent_id));
  }
  html += row(tr("Input shapes"), s.shapes ? esc(d->str(s.shapes)) : tr("not recorded"));
  html += row(tr("Input dtypes"), s.dtypes ? esc(d->str(s.dtypes)) : (s.shapes ? tr("(none)") : tr("not recorded")));
  html += row(tr("Device"), s.device >= 0 ? QString("npu:%1").arg(s.device) : tr("host only"));
  if (const SliceRef k = d->deviceCopyOf(host); k.valid()) {
    const Slice& ks = d->slice(k);
    if (d->str(s.name).rfind("hcom_", 0) == 0) {
      html += row(tr("Collective (predicted)"),
                  tr("%1 on a real npu's communication stream (HCCS mesh model)").arg(formatNs(ks.dur_ns)));
    } else {
      html += row(tr("Kernel (predicted)"), tr("%1 on a real npu (cost model)").arg(formatNs(ks.dur_ns)));
    }
  } else if (s.device_dur_ns >= 0) {
    html += row(tr("Device time (modeled)"), tr("%1 (no kernel on a real npu: a view, host fallback or "
                                                "the emulator's own work)").arg(formatNs(s.device_dur_ns)));
  }
  // The op's own dumped tensors (ACL_DUMP_DATA / --dump-config), each a link to the Dumps tab.
  QStringList dumped;
  int64_t dumped_count = 0;
  for (const TensorDumpInfo& t : doc_->dumps()) {
    if (t.op_id != s.id) continue;
    if (++dumped_count > 8) continue;
    const bool bad = t.nan_count.value_or(0) > 0 || t.inf_count.value_or(0) > 0;
    QString text = QString("<a href='dump:%1'>%2 %3 %4 %5</a>")
                       .arg(t.id)
                       .arg(QString::fromStdString(t.io), QString::number(t.idx), QString::fromStdString(t.dtype),
                            QString::fromStdString(t.shape));
    if (t.max) text += tr(" max %1").arg(formatValue(*t.max));
    if (bad) {
      text += tr(" <span style='color:#b3261e'><b>NaN %L1 \u00b7 inf %L2</b></span>")
                  .arg(t.nan_count.value_or(0))
                  .arg(t.inf_count.value_or(0));
    }
    dumped << text;
  }
  if (dumped_count > 8) dumped << tr("\u2026 %L1 more").arg(dumped_count - 8);
  if (!dumped.isEmpty()) html += row(tr("Dumped tensors"), dumped.join("<br>"));
  const std::vector<SliceRef> tasks = d->tasksOf(host);
  if (!tasks.empty()) {
    int64_t busy = 0;
    for (SliceRef t : tasks) busy += d->slice(t).dur_ns;
    const Slice& first = d->slice(tasks.front());
    html += row(tr("Device tasks (real)"),
                tr("%L1 \u00b7 %2 in all \u00b7 first: %3, %4 after launch")
                    .arg(tasks.size())
                    .arg(formatNs(busy), esc(d->str(first.name)), formatNs(first.start_ns - s.start_ns)));
  }
  html += row(tr("Op id"), QString::number(s.id));
  if (s.seq_nr >= 0) {
    html += row(tr("Sequence nr"), QString::number(s.seq_nr));
    const SliceRef p = d->partner(host);
    if (p.valid()) {
      const Slice& ps = d->slice(p);
      html += row(s.is_backward ? tr("Forward op") : tr("Backward op"),
                  QString("<a href='op:%1'>%2</a> (%3, %4) \u2192 jump")
                      .arg(ps.id)
                      .arg(esc(d->str(ps.name)))
                      .arg(esc(d->lanes()[static_cast<size_t>(p.lane)].title))
                      .arg(formatNs(ps.dur_ns)));
    } else {
      html += row(s.is_backward ? tr("Forward op") : tr("Backward op"), tr("none recorded"));
    }
  }
  html += "</table>";
  return html;
}

void TimelinePanel::summarizeRange(int64_t begin_ns, int64_t end_ns) {
  const TimelineData* d = view_->data();
  if (!d || end_ns <= begin_ns) return;
  view_->setRange({begin_ns, end_ns});
  OpAggregateTable t;
  if (d->covers(begin_ns, end_ns)) {
    t = d->aggregate({begin_ns, end_ns});
  } else if (doc_->reader()) {  // a partial run's range beyond the ops in memory: ask the file
    OpAggregateQuery q;
    q.run_id = d->runId();
    q.window = {begin_ns, end_ns};
    auto r = doc_->reader()->opAggregates(q);
    if (!r.isOk()) {
      emit doc_->errorOccurred(QString::fromStdString(r.status().message()));
      return;
    }
    t = std::move(r).value();
  }
  range_label_->setText(tr("<b>%1</b> selected (%2 \u2013 %3): %L4 ops in %L5 groups, self time %6, modeled device %7")
                            .arg(formatNs(end_ns - begin_ns), formatOffset(begin_ns, d->beginNs(), 1000),
                                 formatOffset(end_ns, d->beginNs(), 1000))
                            .arg(t.op_count)
                            .arg(t.group_count)
                            .arg(formatNs(t.self_sum_ns), formatNs(t.total_device_ns)));
  range_model_->setTable(std::move(t), false);
}

void TimelinePanel::openStep(int64_t step) {
  const TimelineData* d = view_->data();
  if (!d) return;
  const StepRow* s = d->stepByIndex(step);
  if (!s) return;
  view_->fitStep(step);
  summarizeRange(s->start_ns, s->start_ns + s->dur_ns);
}

bool TimelinePanel::openOp(int64_t op_id) {
  const TimelineData* d = view_->data();
  const SliceRef r = d ? d->findById(op_id) : SliceRef{};
  if (!r.valid()) return false;
  view_->selectSlice(r, true);
  return true;
}

}  // namespace npuscope::gui
