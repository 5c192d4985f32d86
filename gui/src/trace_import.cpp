#include "npuscope/gui/trace_import.h"

#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QStandardPaths>
#include <QStringList>
#include <QtConcurrent>

#include "npuscope/store/trace_reader.h"
#include "npuscope/import/import.h"

namespace npuscope::gui {

struct TraceImport::Outcome {
  QString source, target;
  bool cancelled = false;
  QString error;
  QString summary;
  QString warning;
};

namespace {

// NAME of NAME.json / NAME.json.gz / a folder NAME.
QString baseName(QString path) {
  while (path.size() > 1 && path.endsWith('/')) path.chop(1);
  QString name = QFileInfo(path).fileName();
  for (const char* ext : {".gz", ".json"}) {
    if (name.size() > static_cast<int>(strlen(ext)) && name.endsWith(ext)) name.chop(static_cast<int>(strlen(ext)));
  }
  return name;
}

// The absolute path without a trailing slash: "dir/" and "dir" are one source.
QString normalized(const QString& path) {
  QString p = QFileInfo(path).absoluteFilePath();
  while (p.size() > 1 && p.endsWith('/')) p.chop(1);
  return p;
}

void removeDb(const QString& path) {
  for (const char* s : {"", "-wal", "-shm"}) QFile::remove(path + s);
}

QString stampFile(const QString& cached) { return cached + ".source"; }

}  // namespace

TraceImport::TraceImport(QObject* parent) : QObject(parent) {}

TraceImport::~TraceImport() {
  if (watcher_) {
    cancel();
    watcher_->waitForFinished();
  }
}

QString TraceImport::formatOf(const QString& path) {
  // An npuscope file is opened, not imported (a torch_npu db is SQLite too).
  QFile probe(path);
  if (QFileInfo(path).isFile() && probe.open(QIODevice::ReadOnly) && probe.read(16) == QByteArray("SQLite format 3", 16) &&
      TraceReader::open(path.toStdString()).isOk()) {
    return {};
  }
  auto f = import::detectFormat(path.toStdString());
  return f.isOk() ? QString::fromStdString(f.value()) : QString();
}

QString TraceImport::cachePathFor(const QString& source, const QString& cache_dir) {
  const QString src = normalized(source);
  const QString name = baseName(src) + ".npuscope.db";
  const QFileInfo parent(QFileInfo(src).absolutePath());
  if (cache_dir.isEmpty() && parent.isDir() && parent.isWritable()) return parent.absoluteFilePath() + "/" + name;
  // A read-only source: the user's cache, one file per source path.
  const QString dir = cache_dir.isEmpty()
                          ? QStandardPaths::writableLocation(QStandardPaths::GenericCacheLocation) + "/npuscope/imports"
                          : cache_dir;
  const QString key = QString::fromLatin1(QCryptographicHash::hash(src.toUtf8(), QCryptographicHash::Sha1).toHex().left(12));
  return dir + "/" + key + "-" + name;
}

QString TraceImport::stampOf(const QString& source) {
  const QFileInfo fi(normalized(source));
  QStringList lines;
  lines << fi.absoluteFilePath();
  auto line = [](const QString& rel, const QFileInfo& f) {
    return QString("%1\t%2\t%3").arg(rel).arg(f.size()).arg(f.lastModified().toMSecsSinceEpoch());
  };
  if (fi.isDir()) {
    const QDir root(fi.absoluteFilePath());
    QStringList files;
    QDirIterator it(fi.absoluteFilePath(), QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
    while (it.hasNext()) files << it.next();
    files.sort();
    for (const QString& f : files) lines << line(root.relativeFilePath(f), QFileInfo(f));
  } else {
    lines << line(fi.fileName(), fi);
  }
  return lines.join('\n') + '\n';
}

bool TraceImport::upToDate(const QString& source, const QString& cached) {
  if (!QFileInfo::exists(cached)) return false;
  QFile f(stampFile(cached));
  if (!f.open(QIODevice::ReadOnly)) return false;
  return QString::fromUtf8(f.readAll()) == stampOf(source);
}

std::shared_ptr<TraceImport::Outcome> TraceImport::run(const QString& source, const QString& target) {
  auto out = std::make_shared<Outcome>();
  out->source = source;
  out->target = target;
  const QString stamp = stampOf(source);  // before reading: a source changed meanwhile is read again next time
  const QString partial = target + ".partial";
  removeDb(partial);
  if (!QDir().mkpath(QFileInfo(target).absolutePath())) {
    out->error = tr("%1: cannot create the folder for the converted file").arg(QFileInfo(target).absolutePath());
    return out;
  }
  import::Options o;
  o.progress = [this](int64_t done, int64_t total) {
    done_.store(done);
    total_.store(total);
    if (progress_hook_) progress_hook_(done, total);
    return !cancel_.load();
  };
  auto r = import::importPath(source.toStdString(), partial.toStdString(), o);
  if (cancel_.load()) {
    out->cancelled = true;
    removeDb(partial);
    return out;
  }
  if (!r.isOk()) {
    out->error = QString::fromStdString(r.status().message());
    removeDb(partial);
    return out;
  }
  QStringList lines;
  for (const import::RunSummary& s : r.value().runs) {
    lines << tr("run #%1%2: %L3 host ops, %L4 device tasks (%L5 linked to their launch), %L6 steps, %L7 memory samples")
                 .arg(s.run_id)
                 .arg(s.rank >= 0 ? tr(" (rank %1)").arg(s.rank) : QString())
                 .arg(s.host_ops)
                 .arg(s.device_tasks)
                 .arg(s.linked_tasks)
                 .arg(s.steps)
                 .arg(s.memory_samples);
    for (const std::string& n : s.notes) lines << QString::fromStdString(n);
  }
  if (!r.value().warning.empty()) {  // it names the file as written; it is moved to target below
    out->warning = QString::fromStdString(r.value().warning).replace(partial, target);
    lines << tr("warning: %1").arg(out->warning);
  }
  out->summary = lines.join('\n');
  // Into place: the old conversion and its stamp go first, the stamp of this one comes last.
  QFile::remove(stampFile(target));
  removeDb(target);
  // The writer has closed, which normally checkpoints and removes the WAL; if one is left it
  // moves with the file (it belongs to it whatever its name), the index (-shm) is rebuilt.
  QFile::remove(partial + "-shm");
  if (!QFile::rename(partial, target) ||
      (QFileInfo::exists(partial + "-wal") && !QFile::rename(partial + "-wal", target + "-wal"))) {
    out->error = tr("%1: cannot move the converted file into place").arg(target);
    removeDb(partial);
    return out;
  }
  QFile f(stampFile(target));
  if (f.open(QIODevice::WriteOnly | QIODevice::Truncate)) f.write(stamp.toUtf8());
  return out;
}

void TraceImport::deliver(const std::shared_ptr<Outcome>& o) {
  if (o->cancelled) emit cancelled(o->source);
  else if (!o->error.isEmpty()) emit failed(o->source, o->error);
  else emit finished(o->source, o->target, o->summary, o->warning);
}

bool TraceImport::start(const QString& source, bool sync) {
  if (watcher_) return false;
  cancel_.store(false);
  done_.store(0);
  total_.store(0);
  const QString target = cachePathFor(source, cache_dir_);
  if (sync) {
    deliver(run(source, target));
    return true;
  }
  watcher_ = new QFutureWatcher<std::shared_ptr<Outcome>>(this);
  connect(watcher_, &QFutureWatcherBase::finished, this, [this] {
    auto o = watcher_->result();
    watcher_->deleteLater();
    watcher_ = nullptr;
    deliver(o);
  });
  watcher_->setFuture(QtConcurrent::run([this, source, target] { return run(source, target); }));
  return true;
}

}  // namespace npuscope::gui
