#include "npuscope/gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QJsonDocument>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressDialog>
#include <QTimer>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

#include "npuscope/gui/compare_view.h"
#include "npuscope/gui/dumps_view.h"
#include "npuscope/gui/cluster_view.h"
#include "npuscope/gui/findings_view.h"
#include "npuscope/gui/memory_view.h"
#include "npuscope/gui/gui.h"
#include "npuscope/gui/models.h"
#include "npuscope/gui/operators_view.h"
#include "npuscope/gui/perf_compare_view.h"
#include "npuscope/gui/trace_import.h"
#include "npuscope/gui/record_dialog.h"
#include "npuscope/gui/timeline_panel.h"
#include "npuscope/gui/timeline_view.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/training_view.h"
#include "npuscope/gui/units.h"

namespace npuscope::gui {

QWidget* createMainWindow() { return new MainWindow(); }

namespace {

// The message bar's colours: an error red, a warning amber.
const char kErrorStyle[] = "background:#fde4e1; color:#7a1a12;";
const char kWarningStyle[] = "background:#fff3cd; color:#664d03;";

QString prettyJson(const std::string& text) {
  if (text.empty()) return QStringLiteral("\u2013");
  const QJsonDocument d = QJsonDocument::fromJson(QByteArray::fromStdString(text));
  const QString s = d.isNull() ? QString::fromStdString(text) : QString::fromUtf8(d.toJson(QJsonDocument::Indented));
  return "<pre style='margin:0'>" + s.toHtmlEscaped() + "</pre>";
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("npuscope");
  setAcceptDrops(true);
  doc_ = new TraceDocument(this);
  buildRunsDock();
  buildViews();
  buildCentral();
  buildMenus();
  connectDocument();
  connectViews();
  resize(1500, 900);
}

// The run list and the selected run's details, docked on the left.
void MainWindow::buildRunsDock() {
  runs_ = new RunListModel(this);
  run_table_ = new QTableView(this);
  run_table_->setModel(runs_);
  run_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  run_table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  run_table_->verticalHeader()->hide();
  run_table_->verticalHeader()->setDefaultSectionSize(20);
  run_table_->horizontalHeader()->setStretchLastSection(true);
  run_table_->setColumnHidden(RunListModel::kStarted, true);
  run_table_->setColumnHidden(RunListModel::kDevice, true);
  run_table_->setColumnHidden(RunListModel::kDropped, true);
  run_details_ = new QTextBrowser(this);
  auto* side = new QSplitter(Qt::Vertical, this);
  side->addWidget(run_table_);
  side->addWidget(run_details_);
  side->setSizes({220, 400});
  side->setMinimumWidth(300);
  auto* dock = new QDockWidget(tr("Runs"), this);
  dock->setObjectName("runs");
  dock->setWidget(side);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, dock);
  resizeDocks({dock}, {420}, Qt::Horizontal);
}

// The tabs, one per view.
void MainWindow::buildViews() {
  tabs_ = new QTabWidget(this);
  timeline_ = new TimelinePanel(doc_, this);
  operators_ = new OperatorsView(doc_, this);
  training_ = new TrainingView(doc_, this);
  dumps_ = new DumpsView(doc_, this);
  compare_ = new CompareView(doc_, this);
  perf_ = new PerfCompareView(this);
  perf_->clear(tr("Select two runs in the list, or File > Compare Performance With\u2026 another file or "
                  "trace (a Kineto JSON, a torch_npu folder), to compare their op and step times."));
  importer_ = new TraceImport(this);
  tabs_->addTab(timeline_, tr("Timeline"));
  tabs_->addTab(operators_, tr("Operators"));
  tabs_->addTab(training_, tr("Training"));
  tabs_->addTab(dumps_, tr("Dumps"));
  tabs_->addTab(compare_, tr("Compare"));
  tabs_->addTab(perf_, tr("Performance"));
  findings_ = new FindingsView(doc_, this);
  tabs_->addTab(findings_, tr("Findings"));
  connect(findings_, &FindingsView::opsActivated, this, [this](const QStringList& ops) {
    tabs_->setCurrentWidget(timeline_);
    timeline_->search(ops.front());
    timeline_->nextMatch();
  });
  connect(findings_, &FindingsView::stepActivated, this, [this](qint64 step) {
    tabs_->setCurrentWidget(timeline_);
    timeline_->openStep(step);
  });
  connect(perf_, &PerfCompareView::errorOccurred, this, &MainWindow::showError);
  memory_ = new MemoryView(doc_, this);
  tabs_->addTab(memory_, tr("Memory"));
  connect(memory_, &MemoryView::opActivated, this, [this](qint64 op_id) {
    tabs_->setCurrentWidget(timeline_);
    if (!timeline_->openOp(op_id)) showError(tr("op #%1 is not in the loaded part of the timeline").arg(op_id));
  });
  cluster_ = new ClusterView(this);
  tabs_->addTab(cluster_, tr("Cluster"));
  connect(cluster_, &ClusterView::errorOccurred, this, &MainWindow::showError);
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == cluster_) loadPendingCluster();
  });
}

