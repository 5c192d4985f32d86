// RAII owners of SQLite's C handles. Non-copyable, movable. The handles are declared, not
// defined, so that the store's headers do not bring sqlite3.h to their users: only the store (and
// the importer's reader of torch_npu's databases) includes it.
#pragma once

struct sqlite3;
struct sqlite3_stmt;

#include <string>
#include <utility>

namespace npuscope {

class ScopedDb {
 public:
  ScopedDb() = default;
  explicit ScopedDb(sqlite3* db) : db_(db) {}
  ~ScopedDb() { reset(); }
  ScopedDb(ScopedDb&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
  ScopedDb& operator=(ScopedDb&& o) noexcept {
    if (this != &o) {
      reset();
      db_ = std::exchange(o.db_, nullptr);
    }
    return *this;
  }
  ScopedDb(const ScopedDb&) = delete;
  ScopedDb& operator=(const ScopedDb&) = delete;

  sqlite3* get() const { return db_; }
  explicit operator bool() const { return db_ != nullptr; }
  void reset();

 private:
  sqlite3* db_ = nullptr;
};

class ScopedStmt {
 public:
  ScopedStmt() = default;
  explicit ScopedStmt(sqlite3_stmt* s) : stmt_(s) {}
  ~ScopedStmt() { reset(); }
  ScopedStmt(ScopedStmt&& o) noexcept : stmt_(std::exchange(o.stmt_, nullptr)) {}
  ScopedStmt& operator=(ScopedStmt&& o) noexcept {
    if (this != &o) {
      reset();
      stmt_ = std::exchange(o.stmt_, nullptr);
    }
    return *this;
  }
  ScopedStmt(const ScopedStmt&) = delete;
  ScopedStmt& operator=(const ScopedStmt&) = delete;

  sqlite3_stmt* get() const { return stmt_; }
  void reset();

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace npuscope
