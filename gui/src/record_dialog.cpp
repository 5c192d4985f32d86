#include "npuscope/gui/record_dialog.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

namespace npuscope::gui {

QString RecordDialog::defaultProgram() {
  const QString dir = QCoreApplication::applicationDirPath();
  for (const QString& p : {dir + "/npuscope", dir + "/../cli/npuscope", dir + "/../../cli/npuscope"}) {
    if (QFileInfo(p).isExecutable()) return QDir::cleanPath(p);
  }
  const QString on_path = QStandardPaths::findExecutable("npuscope");
  return on_path.isEmpty() ? QStringLiteral("npuscope") : on_path;
}

RecordDialog::RecordDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Record a training run"));
  program_ = new QLineEdit(defaultProgram(), this);
  model_ = new QComboBox(this);
  model_->addItems({"cnn", "mlp"});
  device_ = new QLineEdit("npu:0", this);
  dataset_ = new QComboBox(this);
  dataset_->addItems({"fashion-mnist", "synthetic"});
  epochs_ = new QSpinBox(this);
  epochs_->setRange(1, 1000);
  epochs_->setValue(1);
  steps_ = new QSpinBox(this);
  steps_->setRange(0, 10000000);
  steps_->setValue(50);
  steps_->setSpecialValueText(tr("all"));
  batch_ = new QSpinBox(this);
  batch_->setRange(1, 65536);
  batch_->setValue(64);
  lr_ = new QDoubleSpinBox(this);
  lr_->setDecimals(5);
  lr_->setRange(0, 10);
  lr_->setValue(0.01);
  momentum_ = new QDoubleSpinBox(this);
  momentum_->setDecimals(3);
  momentum_->setRange(0, 1);
  momentum_->setValue(0.9);
  seed_ = new QSpinBox(this);
  seed_->setRange(0, 1 << 30);
  seed_->setValue(0);
  output_ = new QLineEdit(QDir::home().filePath("npuscope-trace.db"), this);
  auto* browse = new QToolButton(this);
  browse->setText("\u2026");
  connect(browse, &QToolButton::clicked, this, [this] {
    const QString p = QFileDialog::getSaveFileName(this, tr("Trace file"), output_->text(), tr("Traces (*.db)"));
    if (!p.isEmpty()) output_->setText(p);
  });
  extra_ = new QLineEdit(this);
  extra_->setPlaceholderText(tr("further flags, e.g. --opt-level O1 --loss-scale dynamic"));

  auto* form = new QFormLayout();
  form->addRow(tr("CLI"), program_);
  form->addRow(tr("Model"), model_);
  form->addRow(tr("Device"), device_);
  form->addRow(tr("Dataset"), dataset_);
  form->addRow(tr("Epochs"), epochs_);
  form->addRow(tr("Steps"), steps_);
  form->addRow(tr("Batch size"), batch_);
  form->addRow(tr("Learning rate"), lr_);
  form->addRow(tr("Momentum"), momentum_);
  form->addRow(tr("Seed"), seed_);
  auto* out_row = new QHBoxLayout();
  out_row->addWidget(output_, 1);
  out_row->addWidget(browse);
  form->addRow(tr("Trace file (--db)"), out_row);
  form->addRow(tr("Extra flags"), extra_);

  progress_ = new QProgressBar(this);
  progress_->setRange(0, 100);
  progress_->setValue(0);
  status_ = new QLabel(tr("Ready."), this);
  status_->setWordWrap(true);
  log_ = new QPlainTextEdit(this);
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(5000);
  log_->setFont(QFont("monospace"));
  start_ = new QPushButton(tr("Start"), this);
  stop_ = new QPushButton(tr("Stop"), this);
  stop_->setEnabled(false);
  auto* close = new QPushButton(tr("Close"), this);
  auto* buttons = new QHBoxLayout();
  buttons->addWidget(status_, 1);
  buttons->addWidget(start_);
  buttons->addWidget(stop_);
  buttons->addWidget(close);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(progress_);
  layout->addWidget(log_, 1);
  layout->addLayout(buttons);
  resize(620, 600);

  watch_ = new QTimer(this);
  watch_->setInterval(300);
  connect(watch_, &QTimer::timeout, this, [this] {
    if (!announced_ && QFileInfo::exists(outputPath())) {
      announced_ = true;
      emit outputFileReady(outputPath());
    }
  });
  connect(start_, &QPushButton::clicked, this, [this] { start(); });
  connect(stop_, &QPushButton::clicked, this, &RecordDialog::stop);
  connect(close, &QPushButton::clicked, this, &QDialog::reject);
}