// The message bar for errors and warnings above the tabs, and the status line.
void MainWindow::buildCentral() {
  message_bar_ = new QWidget(this);
  message_bar_->setStyleSheet(kErrorStyle);
  message_ = new QLabel(message_bar_);
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* dismiss = new QToolButton(message_bar_);
  dismiss->setText("\u2715");
  dismiss->setAutoRaise(true);
  auto* mb = new QHBoxLayout(message_bar_);
  mb->setContentsMargins(10, 6, 6, 6);
  mb->addWidget(message_, 1);
  mb->addWidget(dismiss);
  message_bar_->hide();
  connect(dismiss, &QToolButton::clicked, message_bar_, &QWidget::hide);

  auto* central = new QWidget(this);
  auto* cl = new QVBoxLayout(central);
  cl->setContentsMargins(0, 0, 0, 0);
  cl->setSpacing(0);
  cl->addWidget(message_bar_);
  cl->addWidget(tabs_, 1);
  setCentralWidget(central);
  status_ = new QLabel(tr("Open a trace file (File > Open, or drop it here)."), this);
  statusBar()->addWidget(status_, 1);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  const QString filters = tr("Traces (*.db *.sqlite *.json *.gz);;npuscope files (*.db *.sqlite);;"
                             "Kineto / torch.profiler JSON (*.json *.json.gz);;All files (*)");
  QAction* open = file->addAction(tr("&Open\u2026"), this, [this, filters] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(), filters);
    if (!p.isEmpty()) openFile(p);
  });
  open->setShortcut(QKeySequence::Open);
  file->addAction(tr("Open Trace &Folder\u2026"), this, [this] {
    const QString p = QFileDialog::getExistingDirectory(
        this, tr("Open a torch_npu *_ascend_pt folder, its ASCEND_PROFILER_OUTPUT, or a folder of ranks"));
    if (!p.isEmpty()) openFile(p);
  })->setShortcut(QKeySequence("Ctrl+Shift+O"));
  file->addAction(tr("Open &Cluster…"), this, [this] {
    const QString p = QFileDialog::getExistingDirectory(this, tr("Open a folder of a multi-rank job's trace files"));
    if (!p.isEmpty()) openCluster({p});
  });
  recent_menu_ = file->addMenu(tr("Open &Recent"));
  file->addAction(tr("Compare &Performance With\u2026"), this, [this, filters] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Compare the current run with"), QString(), filters);
    if (!p.isEmpty()) comparePerformanceWith(p);
  });
  file->addAction(tr("&Record\u2026"), this, &MainWindow::showRecordDialog)->setShortcut(QKeySequence("Ctrl+R"));
  file->addSeparator();
  file->addAction(tr("&Quit"), this, &QWidget::close)->setShortcut(QKeySequence::Quit);
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("Timeline keys"), this, [this] {
    QMessageBox::information(this, tr("Timeline keys"),
                             tr("Ctrl+wheel, W / S: zoom around the mouse\nDrag, A / D, Shift+wheel: pan\n"
                                "Wheel: scroll tracks\nShift+drag, or drag on the ruler: select a time range\n"
                                "Click: slice details; double-click: zoom to it\nF: fit step; 0: fit run; "
                                "Esc: clear\nCtrl+F: search"));
  });
  rebuildRecentMenu();
}

