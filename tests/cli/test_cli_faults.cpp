// Faults lose nothing already recorded. A full disk, on a real small filesystem (a tmpfs mounted
// for the test; skipped where the machine does not allow mounting): dumps stop before the disk
// fills and the run completes; a trace file that cannot grow keeps what it committed with its
// run marked failed and one clear line. The same full disks injected at the write layer
// (NPUSCOPE_FAULT_DISK_BYTES; no mount needed, so these always run): dump files, the trace
// file, its WAL at checkpoint, and an import. A read-only filesystem is refused before
// training. Ctrl-C and SIGTERM end the run failed, promptly, with what was recorded.
#include <signal.h>
#include <sys/mount.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_run.h"
#include "npuscope/dumper/dump_file.h"

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
  const CliRun r = run("train --model mlp --steps 400 --db " + db);
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
  EXPECT_LT(steps, 400);
  EXPECT_EQ(sqlInt(db, "SELECT max(step) FROM steps"), steps - 1);
  EXPECT_NE(why.find("after step " + std::to_string(steps - 1) + ":"), std::string::npos) << why;
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM ops WHERE step = " + std::to_string(steps - 1)), 0);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// An ascend_pt export onto a full disk: one line naming the file that did not fit, exit 1, no
// half-written folder left behind, and the trace file it read unchanged.
TEST(CliDiskFull, AnAscendPtExportThatDoesNotFitLeavesNoFolder) {
  SmallFilesystem fs("96k");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  const std::string db = scratchPath("apt_source.db");
  std::remove(db.c_str());
  ASSERT_EQ(run("train --dataset synthetic --model cnn --steps 3 --db " + db).exit_code, 0);
  const CliRun r = run("export " + db + " --ascend-pt " + fs.path("out"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(countLines(r.out, "\n"), 1) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("_ascend_pt was removed)"), std::string::npos) << r.out;
  int64_t left = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(fs.path("out"))) left += e.is_regular_file();
  EXPECT_EQ(left, 0);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// --- Full disks injected at the write layer (NPUSCOPE_FAULT_DISK_BYTES=BYTES[:FILES]) ---

// Bytes of the files in `dir` and below, and how many there are.
std::pair<uint64_t, int64_t> filesUnder(const std::string& dir) {
  uint64_t bytes = 0;
  int64_t files = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    bytes += e.file_size();
    ++files;
  }
  return {bytes, files};
}

