#include "npuscope/store/database.h"
#include "npuscope/store/version.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <cstdio>
#include <cstring>
#include <vector>

namespace npuscope {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Generated at configure time from store/schema/*.sql.
#include "npuscope_migrations.inc"
// kSchemaScript: the schema those migrations build, as one script (generated at build time by
// store/tools/schema_script.cpp).
#include "npuscope_schema_script.inc"

bool fileSize(const std::string& path, long long* size) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  *size = static_cast<long long>(st.st_size);
  return true;
}

std::string sqliteError(sqlite3* db) { return db ? sqlite3_errmsg(db) : "out of memory"; }

// How long a statement waits for another connection's lock before it fails.
constexpr int kBusyTimeoutMs = 5000;

}  // namespace

StatusOr<int64_t> queryInt(sqlite3* db, const std::string& sql) {
  ASSIGN_OR_RETURN(ScopedStmt st, prepare(db, sql));
  const int rc = sqlite3_step(st.get());
  if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(st.get(), 0));
  if (rc == SQLITE_DONE) return int64_t{0};
  return ioError(sqliteError(db));
}

int currentSchemaVersion() { return kMigrations[sizeof(kMigrations) / sizeof(kMigrations[0]) - 1].version; }

int traceSchemaVersion() { return currentSchemaVersion(); }
const char* npuscopeVersion() { return NPUSCOPE_VERSION; }

Status execSql(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqliteError(db);
    sqlite3_free(err);
    return ioError(msg);
  }
  return Status::ok();
}

StatusOr<ScopedStmt> prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &st, nullptr) != SQLITE_OK) {
    return ioError(sqliteError(db) + " (in: " + sql.substr(0, 60) + ")");
  }
  return ScopedStmt(st);
}

namespace {
// Why `path` cannot be written, in a person's words ("" when nothing tells).
std::string whyNotWritable(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists) {
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) != 0) {
      return dir + (errno == ENOENT || errno == ENOTDIR ? ": no such folder" : std::string(": ") + std::strerror(errno));
    }
    if (!S_ISDIR(dst.st_mode)) return dir + ": not a folder";
  }
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0) {
    return "the filesystem holding " + dir + " is mounted read-only";
  }
  if (::access(exists ? path.c_str() : dir.c_str(), W_OK) != 0) {
    return std::string("no write permission on ") + (exists ? path : dir) + " (" + std::strerror(errno) + ")";
  }
  return "";
}

Status newerFileError(const std::string& path, int64_t version) {
  return failedPrecondition(path + ": written by a newer npuscope (schema version " + std::to_string(version) +
                            "; this build reads up to " + std::to_string(currentSchemaVersion()) + ")");
}

}  // namespace

namespace {

// Anything that is not SQLite is refused before SQLite touches it; `size`: the file's (0: new).
Status checkSqliteHeader(const std::string& path, bool exists, long long size, bool read_only) {
  if (exists && size > 0) {
    char header[16] = {};
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return ioError(path + ": cannot read (" + std::strerror(errno) + ")");
    const size_t got = std::fread(header, 1, sizeof(header), f);
    std::fclose(f);
    if (got < sizeof(header) || std::memcmp(header, "SQLite format 3", 16) != 0) {
      return invalidArgument(path + ": not an npuscope trace file (expected an SQLite database)");
    }
  } else if (read_only) {
    return invalidArgument(path + ": empty file, not an npuscope trace file");
  }
  return Status::ok();
}

// The connection, with the reason in a person's words when the file cannot be written.
StatusOr<ScopedDb> openConnection(const std::string& path, bool read_only, const char* vfs) {
  sqlite3* raw = nullptr;
  const int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, vfs);
  ScopedDb db(raw);
  if (rc != SQLITE_OK) {
    const std::string why = read_only ? "" : whyNotWritable(path);
    return ioError(path + ": cannot open" + (why.empty() ? "" : " for writing") + ": " +
                   (why.empty() ? sqliteError(raw) : why));
  }
  if (!read_only && sqlite3_db_readonly(db.get(), "main") == 1) {  // SQLite fell back to reading
    const std::string why = whyNotWritable(path);
    return ioError(path + ": cannot open for writing: " + (why.empty() ? "the file is read-only" : why));
  }
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  return db;
}

// The file's schema version and table count, read in one transaction (a file another process
// is creating is seen before or after); a locked or corrupt file is refused.
Status readVersion(sqlite3* db, const std::string& path, int64_t* version, int64_t* tables) {
  const bool in_transaction = execSql(db, "BEGIN").isOk();
  auto v = queryInt(db, "PRAGMA user_version");
  auto t = queryInt(db, "SELECT count(*) FROM sqlite_master");
  if (in_transaction) (void)execSql(db, "COMMIT");
  if (!v.isOk() || !t.isOk()) {
    const Status& s = v.isOk() ? t.status() : v.status();
    const int code = sqlite3_errcode(db) & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
      return ioError(path + ": busy: another process held it locked for " + std::to_string(kBusyTimeoutMs / 1000) +
                     " s (" + s.message() + ")");
    }
    return invalidArgument(path + ": corrupt database: " + s.message());
  }
  *version = *v;
  *tables = *t;
  return Status::ok();
}

// A truncated file: fewer bytes than its pages (only checkable when no WAL holds pages). The
// pages are counted before the WAL and the file's size are looked at: another process growing
// the file meanwhile does so from its WAL, which it removes only once the file has every page.
Status checkNotTruncated(sqlite3* db, const std::string& path) {
  auto pages = queryInt(db, "PRAGMA page_count");
  auto page_size = queryInt(db, "PRAGMA page_size");
  long long wal_size = 0, now_size = 0;
  const bool no_wal = !fileSize(path + "-wal", &wal_size) || wal_size == 0;
  if (pages.isOk() && page_size.isOk() && no_wal && fileSize(path, &now_size) && *pages * *page_size > now_size) {
    return invalidArgument(path + ": corrupt database: truncated (" + std::to_string(now_size) + " of " +
                           std::to_string(*pages * *page_size) + " bytes)");
  }
  return Status::ok();
}

constexpr int64_t kOldestReadableSchema = 8;

// Whether a file of this schema version can be opened so: the npuscope schema, not newer than
// this build, and (for reading) current or a version whose later migrations only added.
Status checkVersion(const std::string& path, int64_t version, int64_t tables, bool read_only) {
  if (version > currentSchemaVersion()) return newerFileError(path, version);
  if (version == 0 && tables > 0) {
    return invalidArgument(path + ": not an npuscope trace file (an SQLite database without npuscope's schema)");
  }
  if (!read_only) return Status::ok();
  if (version == 0) return invalidArgument(path + ": not an npuscope trace file (no npuscope schema)");
  // Schema 9 only added (tensor_dumps.arg, dump_entries): a reader reads a file of 8 as it is.
  if (version < kOldestReadableSchema) {
    return failedPrecondition(path + ": schema version " + std::to_string(version) +
                              " needs migrating; open it once for writing (e.g. with npuscope report)");
  }
  return Status::ok();
}

// The writer's journal: WAL. Turning it on needs the file to itself for a moment, and fails at
// once (without waiting for the busy timeout) while another process opens it too: retried for as
// long as the timeout. New files first get 16 KiB pages: the writer takes ~15 % more op rows per
// second than with 4 KiB (fewer B-tree pages and WAL frames per row; 64 KiB was slower again),
// measured with bench_profiler's writer_rows_per_s.
Status enableWal(sqlite3* db, const std::string& path, bool new_file) {
  if (new_file) RETURN_IF_ERROR(execSql(db, "PRAGMA page_size=16384"));
  const auto wal_start = std::chrono::steady_clock::now();
  for (;;) {
    const Status s = execSql(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    if (s.isOk()) return s;
    const int code = sqlite3_errcode(db) & 0xff;
    if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() - wal_start >= std::chrono::milliseconds(kBusyTimeoutMs)) {
      return ioError(path + ": cannot open for writing: " + s.message());
    }
    sqlite3_sleep(2);
  }
}

// Every pending migration in one transaction: the file is at its old version or at the current
// one, never between. A new file gets the current schema as one script instead (the migrations'
// ALTER TABLEs each reload the whole schema: creating a file took twice as long).
Status migrate(sqlite3* db, const std::string& path, int64_t version) {
  Status s = execSql(db, "BEGIN IMMEDIATE");
  // Another process (a rank of the same job) may have created or migrated the file meanwhile:
  // the version that counts is the one read inside the transaction.
  if (s.isOk()) {
    auto now = queryInt(db, "PRAGMA user_version");
    if (now.isOk()) version = *now;
    else s = now.status();
  }
  if (s.isOk() && version >= currentSchemaVersion()) {
    (void)execSql(db, "ROLLBACK");
    if (version == currentSchemaVersion()) return Status::ok();
    return newerFileError(path, version);
  }
  int failed_migration = 0;  // the migration whose SQL failed; 0: none did (the lock, the commit)
  if (s.isOk() && version == 0) {
    s = execSql(db, kSchemaScript);
  } else {
    for (const Migration& m : kMigrations) {
      if (!s.isOk()) break;
      if (m.version <= version) continue;
      s = execSql(db, m.sql);
      if (!s.isOk()) failed_migration = m.version;
    }
  }
  if (s.isOk()) s = execSql(db, "PRAGMA user_version=" + std::to_string(currentSchemaVersion()));
  if (s.isOk()) s = execSql(db, "COMMIT");
  if (s.isOk()) return s;
  (void)execSql(db, "ROLLBACK");
  const std::string current = std::to_string(currentSchemaVersion());
  if (version == 0) return ioError(path + ": creating its tables (schema version " + current + ") failed: " + s.message());
  return ioError(path + ": migrating from schema version " + std::to_string(version) + " to " + current + " failed" +
                 (failed_migration > 0 ? " at version " + std::to_string(failed_migration) : std::string()) +
                 " (the file stays at version " + std::to_string(version) + "): " + s.message());
}

}  // namespace

StatusOr<ScopedDb> openTraceDatabase(const std::string& path, OpenMode mode, const char* vfs) {
  const bool read_only = mode == OpenMode::kReadOnly;
  long long size = 0;
  const bool exists = fileSize(path, &size);
  if (read_only && !exists) return notFound(path + ": no such file");
  RETURN_IF_ERROR(checkSqliteHeader(path, exists, size, read_only));
  ASSIGN_OR_RETURN(ScopedDb db, openConnection(path, read_only, vfs));
  int64_t version = 0, tables = 0;
  RETURN_IF_ERROR(readVersion(db.get(), path, &version, &tables));
  if (exists && size > 0) RETURN_IF_ERROR(checkNotTruncated(db.get(), path));
  RETURN_IF_ERROR(checkVersion(path, version, tables, read_only));
  if (read_only) return db;
  RETURN_IF_ERROR(enableWal(db.get(), path, tables == 0));
  if (version == currentSchemaVersion()) return db;
  RETURN_IF_ERROR(migrate(db.get(), path, version));
  return db;
}

}  // namespace npuscope
