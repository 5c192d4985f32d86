// Faults lose nothing already recorded. A full disk, on a real small filesystem (a tmpfs mounted
// for the test; skipped where the machine does not allow mounting): dumps stop before the disk
// fills and the run completes; a trace file that cannot grow keeps what it committed with its
// run marked failed and one clear line. A read-only filesystem is refused before training.
// Ctrl-C and SIGTERM end the run failed, promptly, with what was recorded.
#include <signal.h>
#include <sys/mount.h>

#include <fcntl.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "cli/cli_run.h"

namespace {

// A tmpfs of `size` mounted on a fresh directory for the test's lifetime.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(const std::string& size, unsigned long flags = 0)
      : dir_(std::filesystem::path(scratchPath("fs_" + size)).lexically_normal().string()) {
    std::filesystem::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", flags, ("size=" + size).c_str()) == 0;
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

TEST(CliFaults, AReadOnlyFilesystemIsRefusedBeforeTraining) {
  SmallFilesystem fs("1m", MS_RDONLY);
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  const std::string db = fs.path("t.db");
  const CliRun r = run("train --model mlp --steps 3 --db " + db);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("npuscope: error: " + db + ": cannot open for writing: the filesystem holding "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("is mounted read-only"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << "no step may run before the refusal";
}

// `npuscope train` stopped with SIGINT (Ctrl-C) or SIGTERM ends its run failed within 2 s.
class CliInterrupt : public ::testing::TestWithParam<int> {};

// Sends `sig` to the CLI at `pid` and checks it exits 128 + sig within 2 s, its run in `db` ended
// failed; returns the run's error.
std::string stopAndExpectFailedRun(pid_t pid, int sig, const std::string& db) {
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, sig);
  int st = 0;
  ::waitpid(pid, &st, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sig) << "status " << st;
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "failed");
  return sqlText(db, "SELECT json_extract(results_json, '$.error') FROM runs");
}

TEST_P(CliInterrupt, TrainEndsItsRunFailedPromptlyKeepingItsSteps) {
  const int sig = GetParam();
  const std::string db = scratchPath("interrupt_" + std::to_string(sig) + ".db");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);  // a test runner may start us with SIGINT ignored
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(NPUSCOPE_CLI, NPUSCOPE_CLI, "train", "--model", "mlp", "--dataset", "synthetic", "--epochs", "100",
            "--db", db.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait until some steps are committed, then interrupt.
  int64_t steps = 0;
  for (int i = 0; i < 200 && steps < 20; ++i) {
    ::usleep(100'000);
    if (std::filesystem::exists(db)) steps = std::max<int64_t>(0, sqlInt(db, "SELECT count(*) FROM steps"));
  }
  ASSERT_GE(steps, 20) << "the run did not get going";
  const std::string why = stopAndExpectFailedRun(pid, sig, db);
  EXPECT_NE(why.find(sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"), std::string::npos) << why;
  EXPECT_GE(sqlInt(db, "SELECT count(*) FROM steps"), steps);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

INSTANTIATE_TEST_SUITE_P(Signals, CliInterrupt, ::testing::Values(SIGINT, SIGTERM));

}  // namespace

// `npuscope infer` stopped with SIGINT or SIGTERM between batches: its recorded run ends failed
// within 2 s, exit 128 + signal.
TEST_P(CliInterrupt, InferEndsItsRunFailedPromptly) {
  const int sig = GetParam();
  const std::string ck = scratchPath("interrupt_ck_" + std::to_string(sig) + ".pt");
  const std::string db = scratchPath("interrupt_infer_" + std::to_string(sig) + ".db");
  const CliRun trained = run("train --model mlp --dataset synthetic --epochs 1 --no-db --save " + ck);
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    // Batches of one over the 10,000 test images: far longer than the test waits.
    ::execl(NPUSCOPE_CLI, NPUSCOPE_CLI, "infer", ck.c_str(), "--dataset", "fashion-mnist", "--batch-size", "1", "--db",
            db.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int64_t ops = 0;
  for (int i = 0; i < 200 && ops < 1000; ++i) {
    ::usleep(100'000);
    if (std::filesystem::exists(db)) ops = std::max<int64_t>(0, sqlInt(db, "SELECT count(*) FROM op_events"));
  }
  ASSERT_GE(ops, 1000) << "the evaluation did not get going";
  const std::string why = stopAndExpectFailedRun(pid, sig, db);
  EXPECT_NE(why.find(sig == SIGINT ? "interrupted (SIGINT) after " : "terminated (SIGTERM) after "), std::string::npos)
      << why;
  EXPECT_NE(why.find(" batches"), std::string::npos) << why;
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}