uint64_t sizeOr0(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// Dump files fill a 16 MiB disk in step 2 of 6 (the MLP dumps ~7 MiB of files per step): one
// warning names the file, the op and step and what was dumped; the file that did not fit is not
// left behind; the trace file, which has room, records every step and the run completes.
TEST(CliInjectedDiskFull, DumpFilesFillDumpingStopsAndTheRunCompletes) {
  const std::string dir = scratchPath("injected_dumps"), db = scratchPath("injected_dumps.db");
  const std::string acl = scratchPath("injected_acl.json");
  std::ofstream(acl) << R"({"dump":{"dump_mode":"all","dump_data":"tensor","dump_path":")" << dir << R"("}})";
  const CliRun r = run("train --dataset synthetic --model mlp --steps 6 --dump-config " + acl + " --dump-force --db " + db,
                       true, "NPUSCOPE_FAULT_DISK_BYTES=16M:dump");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  ASSERT_EQ(countLines(r.out, "dump stopped: "), 1) << r.out;
  std::smatch m;
  const std::regex line(R"(npuscope: dump stopped: dumping (\S+) of step (\d+): ()" + dir +
                        R"(/\S+): writing the dump file: No space left on device \(the partial file was removed\); )"
                        R"((\d+) tensors \(.*\) of (\d+) ops were dumped before \(training goes on\))");
  ASSERT_TRUE(std::regex_search(r.out, m, line)) << r.out;
  const int64_t step = std::stoll(m[2]);
  EXPECT_FALSE(std::filesystem::exists(m[3].str())) << "the file that did not fit is removed";
  // What the line says was dumped is what the trace file and the dump directory hold.
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM tensor_dumps"), std::stoll(m[4])) << r.out;
  EXPECT_EQ(sqlInt(db, "SELECT count(DISTINCT op_id) FROM tensor_dumps"), std::stoll(m[5]));
  EXPECT_GE(step, 1) << "the first steps fitted";
  // The last dumped tensors are of that step, or of the one before when its very first file
  // was the one that did not fit (the dumper's threads write files in varying order).
  const int64_t last = sqlInt(db, "SELECT max(step) FROM tensor_dumps");
  EXPECT_TRUE(last == step || last == step - 1) << last << " vs " << step;
  const auto [bytes, files] = filesUnder(dir);
  EXPECT_EQ(files, std::stoll(m[5])) << "one file per dumped op";
  EXPECT_LE(bytes, uint64_t{16} << 20);
  // The disk was nearly full when dumping stopped. What is free at the end is the room the file
  // that did not fit found (less than that file) and its partial file, and the files the other
  // writer threads (one per core, at most 4) finished meanwhile with later ops, removed: about a
  // file per thread. Every op's file is among those left (step 0 was dumped whole), so the
  // largest left is the largest any op writes; one more is allowed for a thread that finished two.
  uint64_t largest = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) largest = std::max<uint64_t>(largest, e.file_size());
  }
  const uint64_t threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  EXPECT_LT((uint64_t{16} << 20) - bytes, (threads + 1) * largest)
      << "the disk was not nearly full when dumping stopped: " << bytes << " bytes kept, the largest file "
      << largest << " bytes, " << threads << " writer threads";
  // Every file left is whole: its header and payloads add up to its size.
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    auto decoded = npuscope::dumper::readDumpFile(e.path().string());
    EXPECT_TRUE(decoded.isOk()) << decoded.status().message();
  }
  // Recording went on to the end.
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "completed");
  EXPECT_NE(sqlText(db, "SELECT json_extract(results_json, '$.dump_error') FROM runs").find("No space left on device"),
            std::string::npos);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps"), 6);
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM ops WHERE step = 5"), 0);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
  // The summary ends with it again, after the summary's lines (stdout) also on a pipe.
  const size_t reminder = r.out.find("\nnpuscope: warning: dumping stopped: dumping ");
  ASSERT_NE(reminder, std::string::npos) << r.out;
  EXPECT_LT(r.out.find("\ndumped           "), reminder) << r.out;
}

