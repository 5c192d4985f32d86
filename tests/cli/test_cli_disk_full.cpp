// A full disk loses nothing already recorded: on a real small filesystem (a tmpfs mounted for
// the test; skipped where the machine does not allow mounting), dumps stop before the disk
// fills and the run completes, and a trace file that cannot grow keeps what it committed with
// its run marked failed and one clear line.
#include <sys/mount.h>

#include <cstdlib>
#include <fstream>

#include "cli/cli_run.h"

namespace {

// A tmpfs of `size` mounted on a fresh directory for the test's lifetime.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(const std::string& size)
      : dir_(std::filesystem::path(scratchPath("fs_" + size)).lexically_normal().string()) {
    std::filesystem::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) ::umount(dir_.c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool mounted() const { return mounted_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

int64_t countLines(const std::string& text, const std::string& needle) {
  int64_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliDiskFull, DumpsStopBeforeTheDiskFillsAndTheRunCompletes) {
  SmallFilesystem fs("12m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  const std::string db = fs.path("t.db");
  std::ofstream(fs.path("acl.json")) << R"({"dump":{"dump_mode":"all","dump_data":"tensor","dump_path":")"
                                     << fs.path("dumps") << R"("}})";
  // Every step of the CNN dumps ~115 MiB: the first step alone is ten times the filesystem.
  const CliRun r = run("train --model cnn --steps 12 --dump-config " + fs.path("acl.json") + " --dump-force --db " + db);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(countLines(r.out, "dump stopped: "), 1) << r.out;
  EXPECT_NE(r.out.find("dumping stopped before the disk filled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NPUSCOPE_DISK_RESERVE"), std::string::npos);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps"), 12);
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM ops WHERE step = 11"), 0);  // recording went on to the end
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM tensor_dumps"), 0);          // what fitted was dumped
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

TEST(CliDiskFull, ATraceFileThatCannotGrowKeepsItsStepsAndEndsFailed) {
  SmallFilesystem fs("6m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  const std::string db = fs.path("t.db");
  const CliRun r = run("train --model mlp --steps 900 --db " + db);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string line = "npuscope: error: " + db + ": the filesystem of ";
  ASSERT_NE(r.out.find(line), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is full"), std::string::npos);
  EXPECT_NE(r.out.find("recording stopped after step "), std::string::npos);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "failed");
  const std::string why = sqlText(db, "SELECT json_extract(results_json, '$.error') FROM runs");
  EXPECT_NE(why.find("is full"), std::string::npos) << why;
  // Everything committed before the disk filled is there, step by step with its ops.
  const int64_t steps = sqlInt(db, "SELECT count(*) FROM steps");
  EXPECT_GT(steps, 10);
  EXPECT_LT(steps, 900);
  EXPECT_EQ(sqlInt(db, "SELECT max(step) FROM steps"), steps - 1);
  EXPECT_NE(why.find("after step " + std::to_string(steps - 1) + ":"), std::string::npos) << why;
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM ops WHERE step = " + std::to_string(steps - 1)), 0);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

}  // namespace
