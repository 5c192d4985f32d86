// A new trace file turned back into an older schema version, for the tests of migrations: the
// SQL that undoes each migration of store/schema/, written once (a new migration adds its undo).
#pragma once

#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "npuscope/store/database.h"

namespace npuscope::test {

// The statements that turn a file of the current schema into one of schema `version`, its
// user_version included; the rows it holds stay.
inline std::string downgradeSql(int version) {
  static const char* const kUndo[] = {
      // 2: op_blocks replaced two op_events indexes
      "DROP TABLE op_blocks; CREATE INDEX op_events_run_thread_start ON op_events(run_id, thread_id, start_ns);"
      "CREATE INDEX op_events_run_step ON op_events(run_id, step);",
      "ALTER TABLE tensor_dumps DROP COLUMN data_ref;",                      // 3
      "ALTER TABLE runs DROP COLUMN pid; ALTER TABLE runs DROP COLUMN host;",  // 4
      "DROP TABLE device_tasks; ALTER TABLE runs DROP COLUMN source; ALTER TABLE runs DROP COLUMN source_path;"
      "ALTER TABLE runs DROP COLUMN rank; ALTER TABLE runs DROP COLUMN world_size;",  // 5
      "ALTER TABLE overflow_events DROP COLUMN op_id;",                              // 6
      "ALTER TABLE op_events DROP COLUMN host_sync;",                                // 7
      "DROP TABLE collectives; ALTER TABLE runs DROP COLUMN job;",                   // 8
      "DROP TABLE dump_entries; ALTER TABLE tensor_dumps DROP COLUMN arg;",          // 9
      "DROP TABLE memory_blocks; DROP TABLE memory_devices; DROP TABLE memory_ooms;",  // 10
      "DROP TABLE memory_components;",                                               // 11
      "ALTER TABLE dump_entries DROP COLUMN op_id;",                                 // 12
      "DROP TABLE op_totals;",                                                       // 13
  };
  const int newest = static_cast<int>(std::size(kUndo)) + 1;
  EXPECT_EQ(newest, currentSchemaVersion()) << "a new migration: add its undo to tests/store/schema_downgrade.h";
  std::string sql;
  for (int v = newest; v > version; --v) sql += kUndo[v - 2];
  return sql + "PRAGMA user_version = " + std::to_string(version) + ";";
}

}  // namespace npuscope::test
