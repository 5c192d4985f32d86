// The Record dialog: the options of `npuscope train` as a form, run as a child process (the GUI
// never links torch). Shows the CLI's output and a progress bar parsed from its "step N/M"
// lines, announces the trace file as soon as it exists (so the workbench can follow it live)
// and reports a failed CLI (cannot start, non-zero exit, crash) as an error message.
#pragma once

#include <QDialog>
#include <QProcess>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace npuscope::gui {

class RecordDialog : public QDialog {
  Q_OBJECT
 public:
  explicit RecordDialog(QWidget* parent = nullptr);
  ~RecordDialog() override;

  // The CLI to run and its arguments for the current form.
  QString program() const;
  QStringList arguments() const;
  QString outputPath() const;
  void setProgram(const QString& path);
  void setOutputPath(const QString& path);
  void setExtraArguments(const QString& args);
  bool isRunning() const { return process_ && process_->state() != QProcess::NotRunning; }
  // Starts the CLI; false (and failed()) when it cannot.
  bool start();
  void stop();
  QString log() const;
  // The default CLI: next to this executable (build tree or install), else `npuscope` on PATH.
  static QString defaultProgram();

 signals:
  void outputFileReady(const QString& path);  // the trace file exists: open it live
  void finished(const QString& path);         // the CLI succeeded
  void failed(const QString& message);        // the CLI failed

 private:
  void append(const QString& text);
  void onFinished(int code, QProcess::ExitStatus status);

  QLineEdit* program_;
  QComboBox* model_;
  QLineEdit* device_;
  QComboBox* dataset_;
  QSpinBox* epochs_;
  QSpinBox* steps_;
  QSpinBox* batch_;
  QDoubleSpinBox* lr_;
  QDoubleSpinBox* momentum_;
  QSpinBox* seed_;
  QLineEdit* output_;
  QLineEdit* extra_;
  QProgressBar* progress_;
  QLabel* status_;
  QPlainTextEdit* log_;
  QPushButton* start_;
  QPushButton* stop_;
  QProcess* process_ = nullptr;
  QTimer* watch_;
  bool announced_ = false;
  QString last_line_;
};

}  // namespace npuscope::gui
