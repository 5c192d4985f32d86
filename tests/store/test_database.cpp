// Opening trace files: migrations, and a clear error for every kind of bad file.
#include <sqlite3.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <atomic>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "npuscope/store/database.h"
#include "npuscope/store/trace_reader.h"
#include "schema_downgrade.h"
#include "support/scratch_db.h"

namespace npuscope {
namespace {

using testing_support::tempPath;
using testing_support::scalar;

TEST(Database, NewFileGetsTheCurrentSchema) {
  const std::string p = tempPath("new.db");
  auto db = openTraceDatabase(p, OpenMode::kReadWrite);
  ASSERT_TRUE(db.isOk()) << db.status().message();
  EXPECT_EQ(scalar(db->get(), "PRAGMA user_version"), currentSchemaVersion());
  for (const char* t : {"runs", "op_events", "strings", "steps", "overflow_events", "tensor_dumps", "memory"}) {
    EXPECT_EQ(scalar(db->get(), std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") + t + "'"), 1)
        << t;
  }
  auto mode = prepare(db->get(), "PRAGMA journal_mode");
  ASSERT_TRUE(mode.isOk());
  ASSERT_EQ(sqlite3_step(mode->get()), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(mode->get(), 0)), "wal");
}

TEST(Database, OpsViewSpellsOutInternedNames) {
  const std::string p = tempPath("view.db");
  auto db = openTraceDatabase(p, OpenMode::kReadWrite);
  ASSERT_TRUE(db.isOk());
  ASSERT_TRUE(execSql(db->get(),
                      "INSERT INTO runs(id, started_ns, wall_start_ns) VALUES (1, 0, 0);"
                      "INSERT INTO strings(id, value) VALUES (1, 'aten::mm'), (2, '[[2, 3], [3, 4]]'), (3, 'float, float');"
                      "INSERT INTO op_events(run_id, step, name_id, start_ns, dur_ns, thread_id, depth, shapes_id, dtypes_id, device)"
                      " VALUES (1, 0, 1, 100, 50, 7, 0, 2, 3, 2);")
                  .isOk());
  auto st = prepare(db->get(), "SELECT name, input_shapes, input_dtypes, device FROM ops");
  ASSERT_TRUE(st.isOk());
  ASSERT_EQ(sqlite3_step(st->get()), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 0)), "aten::mm");
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 1)), "[[2, 3], [3, 4]]");
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 3)), "npu:2");
}

TEST(Database, ReopeningKeepsDataAndReadOnlyWorks) {
  const std::string p = tempPath("reopen.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(), "INSERT INTO runs(started_ns, wall_start_ns) VALUES (5, 6)").isOk());
  }
  auto ro = openTraceDatabase(p, OpenMode::kReadOnly);
  ASSERT_TRUE(ro.isOk()) << ro.status().message();
  EXPECT_EQ(scalar(ro->get(), "SELECT started_ns FROM runs"), 5);
  EXPECT_FALSE(execSql(ro->get(), "INSERT INTO runs(started_ns, wall_start_ns) VALUES (1, 1)").isOk());
}

TEST(Database, MissingAndEmptyFiles) {
  auto r = openTraceDatabase(tempPath("missing.db"), OpenMode::kReadOnly);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("missing.db: no such file"), std::string::npos);
  const std::string empty = tempPath("empty.db");
  std::ofstream(empty).close();
  r = openTraceDatabase(empty, OpenMode::kReadOnly);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("empty file, not an npuscope trace file"), std::string::npos);
}

