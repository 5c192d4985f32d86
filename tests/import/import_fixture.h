// The importer tests' fixture: a scratch folder per test, files written into it, and one-value
// SQL queries on the trace files an import writes.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "npuscope/import/import.h"

namespace npuscope::import::test {

inline const std::string kTraces = NPUSCOPE_TRACES;
inline const std::string kAscend = kTraces + "/ascend_alexnet_rank0_ascend_pt";
inline const std::string kKineto = kTraces + "/kineto_before_fix_trace.json";

class ImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/npuscope_import_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path(name);
    const size_t slash = p.find_last_of('/');
    (void)std::system(("mkdir -p '" + p.substr(0, slash) + "'").c_str());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string writeGz(const std::string& name, const std::string& text) const {
    const std::string p = path(name);
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return p;
  }
  static bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
  }
  // One integer from SQL on the file (read-only).
  int64_t q(const std::string& db, const std::string& sql) const {
    sqlite3* h = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(h);
    int64_t v = INT64_MIN;
    if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
  }
  std::string qs(const std::string& db, const std::string& sql) const {
    sqlite3* h = nullptr;
    sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    std::string v = "<none>";
    if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
  }
  // The import must fail naming `expect`, and leave no trace file behind.
  void expectRefused(const std::string& input, const std::string& expect) {
    const std::string db = path("refused.db");
    auto r = importPath(input, db);
    ASSERT_FALSE(r.isOk()) << input;
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line";
    EXPECT_FALSE(exists(db)) << "nothing half-written";
  }

  // Runs `sql` (any number of statements) on the SQLite file `db`, creating it when missing.
  static void exec(const std::string& db, const std::string& sql) {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
    sqlite3_free(err);
    sqlite3_close(h);
  }
  // Copies `from` to the scratch path `name` (folders made); returns that path.
  std::string copy(const std::string& from, const std::string& name) const {
    std::ifstream in(from, std::ios::binary);
    EXPECT_TRUE(in.good()) << from;
    return write(name, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }

  std::string dir_;
};

// The rows `sql` gives on `db`, each as its columns' text joined by '|'.
inline std::vector<std::string> rows(const std::string& db, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      row += (c ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    out.push_back(row);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

}  // namespace npuscope::import::test
