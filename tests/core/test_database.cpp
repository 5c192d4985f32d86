// Opening trace files: migrations, and a clear error for every kind of bad file.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "npuscope/core/database.h"
#include "npuscope/core/trace_reader.h"

namespace npuscope {
namespace {

std::string tempPath(const std::string& name) {
  std::string p = testing::TempDir() + "/npuscope_db_" + name;
  std::remove(p.c_str());
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  return p;
}

int64_t scalar(sqlite3* db, const std::string& sql) {
  auto st = prepare(db, sql);
  EXPECT_TRUE(st.isOk()) << st.status().message();
  if (!st.isOk() || sqlite3_step(st->get()) != SQLITE_ROW) return -1;
  return sqlite3_column_int64(st->get(), 0);
}

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
                        "ALTER TABLE tensor_dumps DROP COLUMN data_ref;"
                        "ALTER TABLE runs DROP COLUMN pid; ALTER TABLE runs DROP COLUMN host;"
                        "ALTER TABLE runs DROP COLUMN source; ALTER TABLE runs DROP COLUMN source_path;"
                        "ALTER TABLE runs DROP COLUMN rank; ALTER TABLE runs DROP COLUMN world_size;"
                        "DROP TABLE device_tasks; ALTER TABLE overflow_events DROP COLUMN op_id; ALTER TABLE op_events DROP COLUMN host_sync;"
                        "DROP TABLE collectives; ALTER TABLE runs DROP COLUMN job;"
                        "INSERT INTO runs(started_ns, wall_start_ns, status) VALUES (0, 0, 'completed');"
                        "INSERT INTO tensor_dumps(run_id, step, op_name, op_type, io, idx, dtype, shape, data)"
                        " VALUES (1, 0, 'relu.0.forward', 'aten::relu', 'output', 0, 'uint8', '[3]', x'070809');"
                        "PRAGMA user_version = 2;")
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