// The trace file and its WAL share 6 MiB: the run stops recording when they are full, keeps
// every step committed before with its ops, ends failed with the reason, and the CLI prints one
// line naming the file and what was lost and exits 1.
TEST(CliInjectedDiskFull, ATraceFileThatCannotGrowKeepsItsStepsAndEndsFailed) {
  const std::string db = std::filesystem::path(scratchPath("injected_full.db")).lexically_normal().string();
  const CliRun r = run("train --model mlp --steps 400 --db " + db, true, "NPUSCOPE_FAULT_DISK_BYTES=6M");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(countLines(r.out, "npuscope: error: "), 1) << r.out;
  std::smatch m;
  const std::regex line("npuscope: error: " + db + R"(: the filesystem of \S+ is full \(injected: )"
                        R"(NPUSCOPE_FAULT_DISK_BYTES=6M\); recording stopped after step (\d+): what came later )"
                        R"(\(ops, steps, dumps\) is not in the file; what was committed stays in )" + db +
                        R"(-wal \([0-9.]+ MiB\): keep the two files together until a writer with room copies it )"
                        R"(into the file \(the next npuscope run on the file, or sqlite3 )" + db +
                        R"( 'PRAGMA wal_checkpoint'\)\n)");
  ASSERT_TRUE(std::regex_search(r.out, m, line)) << r.out;
  const int64_t last = std::stoll(m[1]);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "failed");
  const std::string why = sqlText(db, "SELECT json_extract(results_json, '$.error') FROM runs");
  EXPECT_NE(r.out.find(why), std::string::npos) << "the file says what the line says: " << why;
  // Training went to its end: its summary is shown, then the error; the file keeps the results too.
  const size_t summary = r.out.find("\ntest accuracy    0.");
  EXPECT_NE(summary, std::string::npos) << r.out;
  EXPECT_LT(summary, r.out.find("\nrecorded         run 1 in " + db + ": failed (the error below)\n"
                                "npuscope: error: "))
      << r.out;
  EXPECT_EQ(sqlInt(db, "SELECT json_extract(results_json, '$.steps') FROM runs"), 400);
  // Memory by owner: the blocks that live to the end were written after the first step, not at
  // the stop the full disk prevented: the parameters and their gradients (fp32 both, O0) are in
  // the file, the same bytes each.
  const int64_t params = sqlInt(db, "SELECT sum(requested) FROM memory_blocks WHERE free_seq IS NULL AND category = 1");
  EXPECT_GT(params, 100000);
  EXPECT_EQ(sqlInt(db, "SELECT sum(requested) FROM memory_blocks WHERE free_seq IS NULL AND category = 3"), params);
  EXPECT_GT(std::stod(sqlText(db, "SELECT json_extract(results_json, '$.test_accuracy') FROM runs")), 0.5);
  // A step after the failure tells it when it happens (ASignalAfterTheDiskFilledTellsBoth), once;
  // whether a step came after it depends on when the failing commit ran.
  EXPECT_LE(countLines(r.out, "npuscope: warning: "), 1) << r.out;
  if (r.out.find("npuscope: warning: ") != std::string::npos) {
    EXPECT_NE(r.out.find("npuscope: warning: " + why + "; the run goes on unrecorded\n"), std::string::npos) << r.out;
  }
  EXPECT_NE(sqlInt(db, "SELECT ended_ns FROM runs"), -1);
  // The checkpointer waits for 16 MiB of WAL: the 6 MiB run never reached the database file.
  EXPECT_GT(sizeOr0(db + "-wal"), sizeOr0(db));
  // Every step up to the one named is there, each with its ops; none after it.
  EXPECT_GT(last, 10);
  EXPECT_LT(last, 399);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps"), last + 1);
  EXPECT_EQ(sqlInt(db, "SELECT max(step) FROM steps"), last);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps s WHERE NOT EXISTS (SELECT 1 FROM ops o WHERE o.step = s.step)"), 0);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM ops WHERE step > " + std::to_string(last)), 0);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
  EXPECT_LE(sizeOr0(db) + sizeOr0(db + "-wal"), uint64_t{6} << 20) << "the injected disk held no more";
}