TEST(Database, RandomBytesAreRefusedAndLeftUntouched) {
  const std::string p = tempPath("random.db");
  std::string bytes(8192, '\0');
  std::mt19937 rng(1);
  for (auto& c : bytes) c = static_cast<char>(rng());
  std::ofstream(p, std::ios::binary) << bytes;
  for (OpenMode m : {OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    auto r = openTraceDatabase(p, m);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("random.db: not an npuscope trace file (expected an SQLite database)"),
              std::string::npos)
        << r.status().message();
  }
  std::ifstream in(p, std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(after, bytes);
}

TEST(Database, TruncatedDatabaseIsCorrupt) {
  const std::string p = tempPath("truncated.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(), "PRAGMA wal_checkpoint(TRUNCATE)").isOk());
  }
  std::remove((p + "-wal").c_str());
  std::ifstream in(p, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(all.size(), 4096u);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << all.substr(0, all.size() / 2);
  auto r = openTraceDatabase(p, OpenMode::kReadOnly);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("corrupt database"), std::string::npos) << r.status().message();
}

TEST(Database, NewerSchemaIsRefused) {
  const std::string p = tempPath("future.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(), "PRAGMA user_version=" + std::to_string(currentSchemaVersion() + 1)).isOk());
  }
  for (OpenMode m : {OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    auto r = openTraceDatabase(p, m);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("written by a newer npuscope (schema version " +
                                        std::to_string(currentSchemaVersion() + 1)),
              std::string::npos)
        << r.status().message();
  }
}

// Schema 3 adds tensor_dumps.data_ref (payloads shared within a step). The dumps of a schema-2
// file keep their own data and read the same after migrating.
TEST(Database, SchemaTwoDumpsReadTheSameAfterMigrating) {
  const std::string p = tempPath("v2.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(),
                        test::downgradeSql(2) +
                            "INSERT INTO runs(started_ns, wall_start_ns, status) VALUES (0, 0, 'completed');"
                            "INSERT INTO tensor_dumps(run_id, step, op_name, op_type, io, idx, dtype, shape, data)"
                            " VALUES (1, 0, 'relu.0.forward', 'aten::relu', 'output', 0, 'uint8', '[3]', x'070809');")
                    .isOk());
  }
  {
    auto ro = TraceReader::open(p);
    ASSERT_FALSE(ro.isOk());
    EXPECT_NE(ro.status().message().find("schema version 2 needs migrating"), std::string::npos)
        << ro.status().message();
  }
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk()) << db.status().message();
    EXPECT_EQ(scalar(db->get(), "PRAGMA user_version"), currentSchemaVersion());
  }
  auto r = TraceReader::open(p);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  auto rows = (*r)->tensorDumps(1);
  ASSERT_TRUE(rows.isOk());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].data_bytes, 3);
  EXPECT_EQ((*rows)[0].data_ref, -1);
  auto data = (*r)->tensorDumpData((*rows)[0].id);
  ASSERT_TRUE(data.isOk());
  EXPECT_EQ(data->bytes, (std::vector<uint8_t>{7, 8, 9}));
}

// Every row of sqlite_master (type, name, table, CREATE text unless !with_sql) and every column
// of every table.
std::vector<std::string> schemaOf(sqlite3* db, bool with_sql = true) {
  std::vector<std::string> out;
  auto st = prepare(db, std::string("SELECT type, name, tbl_name, ") + (with_sql ? "coalesce(sql, '')" : "''") +
                            " FROM sqlite_master ORDER BY type, name");
  EXPECT_TRUE(st.isOk());
  if (!st.isOk()) return out;
  std::vector<std::string> tables;
  while (sqlite3_step(st->get()) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < 4; ++c) row += std::string(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), c))) + "|";
    out.push_back(row);
    if (row.compare(0, 6, "table|") == 0) tables.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 1)));
  }
  for (const std::string& t : tables) {
    auto cols = prepare(db, "SELECT name, type, \"notnull\", coalesce(dflt_value, 'NULL'), pk FROM pragma_table_xinfo('" + t + "')");
    EXPECT_TRUE(cols.isOk());
    if (!cols.isOk()) continue;
    while (sqlite3_step(cols->get()) == SQLITE_ROW) {
      std::string row = t + ".";
      for (int c = 0; c < 5; ++c) row += std::string(reinterpret_cast<const char*>(sqlite3_column_text(cols->get(), c))) + "|";
      out.push_back(row);
    }
  }
  return out;
}