// The document's news (runs found, loads started and done, errors) and the run list's selection.
void MainWindow::connectDocument() {
  connect(doc_, &TraceDocument::errorOccurred, this, &MainWindow::showError);
  connect(doc_, &TraceDocument::runsChanged, this, &MainWindow::onRunsChanged);
  connect(doc_, &TraceDocument::loadStarted, this, [this](qint64 id) {
    status_->setText(tr("Loading run #%1\u2026").arg(id));
    QApplication::setOverrideCursor(Qt::BusyCursor);
  });
  connect(doc_, &TraceDocument::runLoaded, this, [this] {
    QApplication::restoreOverrideCursor();
    showRunStatus();
    warnIfDamaged();
  });
  connect(doc_, &TraceDocument::windowLoaded, this, [this] {
    showRunStatus();
    warnIfDamaged();
  });
  connect(doc_, &TraceDocument::errorOccurred, this, [] {
    while (QApplication::overrideCursor()) QApplication::restoreOverrideCursor();
  });
  connect(run_table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &MainWindow::onRunSelectionChanged);
}

// A view's selection or activation shown in another view.
void MainWindow::connectViews() {
  connect(operators_, &OperatorsView::opSelected, this, [this](const QString& name, const QString& shapes, bool by) {
    if (name.isEmpty()) timeline_->view()->clearHighlight();
    else timeline_->view()->setHighlight(name, by ? &shapes : nullptr);
  });
  connect(operators_, &OperatorsView::opActivated, this, [this](const QString& name, const QString&, bool) {
    tabs_->setCurrentWidget(timeline_);
    timeline_->search(name);
    timeline_->nextMatch();
  });
  connect(training_, &TrainingView::stepActivated, this, [this](qint64 step) {
    tabs_->setCurrentWidget(timeline_);
    timeline_->openStep(step);
  });
  connect(timeline_, &TimelinePanel::dumpActivated, this, [this](qint64 dump_id) {
    tabs_->setCurrentWidget(dumps_);
    if (!dumps_->selectDumpId(dump_id)) showError(tr("tensor dump #%1 is not in this run").arg(dump_id));
  });
  connect(training_, &TrainingView::opActivated, this, [this](qint64 op_id) {
    tabs_->setCurrentWidget(timeline_);
    if (!timeline_->openOp(op_id)) showError(tr("op #%1 is not in the loaded part of the timeline").arg(op_id));
  });
}

MainWindow::~MainWindow() {
  while (QApplication::overrideCursor()) QApplication::restoreOverrideCursor();
}

bool MainWindow::openFile(const QString& path, bool sync) {
  const bool old = sync_;
  sync_ = sync_ || sync;
  message_bar_->hide();
  damage_warned_.clear();  // a file opened again is told again
  bool ok;
  if (!TraceImport::formatOf(path).isEmpty()) {
    const QString source = QFileInfo(path).absoluteFilePath();
    ok = convertThen(source, sync_, [this, source](const QString& db) { openDatabase(db, source); });
  } else {
    ok = openDatabase(path, QFileInfo(path).absoluteFilePath());
  }
  sync_ = old;
  return ok;
}

bool MainWindow::openDatabase(const QString& path, const QString& shown_as) {
  const bool ok = doc_->open(path);
  if (ok) {
    addRecent(shown_as);
    setWindowTitle(QString("npuscope \u2014 %1").arg(QFileInfo(shown_as).fileName()));
  }
  return ok;
}

QString MainWindow::statusText() const { return status_->text(); }

