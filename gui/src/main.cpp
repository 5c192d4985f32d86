#include <QApplication>
#include <QWidget>

#include "npuscope/gui/gui.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QWidget* w = npuscope::gui::createMainWindow();
  w->show();
  return app.exec();
}