// A new file is created from one script (the current schema), an old file by running its pending
// migrations: both must end with the same schema. The old file starts from store/schema's first
// migration as shipped.
TEST(Database, ANewFileHasTheSchemaTheMigrationsBuild) {
  std::ifstream in(std::string(NPUSCOPE_SCHEMA_DIR) + "/001_initial.sql");
  ASSERT_TRUE(in) << NPUSCOPE_SCHEMA_DIR;
  const std::string v1((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string old_path = tempPath("v1.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(old_path.c_str(), &raw), SQLITE_OK);
    ScopedDb db(raw);
    ASSERT_TRUE(execSql(db.get(), v1 + ";PRAGMA user_version=1;").isOk());
  }
  auto migrated = openTraceDatabase(old_path, OpenMode::kReadWrite);
  ASSERT_TRUE(migrated.isOk()) << migrated.status().message();
  auto created = openTraceDatabase(tempPath("created.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  EXPECT_EQ(scalar(migrated->get(), "PRAGMA user_version"), currentSchemaVersion());
  EXPECT_EQ(scalar(created->get(), "PRAGMA user_version"), currentSchemaVersion());
  const std::vector<std::string> want = schemaOf(migrated->get()), got = schemaOf(created->get());
  EXPECT_GT(want.size(), 100u);  // tables, indexes, the view and their columns
  EXPECT_EQ(got, want);
  migrated->reset();
  // The other tests' old files (schema_downgrade.h) are what the migrations started from: a new
  // file turned back into schema 1 has the tables, columns and indexes of 001_initial.sql.
  const std::string shipped = tempPath("shipped_v1.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(shipped.c_str(), &raw), SQLITE_OK);
    ScopedDb db(raw);
    ASSERT_TRUE(execSql(db.get(), v1 + ";PRAGMA user_version=1;").isOk());
    ASSERT_TRUE(execSql(created->get(), test::downgradeSql(1)).isOk());
    EXPECT_EQ(schemaOf(created->get(), false), schemaOf(db.get(), false));
  }
}

// A file whose migration fails part-way stays at its old version, whole: no migration before the
// failing one is left applied. (Here the schema-4 file already has the column schema 6 adds.)
TEST(Database, AFailedMigrationLeavesTheFileAtItsOldVersion) {
  const std::string p = tempPath("v4.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(execSql(db->get(), test::downgradeSql(4) + "ALTER TABLE overflow_events ADD COLUMN op_id INTEGER;").isOk());
  }
  auto r = openTraceDatabase(p, OpenMode::kReadWrite);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find(p + ": migrating from schema version 4 to " + std::to_string(currentSchemaVersion()) +
                                        " failed at version 6 (the file stays at version 4): duplicate column name: op_id"),
            std::string::npos)
      << r.status().message();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(p.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  ScopedDb db(raw);
  EXPECT_EQ(scalar(db.get(), "PRAGMA user_version"), 4);
  EXPECT_EQ(scalar(db.get(), "SELECT count(*) FROM sqlite_master WHERE name = 'device_tasks'"), 0);
  EXPECT_EQ(scalar(db.get(), "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'source'"), 0);
}

// The ranks of a job may open one new file at the same moment: each gets it, created once.
TEST(Database, TwoWritersCreatingOneFileAtOnceBothOpenIt) {
  for (int round = 0; round < 40; ++round) {
    const std::string p = tempPath("together.db");
    Status results[2];
    std::atomic<int> ready{0};
    auto open = [&](int i) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      auto db = openTraceDatabase(p, OpenMode::kReadWrite);
      results[i] = db.isOk() ? Status::ok() : db.status();
    };
    std::thread a(open, 0), b(open, 1);
    a.join();
    b.join();
    for (const Status& s : results) ASSERT_TRUE(s.isOk()) << "round " << round << ": " << s.message();
  }
}

// A file that cannot be created because its folder is not there says so (not "no write
// permission").
TEST(Database, AFolderThatIsNotThereIsNamed) {
  const std::string file = tempPath("plain_file");
  std::ofstream(file) << "x";
  const std::string missing = testing::TempDir() + "/npuscope_db_no_such_folder";
  for (const auto& [path, why] : {std::pair<std::string, std::string>{missing + "/t.db", missing + ": no such folder"},
                                  {file + "/t.db", file + ": not a folder"}}) {
    auto r = openTraceDatabase(path, OpenMode::kReadWrite);
    ASSERT_FALSE(r.isOk()) << path;
    EXPECT_EQ(r.status().message(), path + ": cannot open for writing: " + why);
  }
}

TEST(Database, ForeignSqliteDatabaseIsRefused) {
  const std::string p = tempPath("foreign.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &raw), SQLITE_OK);
    ScopedDb db(raw);
    ASSERT_TRUE(execSql(db.get(), "CREATE TABLE photos(id INTEGER)").isOk());
  }
  auto r = openTraceDatabase(p, OpenMode::kReadWrite);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("without npuscope's schema"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace npuscope
