// npuscope_gui_lib: the Qt5 workbench over core's reader. Filled by the GUI issue.
#pragma once
class QWidget;
namespace npuscope::gui {
// The main window; a placeholder until the GUI issue fills it.
QWidget* createMainWindow();
}