// The WAL has room, the database file none (NPUSCOPE_FAULT_DISK_BYTES=1M:db): every commit
// succeeds, every checkpoint that would copy the WAL into the file fails. Nothing is lost: the
// run completes with all its steps and ops, in the WAL beside the file, and the next writer with
// room merges them into the file.
TEST(CliInjectedDiskFull, AWalThatCannotBeCheckpointedLosesNothing) {
  const std::string db = scratchPath("injected_wal.db");
  const CliRun r = run("train --model mlp --epochs 2 --steps 1500 --db " + db, true, "NPUSCOPE_FAULT_DISK_BYTES=1M:db");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("npuscope: error"), std::string::npos) << r.out;
  // One line tells the user the WAL holds the run and must stay with the file.
  const std::string file = std::filesystem::path(db).lexically_normal().string();  // as SQLite names it
  const std::string warning = "npuscope: warning: " + file + ": the filesystem of ";
  ASSERT_NE(r.out.find(warning), std::string::npos) << r.out;
  const std::string line = r.out.substr(r.out.find(warning), r.out.find('\n', r.out.find(warning)) - r.out.find(warning));
  EXPECT_NE(line.find("is full (injected: NPUSCOPE_FAULT_DISK_BYTES=1M:db)"), std::string::npos) << line;
  EXPECT_NE(line.find(": the last checkpoint found no room, so " + file + "-wal ("), std::string::npos) << line;
  EXPECT_NE(line.find(" MiB) holds committed pages the file does not have yet; nothing is lost: keep the two files "
                      "together until a writer with room copies it into the file"),
            std::string::npos) << line;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(recorded +run 1 in \S+ \((\d+) ops\))"))) << r.out;
  const int64_t ops = std::stoll(m[1]);
  // The checkpoints failed: the file stayed within its megabyte, the WAL holds the run.
  EXPECT_LE(sizeOr0(db), uint64_t{1} << 20);
  EXPECT_GT(sizeOr0(db + "-wal"), uint64_t{8} << 20);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps"), 1500);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM ops"), ops);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");

  // The next writer, with room, checkpoints everything into the file and removes the WAL.
  const CliRun again = run("train --dataset synthetic --model mlp --steps 2 --db " + db);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(again.out.find("warning"), std::string::npos) << "with room the checkpoint succeeds: " << again.out;
  EXPECT_EQ(sizeOr0(db + "-wal"), 0u);
  EXPECT_GT(sizeOr0(db), uint64_t{8} << 20);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps WHERE run_id = 1"), 1500);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM ops WHERE run_id = 1"), ops);
  EXPECT_EQ(sqlText(db, "SELECT group_concat(status) FROM runs"), "completed,completed");
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// A full disk under a multi-rank job (`train --nproc 2`, each rank's trace file on an injected 6 MiB
// disk): each rank keeps what it committed, its run ends failed with the reason and its own error
// line; the launcher exits non-zero; nothing hangs; the cluster report still reads the job.
TEST(CliInjectedDiskFull, EveryRankOfAJobKeepsItsStepsAndEndsFailed) {
  const std::string db = std::filesystem::path(scratchPath("injected_job.db")).lexically_normal().string();
  const std::string stem = db.substr(0, db.size() - 3);
  for (int rank = 0; rank < 2; ++rank) std::filesystem::remove(stem + ".rank" + std::to_string(rank) + ".db");
  const CliRun r = run("train --nproc 2 --model mlp --steps 400 --db " + db, true, "NPUSCOPE_FAULT_DISK_BYTES=6M");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("npuscope: error: rank "), std::string::npos) << "the launcher names the rank: " << r.out;
  // A rank whose disk filled says so; one the launcher stopped first (after the other rank
  // failed) ends terminated. At least one rank filled its disk.
  int full = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = stem + ".rank" + std::to_string(rank) + ".db";
    SCOPED_TRACE(file);
    EXPECT_EQ(sqlText(file, "SELECT status FROM runs"), "failed");
    EXPECT_EQ(sqlInt(file, "SELECT rank FROM runs"), rank);
    EXPECT_EQ(sqlText(file, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(sqlInt(file, "SELECT count(*) FROM steps s WHERE NOT EXISTS (SELECT 1 FROM ops o WHERE o.step = s.step)"), 0);
    std::smatch m;
    const std::regex line("npuscope: error: " + file + R"(: the filesystem of \S+ is full \(injected: )"
                          R"(NPUSCOPE_FAULT_DISK_BYTES=6M\); recording stopped after step (\d+))");
    const std::string why = sqlText(file, "SELECT json_extract(results_json, '$.error') FROM runs");
    if (!std::regex_search(r.out, m, line)) {
      EXPECT_NE(why.find("terminated (SIGTERM)"), std::string::npos) << why << "\n" << r.out;
      continue;
    }
    ++full;
    EXPECT_EQ(countLines(r.out, "npuscope: error: " + file + ": "), 1) << r.out;
    const int64_t last = std::stoll(m[1]);
    EXPECT_GT(last, 10);
    EXPECT_LT(last, 399);
    EXPECT_NE(why.find("is full"), std::string::npos) << why;
    EXPECT_EQ(sqlInt(file, "SELECT count(*) FROM steps"), last + 1);
    EXPECT_GT(sqlInt(file, "SELECT count(*) FROM collectives"), last);  // a gradient all-reduce a step at least
  }
  EXPECT_GE(full, 1) << r.out;
  const CliRun rep = run("report --cluster " + stem + ".rank0.db " + stem + ".rank1.db");
  EXPECT_EQ(rep.exit_code, 0) << rep.out;
  EXPECT_EQ(countLines(rep.out, "'s run is failed"), 2) << rep.out;
}