bool MainWindow::convertThen(const QString& source, bool sync, std::function<void(const QString&)> then) {
  const QString name = QFileInfo(source).fileName();
  const QString cached = TraceImport::cachePathFor(source, importer_->cacheDir());
  if (TraceImport::upToDate(source, cached)) {
    then(cached);
    status_->setText(tr("%1: opened its conversion %2 (the source is unchanged)").arg(name, cached));
    return true;
  }
  if (importer_->isRunning()) {
    showError(tr("%1: another trace is being converted; wait for it or cancel it first").arg(name));
    return false;
  }
  // One connection per conversion: whichever signal comes, all three are dropped.
  auto conns = std::make_shared<std::vector<QMetaObject::Connection>>();
  auto done = [this, conns] {
    for (const auto& c : *conns) disconnect(c);
    if (import_progress_) {
      import_progress_->hide();
      import_progress_->deleteLater();
      import_progress_ = nullptr;
    }
  };
  conns->push_back(connect(importer_, &TraceImport::finished, this,
                           [this, done, then, name](const QString&, const QString& db, const QString& summary,
                                                    const QString& warning) {
                             done();
                             last_import_summary_ = summary;
                             // A warning (a disk that filled at the last checkpoint) is not left in a
                             // tooltip; an error opening the file, shown after it, takes its place.
                             if (!warning.isEmpty()) showWarning(warning);
                             then(db);
                             status_->setText(tr("%1 converted to %2 \u2014 %3").arg(name, db, summary.section('\n', 0, 0)));
                             status_->setToolTip(summary);
                           }));
  conns->push_back(connect(importer_, &TraceImport::failed, this, [this, done](const QString&, const QString& m) {
    done();
    showError(m);
  }));
  conns->push_back(connect(importer_, &TraceImport::cancelled, this, [this, done, name](const QString&) {
    done();
    status_->setText(tr("Conversion of %1 cancelled; nothing was kept.").arg(name));
  }));
  if (!sync) {
    import_progress_ = new QProgressDialog(tr("Converting %1 (%2)\u2026").arg(name, TraceImport::formatOf(source)),
                                           tr("Cancel"), 0, 1000, this);
    import_progress_->setWindowTitle(tr("Opening a trace"));
    import_progress_->setMinimumDuration(300);
    import_progress_->setAutoClose(false);
    import_progress_->setAutoReset(false);
    import_progress_->setValue(0);
    connect(import_progress_, &QProgressDialog::canceled, importer_, &TraceImport::cancel);
    auto* tick = new QTimer(import_progress_);
    connect(tick, &QTimer::timeout, this, [this] {
      if (!import_progress_) return;
      const int64_t total = importer_->total();
      if (total > 0) {
        import_progress_->setValue(static_cast<int>(std::min<int64_t>(999, importer_->done() * 1000 / total)));
        import_progress_->setLabelText(tr("Converting %1\u2026 %2 of %3")
                                           .arg(import_progress_->property("name").toString(),
                                                formatBytes(importer_->done()), formatBytes(total)));
      }
    });
    import_progress_->setProperty("name", name);
    tick->start(100);
    status_->setText(tr("Converting %1 into %2\u2026").arg(name, cached));
  }
  importer_->start(source, sync);
  return true;
}

bool MainWindow::comparePerformanceWith(const QString& path, bool sync) {
  if (!doc_->reader() || doc_->currentRun() < 0) {
    showError(tr("Open a file and pick a run first: it is side A of the comparison."));
    return false;
  }
  auto compareWith = [this](const QString& db) {
    auto r = TraceReader::open(db.toStdString());
    if (!r.isOk()) {
      showError(QString::fromStdString(r.status().message()));
      return;
    }
    auto runs = r.value()->runs();
    if (!runs.isOk() || runs->empty()) {
      showError(runs.isOk() ? tr("%1 holds no runs").arg(db) : QString::fromStdString(runs.status().message()));
      return;
    }
    const RunRow& b = runs->front();
    const RunRow* a = doc_->runById(doc_->currentRun());
    auto label = [](const RunRow& run, const QString& file) {
      return QString("#%1 %2 %3 (%4)")
          .arg(run.id)
          .arg(QString::fromStdString(run.model), QString::fromStdString(run.opt_level), QFileInfo(file).fileName());
    };
    tabs_->setCurrentWidget(perf_);
    perf_->compareRuns(*doc_->reader(), a->id, label(*a, doc_->path()), *r.value(), b.id, label(b, db));
  };
  const bool old = sync_;
  sync_ = sync_ || sync;
  bool ok = true;
  if (!TraceImport::formatOf(path).isEmpty()) ok = convertThen(QFileInfo(path).absoluteFilePath(), sync_, compareWith);
  else compareWith(path);
  sync_ = old;
  return ok;
}

bool MainWindow::comparePerformance(int64_t run_a, int64_t run_b) {
  const RunRow* a = doc_->runById(run_a);
  const RunRow* b = doc_->runById(run_b);
  if (!doc_->reader() || !a || !b) return false;
  auto label = [](const RunRow* r) {
    return QString("#%1 %2 %3").arg(r->id).arg(QString::fromStdString(r->model), QString::fromStdString(r->opt_level));
  };
  return perf_->compareRuns(*doc_->reader(), a->id, label(a), *doc_->reader(), b->id, label(b));
}

