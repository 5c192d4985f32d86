// The trace writer's reserve (`<file>-reserve-<pid>-<n>`): when the disk is already full as a commit begins
// — its first WAL frame does not fit, so the failed commit leaves no frames to reuse — the writer
// gives the reserve back and the update that marks the run failed fits at once. Its own process:
// the injected disk (NPUSCOPE_FAULT_DISK_BYTES) is read once per process, so this executable
// holds this one test, which sets it before any trace file opens.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "npuscope/store/disk_faults.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope {
namespace {

std::string query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_text(st, 0) != nullptr) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// A 4 MiB pretend disk, a trace file on it (`path_`), and a filler that takes every byte left.
class WriterReserve : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("NPUSCOPE_FAULT_DISK_BYTES", "4M", 1);  // before any trace file of this process opens
    auto faults = DiskFaults::fromEnvironment();
    ASSERT_TRUE(faults.isOk());
    ASSERT_NE(*faults, nullptr);
    f_ = *faults;
    path_ = ::testing::TempDir() + "/npuscope_reserve_" + std::to_string(::getpid()) + ".db";
    removeFiles();
  }
  void TearDown() override {
    std::filesystem::remove(path_ + "-filler");
    if (f_ != nullptr) f_->giveBack(DiskFaults::kTraceWal, filled_);
    removeFiles();
  }
  // Something else takes every byte left on the pretend disk.
  void fillTheDisk() {
    const int fd = ::open((path_ + "-filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    std::vector<char> zeros(64 * 1024);
    iovec v{zeros.data(), zeros.size()};
    for (ssize_t n; (n = f_->writev(DiskFaults::kTraceWal, fd, &v, 1)) > 0;) filled_ += static_cast<uint64_t>(n);
    ::close(fd);
    ASSERT_EQ(f_->room(), 0u);
  }
  void removeFiles() {
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + s);
  }

  DiskFaults* f_ = nullptr;
  std::string path_;
  uint64_t filled_ = 0;
};

TEST_F(WriterReserve, ADiskFullAtACommitsFirstFrameStillEndsTheRunFailedAtOnce) {
  const std::string& path = path_;
  // The writer's reserve file(s) beside `path`.
  auto reserves = [&] {
    std::vector<std::filesystem::path> out;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
      if (e.path().filename().string().rfind(std::filesystem::path(path).filename().string() + "-reserve-", 0) == 0) {
        out.push_back(e.path());
      }
    }
    return out;
  };
  TraceWriter::Options o;
  o.commit_interval_ms = 3600 * 1000;  // commits only when asked (flush)
  auto w = TraceWriter::open(path, o);
  ASSERT_TRUE(w.isOk()) << w.status().message();
  ASSERT_EQ(reserves().size(), 1u);
  EXPECT_EQ(std::filesystem::file_size(reserves().front()), 64u * 1024) << "held beside the file while it is open";
  RunInfo info;
  info.command = "train";
  ASSERT_TRUE((*w)->beginRun(info).isOk());
  ASSERT_NO_FATAL_FAILURE(fillTheDisk());
  // A step's ops: the commit's first frame does not fit.
  auto buf = (*w)->takeBuffer();
  for (int i = 0; i < 200; ++i) {
    OpRecord r;
    r.id = i + 1;
    r.start_ns = i * 1000;
    r.dur_ns = 500;
    r.thread_id = 1;
    r.step = 0;
    r.name_id = StringTable::global().intern("aten::add");
    buf->records[buf->size++] = r;
  }
  (*w)->submit(buf);
  StepRecord st;
  st.step = 0;
  st.dur_ns = 200000;
  (*w)->addStep(st);
  const Status s = (*w)->flush();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("is full"), std::string::npos) << s.message();
  // While the writer is still open: the run is already failed, with the reason, and the
  // reserve is gone (its room used for that).
  EXPECT_EQ(query(path, "SELECT status FROM runs"), "failed");
  EXPECT_NE(query(path, "SELECT json_extract(results_json, '$.error') FROM runs").find("is full"), std::string::npos);
  EXPECT_TRUE(reserves().empty());
  w->reset();
  EXPECT_EQ(query(path, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query(path, "SELECT count(*) FROM steps"), "0");
}

// The disk fills at the run's last commit, the one that also holds its end (endRun with the
// results): the run is marked failed with the reason, and keeps the results it ended with; an
// "error" of their own is kept as "end_error". (CliInjectedDiskFull covers a failure before.)
TEST_F(WriterReserve, ARunWhoseLastCommitFailsKeepsItsResultsBesideTheReason) {
  const std::string& path = path_;
  TraceWriter::Options o;
  o.commit_interval_ms = 3600 * 1000;  // commits only when asked (flush, endRun)
  auto w = TraceWriter::open(path, o);
  ASSERT_TRUE(w.isOk()) << w.status().message();
  RunInfo info;
  info.command = "train";
  ASSERT_TRUE((*w)->beginRun(info).isOk());
  ASSERT_TRUE((*w)->flush().isOk());  // the run's row is in the file
  ASSERT_NO_FATAL_FAILURE(fillTheDisk());
  StepRecord st;
  st.step = 0;
  st.dur_ns = 200000;
  (*w)->addStep(st);
  const Status s = (*w)->endRun("completed", R"j({"steps": 1, "test_accuracy": 0.5, "error": "interrupted (SIGINT)"})j");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("is full"), std::string::npos) << s.message();
  w->reset();
  EXPECT_EQ(query(path, "SELECT status FROM runs"), "failed");
  EXPECT_NE(query(path, "SELECT json_extract(results_json, '$.error') FROM runs").find("is full"), std::string::npos);
  EXPECT_EQ(query(path, "SELECT json_extract(results_json, '$.steps') FROM runs"), "1");
  EXPECT_EQ(query(path, "SELECT json_extract(results_json, '$.test_accuracy') FROM runs"), "0.5");
  EXPECT_EQ(query(path, "SELECT json_extract(results_json, '$.end_error') FROM runs"), "interrupted (SIGINT)");
  EXPECT_EQ(query(path, "SELECT count(*) FROM steps"), "0");
  EXPECT_EQ(query(path, "PRAGMA integrity_check"), "ok");
}

}  // namespace
}  // namespace npuscope
