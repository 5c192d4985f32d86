// Shared by the GUI tests: a QApplication on the offscreen platform, temporary trace files and
// a fixture file with two realistic runs (O1 with overflows and dumps, O2 without overflows).
#pragma once

#include <QApplication>
#include <QDir>
#include <QFont>
#include <QString>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "synthetic_trace.h"

namespace npuscope::testing {

inline QApplication* ensureApp() {
  static QApplication* app = [] {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    qputenv("XDG_CONFIG_HOME", QByteArray(std::filesystem::temp_directory_path().string().c_str()) + "/npuscope-gui-test-config");
    static int argc = 1;
    static char name[] = "npuscope-gui-test";
    static char* argv[] = {name, nullptr};
    auto* a = new QApplication(argc, argv);
    QApplication::setFont(QFont("DejaVu Sans", 9));
    return a;
  }();
  return app;
}

inline std::string tempPath(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("npuscope_gui_" + name + "_" + std::to_string(::getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
  return p.string();
}

struct TwoRunFixture {
  std::string path;
  SyntheticRunInfo o1, o2;
};

// Run 1: O1, 24 steps, overflows at 3 and 8 with events, dumps at steps 2 and 3 (a NaN/inf
// tensor at 3). Run 2: O2, 16 steps, no overflow, dumps at steps 2 and 3.
inline const TwoRunFixture& twoRunFixture() {
  static TwoRunFixture f = [] {
    TwoRunFixture t;
    t.path = tempPath("fixture");
    auto w = TraceWriter::open(t.path);
    if (!w.isOk()) std::abort();
    SyntheticRunOptions a;
    a.steps = 24;
    auto r1 = writeSyntheticRun(*w.value(), a);
    SyntheticRunOptions b;
    b.steps = 16;
    b.opt_level = "O2";
    b.seed = 11;
    b.overflow_steps = {};
    b.start_ns = -1;
    auto r2 = writeSyntheticRun(*w.value(), b);
    if (!r1.isOk() || !r2.isOk()) std::abort();
    t.o1 = r1.value();
    t.o2 = r2.value();
    return t;
  }();
  return f;
}

}  // namespace npuscope::testing