void MainWindow::showError(const QString& message) {
  last_error_ = message;
  message_bar_->setStyleSheet(kErrorStyle);
  message_->setText(message);
  message_bar_->show();
  status_->setText(tr("Error: %1").arg(message));
}

// A corrupt file that still opens: said once per opening of the file, in the message bar (the
// names shown may be wrong or missing), as the CLI says it on stderr. An error already shown
// there stays, with the warning below it.
// The status line of the run on screen: its size, and whether all its ops are in memory.
void MainWindow::showRunStatus() {
  const TimelineData* d = doc_->timeline();
  if (!d) return;
  const RunRow* r = doc_->runById(d->runId());
  QString held;
  if (d->partial()) {
    held = doc_->isCompleting() ? tr(" (reading every op\u2026)") : tr(" (too many to hold: zoom in to load them)");
  }
  status_->setText(tr("%1 \u2014 run #%2%3: %L4 ops%7, %L5 steps, %6")
                       .arg(doc_->path())
                       .arg(d->runId())
                       .arg(r && r->status == "running" ? tr(" (running, live)") : QString())
                       .arg(d->totalOps())
                       .arg(d->steps().size())
                       .arg(formatNs(d->endNs() - d->beginNs()))
                       .arg(held));
}

void MainWindow::warnIfDamaged() {
  const QStringList damage = doc_->damage();
  if (damage.isEmpty() || damage_warned_ == doc_->path()) return;
  damage_warned_ = doc_->path();
  const QString text = tr("%1 is damaged: %2 (check: sqlite3 %1 'PRAGMA integrity_check')")
                           .arg(doc_->path(), damage.join(QStringLiteral("; ")));
  if (message_bar_->isVisibleTo(this) && message_->text() == last_error_) {
    message_->setText(last_error_ + QLatin1Char('\n') + tr("Warning: %1").arg(text));
    return;
  }
  showWarning(text);
}

void MainWindow::showWarning(const QString& message) {
  message_bar_->setStyleSheet(kWarningStyle);
  message_->setText(tr("Warning: %1").arg(message));
  message_bar_->show();
}

QString MainWindow::messageShown() const { return message_bar_->isVisibleTo(this) ? message_->text() : QString(); }

void MainWindow::onRunsChanged() {
  // Keep the selected runs across a refresh; otherwise pick the latest run.
  std::vector<int64_t> keep;
  for (const QModelIndex& i : run_table_->selectionModel()->selectedRows()) {
    if (const RunRow* r = runs_->runAt(i.row())) keep.push_back(r->id);
  }
  selecting_ = true;
  runs_->setRuns(doc_->runs());
  for (int c = 0; c < RunListModel::kColumnCount - 1; ++c) run_table_->resizeColumnToContents(c);
  selecting_ = false;
  if (keep.empty() && !doc_->runs().empty()) keep.push_back(doc_->runs().front().id);
  std::vector<int64_t> present;
  for (int64_t id : keep) {
    if (doc_->runById(id)) present.push_back(id);
  }
  const bool same = present.size() == 1 && doc_->currentRun() == present.front();
  if (same) {  // live refresh: the document reloads the run itself
    selecting_ = true;
    selectRuns(present);
    selecting_ = false;
    return;
  }
  selectRuns(present);
  if (doc_->runs().empty()) showError(tr("%1 holds no runs yet.").arg(doc_->path()));
}

void MainWindow::selectRuns(const std::vector<int64_t>& ids) {
  QItemSelection sel;
  for (int64_t id : ids) {
    const int row = runs_->rowOfRun(id);
    if (row >= 0) sel.select(runs_->index(row, 0), runs_->index(row, RunListModel::kColumnCount - 1));
  }
  run_table_->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect);
  if (!ids.empty()) {
    const int row = runs_->rowOfRun(ids.front());
    if (row >= 0) run_table_->selectionModel()->setCurrentIndex(runs_->index(row, 0), QItemSelectionModel::NoUpdate);
  }
}

