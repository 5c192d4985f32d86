// Injected full disks (NPUSCOPE_FAULT_DISK_BYTES): the spec, dump-file writes cut short, and the
// SQLite VFS that fails trace-file writes past the room with SQLITE_FULL while what was committed
// stays readable. The CLI's behaviour under them is tested in tests/cli/test_cli_faults.cpp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "npuscope/store/disk_faults.h"

namespace npuscope {
namespace {

std::string scratch(const std::string& name) {
  const std::string p = ::testing::TempDir() + "/npuscope_faults_" + std::to_string(::getpid()) + "_" + name;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(p + suffix);
  return p;
}

TEST(DiskFaults, ParsesBytesAndFilesAndRefusesAnythingElse) {
  auto all = DiskFaults::parse("64K");
  ASSERT_TRUE(all.isOk()) << all.status().message();
  EXPECT_EQ((*all)->room(), 64u << 10);
  EXPECT_TRUE((*all)->governs(DiskFaults::kTraceDb));
  EXPECT_TRUE((*all)->governs(DiskFaults::kTraceWal));
  EXPECT_TRUE((*all)->governs(DiskFaults::kDumpFiles));
  EXPECT_EQ((*all)->describe(), "NPUSCOPE_FAULT_DISK_BYTES=64K");

  auto db = DiskFaults::parse("3M:db");
  ASSERT_TRUE(db.isOk());
  EXPECT_EQ((*db)->room(), 3u << 20);
  EXPECT_TRUE((*db)->governs(DiskFaults::kTraceDb));
  EXPECT_FALSE((*db)->governs(DiskFaults::kTraceWal));
  EXPECT_FALSE((*db)->governs(DiskFaults::kDumpFiles));

  auto two = DiskFaults::parse("1000:wal,dump");
  ASSERT_TRUE(two.isOk());
  EXPECT_EQ((*two)->room(), 1000u);
  EXPECT_FALSE((*two)->governs(DiskFaults::kTraceDb));
  EXPECT_TRUE((*two)->governs(DiskFaults::kTraceWal) && (*two)->governs(DiskFaults::kDumpFiles));
  EXPECT_NE(std::string((*two)->sqliteVfs()), (*db)->sqliteVfs()) << "each has its own VFS";

  for (const char* bad : {"", "x", "-1", "12Q", "1M:", "1M:db,", "1M:disk", "99999999999999999999", "17179869184G"}) {
    auto f = DiskFaults::parse(bad);
    ASSERT_FALSE(f.isOk()) << bad;
    EXPECT_NE(f.status().message().find("NPUSCOPE_FAULT_DISK_BYTES=" + std::string(bad) + ": expected BYTES[:FILES]"),
              std::string::npos)
        << f.status().message();
  }
}

TEST(DiskFaults, DumpFileWritesAreCutShortThenFailWithEnospc) {
  auto f = DiskFaults::parse("10:dump");
  ASSERT_TRUE(f.isOk());
  const std::string path = scratch("dump.bin");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  char a[6] = "abcde", b[6] = "fghij", c[4] = "klm";
  iovec parts[] = {{a, 5}, {b, 5}, {c, 3}};
  // 13 bytes asked, 10 fit: a short write of the first two parts.
  EXPECT_EQ((*f)->writev(DiskFaults::kDumpFiles, fd, parts, 3), 10);
  EXPECT_EQ((*f)->room(), 0u);
  errno = 0;
  EXPECT_EQ((*f)->writev(DiskFaults::kDumpFiles, fd, parts + 2, 1), -1);
  EXPECT_EQ(errno, ENOSPC);
  ::close(fd);
  EXPECT_EQ(std::filesystem::file_size(path), 10u);
  // Removing the file gives its bytes back.
  (*f)->giveBack(DiskFaults::kDumpFiles, 10);
  EXPECT_EQ((*f)->room(), 10u);
  // Files it does not govern are written as they are.
  const int fd2 = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  EXPECT_EQ((*f)->writev(DiskFaults::kTraceDb, fd2, parts, 3), 13);
  ::close(fd2);
  EXPECT_EQ((*f)->room(), 10u);
}

// Inserts rows of `bytes` each in their own transaction until one fails; returns how many
// committed and the failing result code.
std::pair<int, int> insertUntilFull(sqlite3* db, int bytes, int max_rows) {
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES (zeroblob(?))", -1, &st, nullptr);
  int rows = 0, rc = SQLITE_DONE;
  for (; rows < max_rows; ++rows) {
    sqlite3_bind_int(st, 1, bytes);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) break;
  }
  sqlite3_finalize(st);
  return {rows, rc};
}

int64_t countRows(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

std::string integrity(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::string r;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    r = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return r;
}

// Opens `path` in WAL mode with a table t on the VFS `vfs`.
sqlite3* openWal(const std::string& path, const char* vfs) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;"
                             "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  return db;
}

TEST(DiskFaults, TraceFileWritesPastTheRoomFailAsAFullDiskKeepingWhatWasCommitted) {
  auto f = DiskFaults::parse("256K");
  ASSERT_TRUE(f.isOk());
  const std::string path = scratch("full.db");
  sqlite3* db = openWal(path, (*f)->sqliteVfs());
  const auto [rows, rc] = insertUntilFull(db, 10000, 1000);
  EXPECT_EQ(rc, SQLITE_FULL) << sqlite3_errmsg(db);
  EXPECT_STREQ(sqlite3_errmsg(db), "database or disk is full");
  // Each row takes a few 4 KiB pages of WAL: a 256 KiB disk holds some, far from all.
  EXPECT_GT(rows, 3);
  EXPECT_LT(rows, 30);
  const uint64_t on_disk = std::filesystem::file_size(path) + std::filesystem::file_size(path + "-wal");
  EXPECT_LE(on_disk, 256u << 10);
  EXPECT_EQ(countRows(path), rows) << "every committed row is there";
  EXPECT_EQ(integrity(path), "ok");
  sqlite3_close(db);
}

// The WAL has room, the database file none: every commit succeeds, the checkpoint that would
// copy the WAL into the file fails with SQLITE_FULL, and nothing is lost. Once the file can
// grow, a checkpoint on the default VFS copies it all.
TEST(DiskFaults, ACheckpointIntoAFullDatabaseFileFailsAndLosesNothing) {
  auto f = DiskFaults::parse("64K:db");
  ASSERT_TRUE(f.isOk());
  const std::string path = scratch("ckpt.db");
  sqlite3* db = openWal(path, (*f)->sqliteVfs());
  const auto [rows, rc] = insertUntilFull(db, 10000, 100);
  EXPECT_EQ(rows, 100) << sqlite3_errmsg(db);
  EXPECT_EQ(rc, SQLITE_DONE);
  int log = -1, copied = -1;
  EXPECT_EQ(sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &copied), SQLITE_FULL);
  EXPECT_LE(std::filesystem::file_size(path), 64u << 10);
  EXPECT_GT(std::filesystem::file_size(path + "-wal"), 1u << 20);
  EXPECT_EQ(countRows(path), 100);
  EXPECT_EQ(integrity(path), "ok");
  sqlite3_close(db);  // its closing checkpoint fails too: the WAL stays beside the file
  EXPECT_GT(std::filesystem::file_size(path + "-wal"), 1u << 20);
  EXPECT_EQ(countRows(path), 100);

