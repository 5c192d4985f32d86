// Runs the npuscope executable as a user would, through the shell.
#pragma once

#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

struct CliRun {
  int exit_code;
  std::string out;  // stdout, and stderr unless left out
};

// A fresh scratch path in the test temp dir, unique per process (CTest runs each test as its own
// process, in parallel); anything left there by an earlier run, with SQLite's side files and a
// checkpoint's description, is removed.
inline std::string scratchPath(const std::string& name) {
  const std::string p = ::testing::TempDir() + "/npuscope_cli_" + std::to_string(getpid()) + "_" + name;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", ".json"}) std::filesystem::remove_all(p + suffix, ec);
  return p;
}

// `env`: "NAME=value ..." for the executable's environment.
inline CliRun run(const std::string& args, bool merge_stderr = true, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(NPUSCOPE_CLI) + " " + args +
                          (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Calls `take` with the first row of `sql` over the trace file `db`; false when there is none.
template <typename Take>
bool sqlFirstRow(const std::string& db, const std::string& sql, Take&& take) {
  sqlite3* d = nullptr;
  sqlite3_open_v2(db.c_str(), &d, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  const bool row = sqlite3_prepare_v2(d, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
  if (row) take(st);
  sqlite3_finalize(st);
  sqlite3_close(d);
  return row;
}

// The first column of the first row of `sql` over the trace file `db` (-1: no row).
inline int64_t sqlInt(const std::string& db, const std::string& sql) {
  int64_t v = -1;
  sqlFirstRow(db, sql, [&](sqlite3_stmt* st) { v = sqlite3_column_int64(st, 0); });
  return v;
}

// The same as text ("": no row or NULL).
inline std::string sqlText(const std::string& db, const std::string& sql) {
  std::string v;
  sqlFirstRow(db, sql, [&](sqlite3_stmt* st) {
    if (const unsigned char* t = sqlite3_column_text(st, 0)) v = reinterpret_cast<const char*>(t);
  });
  return v;
}