void MainWindow::onRunSelectionChanged() {
  std::vector<const RunRow*> picked;
  for (const QModelIndex& i : run_table_->selectionModel()->selectedRows()) {
    if (const RunRow* r = runs_->runAt(i.row())) picked.push_back(r);
  }
  std::sort(picked.begin(), picked.end(), [](const RunRow* a, const RunRow* b) { return a->id < b->id; });
  QString html;
  for (const RunRow* r : picked) {
    html += QString("<h3 style='margin:4px 0'>Run #%1 \u2014 %2</h3>").arg(r->id).arg(QString::fromStdString(r->status));
    html += "<p style='margin:0'>" +
            QString("%1 %2 %3 %4 on %5")
                .arg(QString::fromStdString(r->command), QString::fromStdString(r->model),
                     QString::fromStdString(r->opt_level), QString::fromStdString(r->optimizer),
                     QString::fromStdString(r->device))
                .toHtmlEscaped() +
            "</p>";
    if (r->ended_ns) html += tr("<p style='margin:0'>duration %1</p>").arg(formatNs(*r->ended_ns - r->started_ns));
    if (r->dropped_records) {
      html += tr("<p style='margin:0;color:#b3261e'>%L1 op records dropped (writer queue full)</p>").arg(r->dropped_records);
    }
    html += tr("<p style='margin:6px 0 0 0'><b>Config</b></p>") + prettyJson(r->config_json);
    html += tr("<p style='margin:6px 0 0 0'><b>Results</b></p>") + prettyJson(r->results_json);
  }
  run_details_->setHtml(html);
  if (picked.size() == 1 && picked.front()->rank >= 0 && !doc_->path().isEmpty()) {
    cluster_dir_ = QFileInfo(doc_->path()).absolutePath();
    cluster_job_ = QString::fromStdString(picked.front()->job);
    if (tabs_->currentWidget() == cluster_) loadPendingCluster();
  }
  if (selecting_ || picked.empty()) return;
  if (picked.size() == 2) {
    compare_->compareRuns(picked[1]->id, picked[0]->id);  // the newer run against the older as bench
    comparePerformance(picked[0]->id, picked[1]->id);    // before (A) against after (B)
    if (doc_->currentRun() != picked[1]->id) doc_->loadRun(picked[1]->id, sync_);
    return;
  }
  if (doc_->currentRun() != picked.front()->id) doc_->loadRun(picked.front()->id, sync_);
}

bool MainWindow::openCluster(const QStringList& paths, const QString& job) {
  std::vector<std::string> p;
  for (const QString& s : paths) p.push_back(s.toStdString());
  // What was asked for now replaces the selected rank's job, also on later visits to the tab.
  cluster_dir_.clear();
  cluster_job_.clear();
  cluster_loaded_ = paths.join('\n') + '\n' + job;
  tabs_->setCurrentWidget(cluster_);
  return cluster_->openJob(p, job.toStdString(), sync_);
}

void MainWindow::loadPendingCluster() {
  if (cluster_dir_.isEmpty() || cluster_loaded_ == cluster_dir_ + '\n' + cluster_job_) return;
  const QString dir = cluster_dir_, job = cluster_job_;
  std::vector<std::string> p{dir.toStdString()};
  cluster_loaded_ = dir + '\n' + job;  // tried once: an error is shown once, not on every visit
  cluster_->openJob(p, job.toStdString(), sync_);
}

void MainWindow::addRecent(const QString& path) {
  QSettings s("npuscope", "workbench");
  QStringList recent = s.value("recent").toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > 10) recent.removeLast();
  s.setValue("recent", recent);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recent_menu_->clear();
  QSettings s("npuscope", "workbench");
  const QStringList recent = s.value("recent").toStringList();
  for (const QString& p : recent) recent_menu_->addAction(p, this, [this, p] { openFile(p); });
  recent_menu_->setEnabled(!recent.isEmpty());
}

void MainWindow::showRecordDialog() {
  if (!record_) {
    record_ = new RecordDialog(this);
    connect(record_, &RecordDialog::outputFileReady, this, [this](const QString& p) {
      if (openFile(p)) doc_->setPollInterval(1000);
    });
    connect(record_, &RecordDialog::finished, this, [this](const QString& p) {
      if (doc_->path() == p) doc_->poll();
      else openFile(p);
    });
    connect(record_, &RecordDialog::failed, this, &MainWindow::showError);
  }
  record_->show();
  record_->raise();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  const auto urls = e->mimeData()->urls();
  if (!urls.isEmpty() && urls.front().isLocalFile()) openFile(urls.front().toLocalFile());
}

}  // namespace npuscope::gui
