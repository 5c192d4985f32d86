// File > Open of a trace to convert when the disk fills at the conversion's last checkpoint
// (this executable runs with NPUSCOPE_FAULT_DISK_BYTES=300K:db: the converted file cannot grow
// past 300 KiB, its WAL can). Nothing is lost and the run opens; the warning that the WAL holds
// committed pages is shown in the message bar, naming the converted file, not left in a tooltip
// (screenshot open_trace_disk_full.png).
#include <gtest/gtest.h>

#include <QDir>
#include <QFileInfo>
#include <filesystem>

#include "gui_test_support.h"
#include "npuscope/gui/main_window.h"
#include "npuscope/gui/trace_document.h"
#include "npuscope/gui/trace_import.h"

namespace npuscope::gui {
namespace {

namespace fs = std::filesystem;

TEST(OpenTraceDiskFull, TheCheckpointWarningIsShownAndTheRunOpens) {
  ASSERT_STREQ(std::getenv("NPUSCOPE_FAULT_DISK_BYTES"), "300K:db") << "run by CTest, which sets the injected disk";
  testing::ensureApp();
  const fs::path dir = fs::temp_directory_path() / ("npuscope_gui_disk_full_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(fs::path(NPUSCOPE_TRACES) / "kineto_before_fix_trace.json", dir / "trace.json");
  const QString src = QString::fromStdString((dir / "trace.json").string());
  const QString cached = TraceImport::cachePathFor(src);

  MainWindow w;
  w.resize(1100, 700);
  w.show();
  ASSERT_TRUE(w.openFile(src, true)) << w.lastError().toStdString();
  EXPECT_TRUE(w.lastError().isEmpty()) << w.lastError().toStdString();
  // The run is whole (the sample's 4 cpu_op + 1 cuda_runtime), read through the WAL.
  EXPECT_EQ(w.document()->path(), cached);
  ASSERT_EQ(w.document()->runs().size(), 1u);
  EXPECT_EQ(w.document()->runs().front().status, "completed");
  ASSERT_NE(w.document()->timeline(), nullptr);
  EXPECT_EQ(w.document()->timeline()->opCount(), 5);
  EXPECT_TRUE(QFileInfo::exists(cached + "-wal")) << "the WAL moved with the converted file";
  EXPECT_FALSE(QFileInfo::exists(cached + ".partial-wal"));

  const QString shown = w.messageShown();
  EXPECT_TRUE(shown.startsWith("Warning: " + cached + ": the filesystem of ")) << shown.toStdString();
  EXPECT_TRUE(shown.contains("is full (injected: NPUSCOPE_FAULT_DISK_BYTES=300K:db): the last checkpoint found no room, so " +
                             cached + "-wal ("))
      << shown.toStdString();
  EXPECT_TRUE(shown.contains("nothing is lost: keep the two files together")) << shown.toStdString();
  EXPECT_FALSE(shown.contains(".partial")) << shown.toStdString();

  QApplication::processEvents();
  QDir().mkpath(NPUSCOPE_SCREENSHOT_DIR);
  const QString png = QString(NPUSCOPE_SCREENSHOT_DIR) + "/open_trace_disk_full.png";
  EXPECT_TRUE(w.grab().toImage().save(png)) << png.toStdString();
  w.close();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace npuscope::gui
