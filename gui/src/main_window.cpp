#include <QLabel>

#include "npuscope/gui/gui.h"

namespace npuscope::gui {
QWidget* createMainWindow() {
  auto* label = new QLabel("npuscope workbench");
  label->setWindowTitle("npuscope");
  return label;
}
}  // namespace npuscope::gui
