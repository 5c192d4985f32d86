#include "npuscope/store/sqlite_handles.h"

#include <sqlite3.h>

namespace npuscope {

void ScopedDb::reset() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void ScopedStmt::reset() {
  if (stmt_) sqlite3_finalize(stmt_);
  stmt_ = nullptr;
}

}  // namespace npuscope
