// npuscope-gui [FILE] | --cluster FILE_OR_FOLDER...: the desktop workbench (a trace file, or the
// cluster view of a multi-rank job's rank files).
#include <QApplication>
#include <QTimer>

#include "npuscope/gui/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("npuscope");
  QApplication::setOrganizationName("npuscope");
  npuscope::gui::MainWindow w;
  w.show();
  const QStringList args = QApplication::arguments();
  if (args.size() > 2 && args.at(1) == "--cluster") {
    const QStringList paths = args.mid(2);
    QTimer::singleShot(0, &w, [&w, paths] { w.openCluster(paths); });
  } else if (args.size() > 1) {
    const QString path = args.at(1);
    QTimer::singleShot(0, &w, [&w, path] { w.openFile(path); });
  }
  return app.exec();
}
