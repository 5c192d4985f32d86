// A fresh trace-file path and a one-value query, shared by the store's tests.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "npuscope/store/database.h"

namespace npuscope::testing_support {

// gtest's temporary directory / npuscope_<pid>_<name>, with that file, its WAL and SHM removed.
// The process id keeps apart the test processes CTest runs at once (one per suite).
inline std::string tempPath(const std::string& name) {
  std::string p = testing::TempDir() + "/npuscope_" + std::to_string(getpid()) + "_" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((p + suffix).c_str());
  return p;
}

// The first column of the first row of sql, or -1 (and a test failure) when it gives none.
inline int64_t scalar(sqlite3* db, const std::string& sql) {
  auto st = prepare(db, sql);
  EXPECT_TRUE(st.isOk()) << sql << ": " << st.status().message();
  if (!st.isOk() || sqlite3_step(st->get()) != SQLITE_ROW) return -1;
  return sqlite3_column_int64(st->get(), 0);
}

}  // namespace npuscope::testing_support