// `npuscope import` onto a full disk: into a file that holds a run, and into new files (one too
// small for even the schema). One line, exit 1; the run it began ends failed with the reason
// (nothing half-written passes for a complete run) and the run already there is untouched.
// With room again the same import works.
TEST(CliInjectedDiskFull, ImportOntoAFullDiskLeavesNoCompleteLookingRun) {
  const std::string trace = std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt";
  auto path = [](const std::string& name) {
    return std::filesystem::path(scratchPath(name)).lexically_normal().string();
  };
  const std::string db = path("injected_import.db");
  ASSERT_EQ(run("import -q '" + trace + "' --db " + db).exit_code, 0);
  const int64_t ops = sqlInt(db, "SELECT count(*) FROM op_events WHERE run_id = 1");
  const int64_t tasks = sqlInt(db, "SELECT count(*) FROM device_tasks WHERE run_id = 1");
  ASSERT_GT(ops, 1000);

  struct Case {
    std::string into, bytes;
    int64_t run;  // the run the import began; 0: the schema did not fit, no run at all; -1: its
                  // run's row did not fit, the file holds none of it
  };
  for (const Case& c : {Case{db, "64K", -1}, Case{db, "128K", 2}, Case{path("injected_import_new.db"), "640K", 1},
                        Case{path("injected_import_tiny.db"), "64K", 0}}) {
    SCOPED_TRACE(c.into + " with " + c.bytes);
    const CliRun r = run("import -q '" + trace + "' --db " + c.into, true, "NPUSCOPE_FAULT_DISK_BYTES=" + c.bytes);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(countLines(r.out, "\n"), 1) << r.out;
    EXPECT_EQ(r.out.rfind("npuscope: error: " + c.into + ": ", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find("imported "), std::string::npos) << r.out;
    // What the file committed may stay in its WAL (its last checkpoint found no room): the line
    // then ends saying so.
    const size_t wal_note = r.out.find("; what was committed stays in ");
    if (wal_note != std::string::npos) {
      EXPECT_EQ(r.out.find("; what was committed stays in " + c.into + "-wal ("), wal_note) << r.out;
    }
    EXPECT_EQ(sqlText(c.into, "PRAGMA integrity_check"), "ok");
    if (c.run == 0) {
      const size_t creating = r.out.find(": creating its tables (schema version ");
      EXPECT_NE(creating, std::string::npos) << r.out;
      EXPECT_NE(r.out.find(") failed: database or disk is full", creating), std::string::npos) << r.out;
      EXPECT_EQ(sqlInt(c.into, "SELECT count(*) FROM sqlite_master"), 0) << "no schema, so no run";
      continue;
    }
    if (c.run < 0) {
      EXPECT_NE(r.out.find(" is full (injected: NPUSCOPE_FAULT_DISK_BYTES=" + c.bytes +
                           "); the import stopped before its run was committed: the file holds none of it"),
                std::string::npos)
          << r.out;
      EXPECT_EQ(sqlInt(c.into, "SELECT count(*) FROM runs"), 1) << "only the run that was there";
      continue;
    }
    const std::string run_id = std::to_string(c.run);
    EXPECT_NE(r.out.find(": the filesystem of "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" is full (injected: NPUSCOPE_FAULT_DISK_BYTES=" + c.bytes + "); the import stopped: run " +
                         run_id + " holds part of the trace at most and is marked failed"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(sqlInt(c.into, "SELECT count(*) FROM runs WHERE status = 'completed' AND id >= " + run_id), 0);
    EXPECT_EQ(sqlText(c.into, "SELECT status FROM runs WHERE id = " + run_id), "failed");
    const std::string why = sqlText(c.into, "SELECT json_extract(results_json, '$.error') FROM runs WHERE id = " + run_id);
    EXPECT_NE(r.out.find(why), std::string::npos) << "the file says what the line says: " << why;
    EXPECT_LT(sqlInt(c.into, "SELECT count(*) FROM op_events WHERE run_id = " + run_id), ops);
  }
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs WHERE id = 1"), "completed");
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM op_events WHERE run_id = 1"), ops);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM device_tasks WHERE run_id = 1"), tasks);

  const CliRun r = run("import -q '" + trace + "' --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs WHERE id = 3"), "completed");
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM op_events WHERE run_id = 3"), ops);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// An import whose WAL fits but whose database file cannot grow (300K:db): the import completes,
// exit 0, with one warning that the run's pages stay in the WAL; the file reads whole.
TEST(CliInjectedDiskFull, AnImportWhoseCheckpointFindsNoRoomWarnsAndKeepsItsRun) {
  const std::string trace = std::string(NPUSCOPE_TRACES) + "/kineto_before_fix_trace.json";
  const std::string db = std::filesystem::path(scratchPath("injected_import_wal.db")).lexically_normal().string();
  const std::string roomy = std::filesystem::path(scratchPath("import_wal_roomy.db")).lexically_normal().string();
  const CliRun with_room = run("import -q '" + trace + "' --db " + roomy);
  ASSERT_EQ(with_room.exit_code, 0) << with_room.out;
  EXPECT_EQ(with_room.out.find("warning"), std::string::npos) << with_room.out;

  const CliRun r = run("import -q '" + trace + "' --db " + db, true, "NPUSCOPE_FAULT_DISK_BYTES=300K:db");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(countLines(r.out, "npuscope: warning: " + db + ": the filesystem of "), 1) << r.out;
  EXPECT_NE(r.out.find(" is full (injected: NPUSCOPE_FAULT_DISK_BYTES=300K:db): the last checkpoint found no room, so "),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" so " + db + "-wal ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(") holds committed pages the file does not have yet; nothing is lost"), std::string::npos) << r.out;
  EXPECT_GT(sizeOr0(db + "-wal"), 0u);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM op_events"), sqlInt(roomy, "SELECT count(*) FROM op_events"));
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM device_tasks"), sqlInt(roomy, "SELECT count(*) FROM device_tasks"));
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// A malformed value is one clear line before anything runs.
TEST(CliInjectedDiskFull, AMalformedSettingIsRefused) {
  const std::string db = scratchPath("injected_bad.db");
  const CliRun r = run("train --dataset synthetic --model mlp --steps 3 --db " + db, true,
                       "NPUSCOPE_FAULT_DISK_BYTES=lots");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("npuscope: error: NPUSCOPE_FAULT_DISK_BYTES=lots: expected BYTES[:FILES]"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << r.out;
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

// Starts the CLI with `args` in the background, its output (stdout and stderr) into `out`, with
// `env` ("NAME=value", if any) set; its pid, -1 on failure.
pid_t startCli(const std::vector<std::string>& args, const std::string& out = "/dev/null", const std::string& env = "") {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  ::signal(SIGINT, SIG_DFL);  // a test runner may start us with SIGINT ignored
  if (!env.empty()) ::putenv(const_cast<char*>(env.c_str()));
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  std::vector<char*> argv{const_cast<char*>(NPUSCOPE_CLI)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(NPUSCOPE_CLI, argv.data());
  ::_exit(127);
}

// Polls every 100 ms (at most `polls` times) until `db` holds `want` committed steps; the count.
int64_t waitForSteps(const std::string& db, int64_t want, int polls) {
  int64_t steps = 0;
  for (int i = 0; i < polls && steps < want; ++i) {
    ::usleep(100'000);
    if (std::filesystem::exists(db)) steps = std::max<int64_t>(0, sqlInt(db, "SELECT count(*) FROM steps"));
  }
  return steps;
}

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
  const pid_t pid = startCli({"train", "--model", "mlp", "--dataset", "synthetic", "--epochs", "100", "--db", db});
  ASSERT_GE(pid, 0);
  const int64_t steps = waitForSteps(db, 20, 200);
  ASSERT_GE(steps, 20) << "the run did not get going";
  const std::string why = stopAndExpectFailedRun(pid, sig, db);
  EXPECT_NE(why.find(sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"), std::string::npos) << why;
  EXPECT_GE(sqlInt(db, "SELECT count(*) FROM steps"), steps);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// The launcher of `train --nproc 2` stopped: it passes the signal on, every rank ends its run
// failed at the same step with what it recorded, and the launcher exits 128 + sig.
TEST_P(CliInterrupt, NprocLauncherPassesItOnToEveryRank) {
  const int sig = GetParam();
  const std::string db = scratchPath("interrupt_nproc_" + std::to_string(sig) + ".db");
  const std::string r0 = scratchPath("interrupt_nproc_" + std::to_string(sig) + ".rank0.db");
  const std::string r1 = scratchPath("interrupt_nproc_" + std::to_string(sig) + ".rank1.db");
  for (const std::string& f : {r0, r1}) std::remove(f.c_str());
  const pid_t pid = startCli({"train", "--model", "mlp", "--dataset", "synthetic", "--epochs", "100", "--batch-size",
                              "32", "--nproc", "2", "--db", db});
  ASSERT_GE(pid, 0);
  ASSERT_GE(waitForSteps(r1, 20, 300), 20) << "the ranks did not get going";
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, sig);  // the launcher only, as a terminal's Ctrl-C reaching it alone or a job scheduler would
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sig) << "status " << st;
  for (const std::string& f : {r0, r1}) {
    EXPECT_EQ(sqlText(f, "SELECT status FROM runs"), "failed") << f;
    EXPECT_NE(sqlText(f, "SELECT json_extract(results_json, '$.error') FROM runs")
                  .find(sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"),
              std::string::npos);
    EXPECT_EQ(sqlText(f, "PRAGMA integrity_check"), "ok");
  }
  // Gradient all-reduces keep the ranks in step: they stop within a step of each other.
  EXPECT_LE(std::abs(sqlInt(r0, "SELECT count(*) FROM steps") - sqlInt(r1, "SELECT count(*) FROM steps")), 1);
}

INSTANTIATE_TEST_SUITE_P(Signals, CliInterrupt, ::testing::Values(SIGINT, SIGTERM));

// SIGTERM after the trace file's disk filled (as the launcher of a job stops a rank whose disk
// filled when another rank failed first): the failure was told by a warning when a step found it;
// the error line says first what the file lacks and where the rest is, then the signal; the run
// keeps the first reason.
TEST(CliInjectedDiskFull, ASignalAfterTheDiskFilledTellsBoth) {
  const std::string db = std::filesystem::path(scratchPath("full_then_term.db")).lexically_normal().string();
  const std::string log = scratchPath("full_then_term.log");
  for (const std::string& f : {db, db + "-wal", db + "-shm"}) std::remove(f.c_str());
  const pid_t pid = startCli({"train", "--model", "mlp", "--epochs", "100", "--db", db}, log, "NPUSCOPE_FAULT_DISK_BYTES=6M");
  ASSERT_GE(pid, 0);
  std::string status;
  for (int i = 0; i < 600 && status != "failed"; ++i) {  // the writer marks the run failed when the disk fills
    ::usleep(100'000);
    if (std::filesystem::exists(db)) status = sqlText(db, "SELECT status FROM runs");
  }
  ASSERT_EQ(status, "failed") << "the disk did not fill";
  // Training goes on: its next step tells the failure, long before the run ends.
  auto output = [&log] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (int i = 0; i < 300 && output().find("npuscope: warning: ") == std::string::npos; ++i) ::usleep(100'000);
  const std::string why = stopAndExpectFailedRun(pid, SIGTERM, db);
  EXPECT_NE(why.find("is full"), std::string::npos) << why;
  EXPECT_EQ(why.find("SIGTERM"), std::string::npos) << why;
  const std::string out = output();
  EXPECT_EQ(countLines(out, "npuscope: warning: "), 1) << out;
  EXPECT_NE(out.find("npuscope: warning: " + why + "; the run goes on unrecorded\n"), std::string::npos) << out;
  EXPECT_EQ(countLines(out, "npuscope: error: "), 1) << out;
  EXPECT_LT(out.find("npuscope: warning: "), out.find("npuscope: error: ")) << out;
  const std::regex line("npuscope: error: " + db + R"(: the filesystem of \S+ is full \(injected: )"
                        R"(NPUSCOPE_FAULT_DISK_BYTES=6M\); recording stopped after step (\d+): .*; what was )"
                        R"(committed stays in )" + db + R"(-wal .*; then terminated \(SIGTERM\) after \d+ steps; the )"
                        R"(run is marked failed and keeps what was recorded\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, line)) << out;
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps"), std::stoll(m[1]) + 1);
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

// One rank of `train --nproc 2` SIGKILLed: the other's next collective fails (its peer's
// connection is gone) and its run ends failed with a line that says so — or with the launcher's
// SIGTERM, whichever comes first — never by the transport's exception leaving the program
// (std::terminate, a run left `running`). The launcher exits with the killed rank's code.
TEST(CliNproc, AKilledRankEndsTheOtherRanksRunFailed) {
  const std::string db = scratchPath("killed_rank.db");
  const std::string r0 = scratchPath("killed_rank.rank0.db");
  const std::string r1 = scratchPath("killed_rank.rank1.db");
  for (const std::string& f : {r0, r1}) std::remove(f.c_str());
  const pid_t pid = startCli({"train", "--model", "mlp", "--dataset", "synthetic", "--epochs", "100", "--batch-size",
                              "32", "--nproc", "2", "--db", db});
  ASSERT_GE(pid, 0);
  ASSERT_GE(waitForSteps(r1, 20, 300), 20) << "the ranks did not get going";
  // Rank 1: the launcher's child whose command line says --rank 1.
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t rank1 = -1;
  for (pid_t c = 0; children >> c;) {
    std::ifstream cmd("/proc/" + std::to_string(c) + "/cmdline");
    const std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (line.find(std::string("--rank") + '\0' + "1" + '\0') != std::string::npos) rank1 = c;
  }
  ASSERT_GT(rank1, 0);
  ::kill(rank1, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL) << "status " << st;
  EXPECT_EQ(sqlText(r0, "SELECT status FROM runs"), "failed");
  const std::string why = sqlText(r0, "SELECT json_extract(results_json, '$.error') FROM runs");
  // The collective that fails first is the gradient all-reduce or AMP's overflow all-reduce.
  const bool peer_lost = why.rfind("rank 0: the ", 0) == 0 &&
                         why.find(" all-reduce with the other ranks failed (a peer rank ended or lost its connection)") !=
                             std::string::npos;
  EXPECT_TRUE(peer_lost || why.find("terminated (SIGTERM)") != std::string::npos) << why;
  for (const std::string& f : {r0, r1}) EXPECT_EQ(sqlText(f, "PRAGMA integrity_check"), "ok") << f;
}

// `npuscope infer` stopped with SIGINT or SIGTERM between batches: its recorded run ends failed
// within 2 s, exit 128 + signal.
TEST_P(CliInterrupt, InferEndsItsRunFailedPromptly) {
  const int sig = GetParam();
  const std::string ck = scratchPath("interrupt_ck_" + std::to_string(sig) + ".pt");
  const std::string db = scratchPath("interrupt_infer_" + std::to_string(sig) + ".db");
  const CliRun trained = run("train --model mlp --dataset synthetic --epochs 1 --no-db --save " + ck);
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  // Batches of one over the 10,000 test images: far longer than the test waits.
  const pid_t pid = startCli({"infer", ck, "--dataset", "fashion-mnist", "--batch-size", "1", "--db", db});
  ASSERT_GE(pid, 0);
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

}  // namespace