  sqlite3* plain = openWal(path, nullptr);
  EXPECT_EQ(sqlite3_wal_checkpoint_v2(plain, "main", SQLITE_CHECKPOINT_TRUNCATE, &log, &copied), SQLITE_OK);
  sqlite3_close(plain);
  EXPECT_GT(std::filesystem::file_size(path), 100u * 10000) << "the file alone holds the 100 rows";
  EXPECT_EQ(countRows(path), 100);
  EXPECT_EQ(integrity(path), "ok");
}

// Deleting a governed file gives its bytes back: a disk that filled holds as much again once the
// WAL is gone.
TEST(DiskFaults, RemovedFilesGiveTheirRoomBack) {
  auto f = DiskFaults::parse("512K:wal");
  ASSERT_TRUE(f.isOk());
  const std::string path = scratch("again.db");
  sqlite3* db = openWal(path, (*f)->sqliteVfs());
  const auto first = insertUntilFull(db, 10000, 1000);
  EXPECT_EQ(first.second, SQLITE_FULL);
  sqlite3_close(db);  // checkpoints (the file is not governed) and deletes the WAL
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_EQ((*f)->room(), 512u << 10);
  db = openWal(path, (*f)->sqliteVfs());
  const auto second = insertUntilFull(db, 10000, 1000);
  EXPECT_EQ(second.second, SQLITE_FULL);
  EXPECT_NEAR(second.first, first.first, 2);
  sqlite3_close(db);
  EXPECT_EQ(countRows(path), first.first + second.first);
  EXPECT_EQ(integrity(path), "ok");
}

}  // namespace
}  // namespace npuscope
