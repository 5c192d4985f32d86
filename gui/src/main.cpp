// npuscope-gui [FILE]: the desktop workbench.
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
  if (args.size() > 1) {
    const QString path = args.at(1);
    QTimer::singleShot(0, &w, [&w, path] { w.openFile(path); });
  }
  return app.exec();
}
