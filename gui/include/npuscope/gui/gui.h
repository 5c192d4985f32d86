// npuscope_gui_lib: the Qt5 workbench over core's reader (see main_window.h).
#pragma once
class QWidget;
namespace npuscope::gui {
// The main window (a MainWindow); the caller owns it.
QWidget* createMainWindow();
}  // namespace npuscope::gui