RecordDialog::~RecordDialog() {
  if (process_ && process_->state() != QProcess::NotRunning) {
    process_->kill();
    process_->waitForFinished(2000);
  }
}

QString RecordDialog::program() const { return program_->text().trimmed(); }
QString RecordDialog::outputPath() const { return output_->text().trimmed(); }
void RecordDialog::setProgram(const QString& path) { program_->setText(path); }
void RecordDialog::setOutputPath(const QString& path) { output_->setText(path); }
void RecordDialog::setExtraArguments(const QString& args) { extra_->setText(args); }
QString RecordDialog::log() const { return log_->toPlainText(); }

QStringList RecordDialog::arguments() const {
  QStringList a{"train",
                "--model", model_->currentText(),
                "--device", device_->text().trimmed(),
                "--dataset", dataset_->currentText(),
                "--epochs", QString::number(epochs_->value()),
                "--steps", QString::number(steps_->value()),
                "--batch-size", QString::number(batch_->value()),
                "--lr", QString::number(lr_->value(), 'g', 8),
                "--momentum", QString::number(momentum_->value(), 'g', 6),
                "--seed", QString::number(seed_->value())};
  if (!outputPath().isEmpty()) a << "--db" << outputPath();
  a << QProcess::splitCommand(extra_->text());
  return a;
}

bool RecordDialog::start() {
  if (isRunning()) return false;
  log_->clear();
  progress_->setValue(0);
  announced_ = false;
  last_line_.clear();
  delete process_;
  process_ = new QProcess(this);
  connect(process_, &QProcess::readyReadStandardError, this,
          [this] { append(QString::fromLocal8Bit(process_->readAllStandardError())); });
  connect(process_, &QProcess::readyReadStandardOutput, this,
          [this] { append(QString::fromLocal8Bit(process_->readAllStandardOutput())); });
  connect(process_, QOverload<int, QProcess::ExitStatus>::of(&QProcess::finished), this, &RecordDialog::onFinished);
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    const QString m = tr("could not start %1: %2").arg(program(), process_->errorString());
    status_->setText(QString("<span style='color:#b3261e'>%1</span>").arg(m.toHtmlEscaped()));
    start_->setEnabled(true);
    stop_->setEnabled(false);
    watch_->stop();
    emit failed(m);
  });
  append(QString("$ %1 %2\n").arg(program(), arguments().join(' ')));
  status_->setText(tr("Running\u2026"));
  start_->setEnabled(false);
  stop_->setEnabled(true);
  watch_->start();
  process_->start(program(), arguments());
  return true;
}

void RecordDialog::stop() {
  if (isRunning()) process_->terminate();
}

void RecordDialog::append(const QString& text) {
  log_->moveCursor(QTextCursor::End);
  log_->insertPlainText(text);
  log_->moveCursor(QTextCursor::End);
  static const QRegularExpression kStep(R"((\d+)/(\d+))");
  for (const QString& line : text.split(QRegularExpression("[\r\n]"), Qt::SkipEmptyParts)) {
    last_line_ = line;
    auto m = kStep.match(line);
    if (m.hasMatch() && line.contains("step")) {
      const double total = m.captured(2).toDouble();
      if (total > 0) progress_->setValue(static_cast<int>(100.0 * m.captured(1).toDouble() / total));
    }
  }
}

void RecordDialog::onFinished(int code, QProcess::ExitStatus status) {
  watch_->stop();
  start_->setEnabled(true);
  stop_->setEnabled(false);
  if (status == QProcess::CrashExit || code != 0) {
    const QString m = status == QProcess::CrashExit
                          ? tr("npuscope train crashed")
                          : tr("npuscope train failed (exit code %1): %2").arg(code).arg(last_line_);
    status_->setText(QString("<span style='color:#b3261e'>%1</span>").arg(m.toHtmlEscaped()));
    emit failed(m);
    return;
  }
  progress_->setValue(100);
  status_->setText(tr("Done: %1").arg(outputPath()));
  if (!announced_ && QFileInfo::exists(outputPath())) emit outputFileReady(outputPath());
  emit finished(outputPath());
}

}  // namespace npuscope::gui
