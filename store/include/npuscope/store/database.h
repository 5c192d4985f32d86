// Opening an npuscope trace file: schema migrations on open, and clear refusals of files that
// are not SQLite, are corrupt, or come from a newer npuscope. A refused file is left untouched.
#pragma once

#include <string>

#include "npuscope/store/sqlite_handles.h"
#include "npuscope/store/status.h"

namespace npuscope {

// The schema version this build writes and reads (PRAGMA user_version).
int currentSchemaVersion();

enum class OpenMode {
  kReadWrite,  // create if missing, migrate to the current schema
  kReadOnly,   // must exist and be at a version this build knows; never written
};

// Opens `path`. Errors name the file and say what was expected. `vfs`: the SQLite VFS to open it
// on (nullptr: the default; TraceWriter passes DiskFaults' when faults are injected).
StatusOr<ScopedDb> openTraceDatabase(const std::string& path, OpenMode mode, const char* vfs = nullptr);

// Runs `sql` (one or more statements) with no results; errors carry SQLite's message.
Status execSql(sqlite3* db, const std::string& sql);
// Prepares one statement.
StatusOr<ScopedStmt> prepare(sqlite3* db, const std::string& sql);
// The first column of the first row of `sql` as an integer (0 when there is no row).
StatusOr<int64_t> queryInt(sqlite3* db, const std::string& sql);

}  // namespace npuscope
