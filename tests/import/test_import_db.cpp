// torch_npu's database export (ascend_pytorch_profiler_{rank}.db). The sample's db is generated
// from its text export by make_torch_npu_db.py (tests/import/CMakeLists.txt), so both forms hold
// the same events: the two imports must agree row by row, and with the figures Python counted
// on trace_view.json (test_import.cpp). A hand-written db pins the mapping of each table; variants
// of the sample's db check reading by column name, missing tables and every refusal.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "import_fixture.h"
#include "npuscope/import/import.h"

namespace npuscope::import {
namespace {

using namespace npuscope::import::test;

const std::string kSampleDb = NPUSCOPE_SAMPLE_DB;

#define SKIP_WITHOUT_SAMPLE_DB() \
  if (kSampleDb.empty()) GTEST_SKIP() << "no /usr/bin/python3 to generate the sample's db"

// Host ops as comparable rows. torch_npu's db names an Enqueue after its op ("Enqueue@add"),
// trace_view.json does not: compared as "Enqueue".
const std::string kOps =
    "SELECT CASE WHEN o.name GLOB 'Enqueue*' THEN 'Enqueue' ELSE o.name END, o.start_ns, o.dur_ns, o.thread_id,"
    " o.depth, coalesce(o.seq_nr, -1), o.is_backward, coalesce(o.input_shapes, ''), coalesce(o.input_dtypes, ''),"
    " coalesce(o.step, -1), coalesce((SELECT p.name FROM ops p WHERE p.id = o.parent_id), '')"
    " FROM ops o ORDER BY 2, 5, 1, 3";
// Device tasks with their launching op. A task of a *_SQE type is named by the runtime call in
// trace_view.json (MEMCPY_ASYNC) and by its type in the db, which has no such name: left out.
const std::string kTasks =
    "SELECT CASE WHEN y.value GLOB '*_SQE' THEN '' ELSE n.value END, y.value, t.device, t.stream, t.start_ns,"
    " t.dur_ns, coalesce(t.bytes, -1), coalesce(t.step, -1), coalesce(s.value, ''), coalesce(t.correlation, -1),"
    " coalesce(o.name, ''), coalesce(o.start_ns, -1), coalesce(o.thread_id, -1)"
    " FROM device_tasks t JOIN strings n ON n.id = t.name_id JOIN strings y ON y.id = t.type_id"
    " LEFT JOIN strings s ON s.id = t.shapes_id LEFT JOIN ops o ON o.id = t.op_id ORDER BY 5, 4, 1, 2";
const std::string kMemory = "SELECT ts_ns, device, allocated, reserved FROM memory ORDER BY 1, 3";

// torch_npu writes its db in WAL mode; opening it as a normal database (even read-only) makes
// -shm / -wal files in the user's folder and fails on a read-only mount. The import must leave
// the folder as it found it: the same files, byte for byte, with the same modification times.
TEST_F(ImportTest, ImportingADbExportLeavesItsFolderUntouched) {
  SKIP_WITHOUT_SAMPLE_DB();
  const std::string folder = path("export_ascend_pt/ASCEND_PROFILER_OUTPUT");
  const std::string db = folder + "/ascend_pytorch_profiler_0.db";
  ASSERT_EQ(std::system(("mkdir -p '" + folder + "' && cp '" + kSampleDb + "' '" + db + "'").c_str()), 0);
  {  // as torch_npu leaves it: journal_mode WAL, checkpointed on close (no -wal beside it)
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(h, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_close(h);
  }
  auto listing = [&] {
    std::string out;
    FILE* p = ::popen(("cd '" + path("export_ascend_pt") + "' && find . -type f -exec stat -c '%n %s %Y' {} + | sort && "
                       "find . -type f -exec md5sum {} + | sort").c_str(), "r");
    char buf[512];
    while (p && std::fgets(buf, sizeof(buf), p)) out += buf;
    if (p) ::pclose(p);
    return out;
  };
  const std::string before = listing();
  ASSERT_NE(before.find("ascend_pytorch_profiler_0.db"), std::string::npos) << before;
  ASSERT_EQ(before.find("-wal"), std::string::npos) << before;
  auto r = importPath(path("export_ascend_pt"), path("out.db"));
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).host_ops, 1885);
  EXPECT_EQ(listing(), before);
}

// The same export on a read-only mount (a bind mount remounted read-only: root only, skipped
// otherwise), where a database in WAL mode cannot even be opened normally: the import reads it.
TEST_F(ImportTest, ImportingADbExportFromAReadOnlyMount) {
  SKIP_WITHOUT_SAMPLE_DB();
  const std::string folder = path("ro_src_ascend_pt/ASCEND_PROFILER_OUTPUT");
  const std::string db = folder + "/ascend_pytorch_profiler_0.db";
  ASSERT_EQ(std::system(("mkdir -p '" + folder + "' '" + path("ro_mount") + "' && cp '" + kSampleDb + "' '" + db + "'").c_str()), 0);
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
  }
  const std::string ro = path("ro_mount");
  if (::mount(path("ro_src_ascend_pt").c_str(), ro.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    GTEST_SKIP() << "cannot bind-mount here (needs root)";
  }
  if (::mount(nullptr, ro.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    ::umount(ro.c_str());
    GTEST_SKIP() << "cannot remount read-only here";
  }
  const bool writable = static_cast<bool>(std::ofstream(ro + "/probe"));
  auto r = importPath(ro, path("ro.db"));
  ::umount(ro.c_str());
  EXPECT_FALSE(writable) << "the mount is not read-only";
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).host_ops, 1885);
}

TEST_F(ImportTest, TorchNpuDbOfTheSampleAgreesWithItsTextExport) {
  SKIP_WITHOUT_SAMPLE_DB();
  const std::string text = path("text.db"), db = path("db.db");
  auto a = importPath(kAscend, text);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  auto b = importPath(kSampleDb, db);
  ASSERT_TRUE(b.isOk()) << b.status().message();
  ASSERT_EQ(b->runs.size(), 1u);
  const RunSummary& run = b->runs[0];
  // The figures Python counted on trace_view.json (TorchNpuSampleCountsMatchTheSource).
  EXPECT_EQ(run.host_ops, 1885);
  EXPECT_EQ(run.device_tasks, 539);
  EXPECT_EQ(run.linked_tasks, 537);
  EXPECT_EQ(run.steps, 1);
  EXPECT_EQ(run.memory_samples, 381);
  EXPECT_EQ(run.rank, 0);
  EXPECT_EQ(q(db, "SELECT step FROM steps"), 50);
  EXPECT_EQ(qs(db, "SELECT source FROM runs"), "torch_npu");
  EXPECT_EQ(qs(db, "SELECT source_path FROM runs"), kSampleDb);
  EXPECT_EQ(qs(db, "SELECT device FROM runs"), "npu:0");
  bool noted = false;
  for (const std::string& n : run.notes) noted |= n == "1282 Python stack frames (python_function) skipped";
  EXPECT_TRUE(noted) << "PYTORCH_API rows of type 50003 are the Python frames";
  // Row by row the same ops, tasks (type, shapes, bytes, launching op) and memory samples.
  EXPECT_EQ(rows(text, kOps), rows(db, kOps));
  EXPECT_EQ(rows(text, kTasks), rows(db, kTasks));
  EXPECT_EQ(rows(text, kMemory), rows(db, kMemory));
  // operator_memory.csv and OP_MEMORY, npu_module_mem.csv and NPU_MODULE_MEM: the same blocks
  // and component samples.
  const std::string blocks = "SELECT device, alloc_seq, coalesce(free_seq, -1), alloc_ns, coalesce(free_ns, -1), size,"
                             " owner FROM memory_blocks ORDER BY 1, 2";
  const std::string components = "SELECT device, component, ts_ns, reserved FROM memory_components ORDER BY 1, 2, 3";
  EXPECT_EQ(rows(text, blocks), rows(db, blocks));
  EXPECT_EQ(rows(db, blocks).size(), 184u);
  EXPECT_EQ(rows(text, components), rows(db, components));
  EXPECT_EQ(run.memory_blocks, 184);
  EXPECT_GT(run.memory_components, 0);
  EXPECT_EQ(rows(text, "SELECT step, start_ns, dur_ns FROM steps"), rows(db, "SELECT step, start_ns, dur_ns FROM steps"));
  EXPECT_EQ(rows(db, kOps).size(), 1885u);
  EXPECT_EQ(rows(db, kTasks).size(), 539u);
  // The collective's group is the db's (communication.json names it 17522688603477080586);
  // trace_view.json has only its lane.
  EXPECT_EQ(qs(db, "SELECT comm_group FROM device_tasks WHERE stream = 1000 LIMIT 1"), "17522688603477080586");
  EXPECT_EQ(qs(text, "SELECT comm_group FROM device_tasks WHERE stream = 1000 LIMIT 1"), "Group 0 Communication");
  EXPECT_NE(qs(db, "SELECT config_json FROM runs").find("\"META_DATA\""), std::string::npos);
}

// The hand-written db: every table the mapping reads, values chosen to be told apart.
TEST_F(ImportTest, TorchNpuDbMappingOfEachTable) {
  const std::string f = path("ascend_pytorch_profiler_9.db");
  exec(f, R"(
    CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
    INSERT INTO STRING_IDS VALUES (268435456, 'aten::add'), (268435457, '4,4;' || char(13, 10) || '4,4'),
      (268435458, 'float;' || char(13, 10) || 'float'), (268435459, 'Enqueue@add'), (268435460, 'Dequeue@add'),
      (268435461, 'aten::relu'), (1, 'launch'), (2, 'Add_kernel'), (3, 'AI_CORE'), (4, 'Add'), (5, 'AI_VECTOR_CORE'),
      (6, '4,4;4,4'), (7, 'EVENT_WAIT_SQE'), (8, 'hcom_allReduce__1_0_1'), (9, 'grp'), (10, 'PTA'), (11, 'GE'),
      (12, 'aclrtStreamWaitEvent');
    CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER,
      sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER,
      type INTEGER);
    -- pid 77, main thread 5: aten::add [1000, 2000] holds Enqueue [1100, 1200]; thread 6: Dequeue
    -- [1300, 1600] holds the node launch. aten::relu [2100, 2200] holds the ACL call on thread 5.
    INSERT INTO PYTORCH_API VALUES ('1000', '2000', 77 * 4294967296 + 5, 0, 268435456, 12, 0, 268435458, 268435457,
      NULL, 50001), ('1100', '1200', 77 * 4294967296 + 5, 1, 268435459, NULL, NULL, NULL, NULL, NULL, 50002),
      ('1300', '1600', 77 * 4294967296 + 6, 2, 268435460, NULL, NULL, NULL, NULL, NULL, 50002),
      ('2100', '2200', 77 * 4294967296 + 5, NULL, 268435461, -1, 0, NULL, NULL, NULL, 50001);
    CREATE TABLE CONNECTION_IDS (id INTEGER, connectionId INTEGER);
    INSERT INTO CONNECTION_IDS VALUES (0, 40), (1, 1342177285), (2, 1342177285);
    CREATE TABLE CANN_API (startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,
      connectionId INTEGER PRIMARY KEY, name INTEGER);
    INSERT INTO CANN_API VALUES (1400, 1500, 10000, 77 * 4294967296 + 6, 40, 1),
      (2120, 2150, 20000, 77 * 4294967296 + 5, 41, 12);
    CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER,
      globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);
    INSERT INTO TASK VALUES (1700, 1750, 2, 40, 100, 77, 3, 0, 7, 1, 0), (2300, 2310, 2, 41, 101, 77, 7, 0, 8, 2, 0);
    CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER,
      mixBlockDim INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER,
      inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER);
    INSERT INTO COMPUTE_TASK_INFO VALUES (2, 100, 8, 0, 5, 4, NULL, NULL, 6, NULL, NULL, NULL, NULL);
    CREATE TABLE ENUM_HCCL_DATA_TYPE (id INTEGER PRIMARY KEY, name TEXT);
    INSERT INTO ENUM_HCCL_DATA_TYPE VALUES (3, 'FP16'), (4, 'FP32');
    CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,
      groupName INTEGER, opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER,
      count NUMERIC, opType INTEGER);
    INSERT INTO COMMUNICATION_OP VALUES (8, 2400, 2900, NULL, 9, 0, NULL, NULL, 3, NULL, 100, NULL);
    CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
    INSERT INTO STEP_TIME VALUES (3, 900, 3000);
    CREATE TABLE MEMORY_RECORD (component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER,
      totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
    INSERT INTO MEMORY_RECORD VALUES (10, 1050, 4096, 8192, 4096, NULL, 2), (11, 1060, 1, 1, 1, NULL, 2);
    CREATE TABLE META_DATA (name TEXT, value TEXT);
    INSERT INTO META_DATA VALUES ('SCHEMA_VERSION', '1.1.1'), ('distributed_args', '{"world_size": 8, "rank": 4}');
    CREATE TABLE NPU_INFO (id INTEGER, name TEXT);
    INSERT INTO NPU_INFO VALUES (2, 'Ascend910B2');
    CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
    INSERT INTO RANK_DEVICE_MAP VALUES (4, 2);
  )");
  ASSERT_EQ(*detectFormat(f), "torch_npu");
  const std::string db = path("out.db");
  auto r = importPath(f, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const RunSummary& run = r->runs.at(0);
  EXPECT_EQ(run.host_ops, 6);  // 4 PYTORCH_API + 2 CANN_API rows
  EXPECT_EQ(run.device_tasks, 3);
  EXPECT_EQ(run.linked_tasks, 2);  // the collective has no connection id
  EXPECT_EQ(run.rank, 4);          // RANK_DEVICE_MAP, not the 9 of the file name
  EXPECT_EQ(q(db, "SELECT world_size FROM runs"), 8);
  EXPECT_EQ(qs(db, "SELECT device FROM runs"), "npu:2");
  // PYTORCH_API: globalTid's low 32 bits are the thread; shapes and dtypes in npuscope's format.
  EXPECT_EQ(q(db, "SELECT thread_id FROM ops WHERE name='aten::add'"), 5);
  EXPECT_EQ(q(db, "SELECT seq_nr FROM ops WHERE name='aten::add'"), 12);
  EXPECT_EQ(q(db, "SELECT seq_nr FROM ops WHERE name='aten::relu'"), INT64_MIN) << "-1: none (NULL)";
  EXPECT_EQ(qs(db, "SELECT input_shapes FROM ops WHERE name='aten::add'"), "[[4, 4], [4, 4]]");
  EXPECT_EQ(qs(db, "SELECT input_dtypes FROM ops WHERE name='aten::add'"), "float, float");
  EXPECT_EQ(q(db, "SELECT dur_ns FROM ops WHERE name='aten::add'"), 1000);
  // CANN_API: named level@name, nested in the thread's ops.
  EXPECT_EQ(qs(db, "SELECT p.name FROM ops o JOIN ops p ON p.id=o.parent_id WHERE o.name='Node@launch'"), "Dequeue@add");
  EXPECT_EQ(qs(db, "SELECT p.name FROM ops o JOIN ops p ON p.id=o.parent_id WHERE o.name='AscendCL@aclrtStreamWaitEvent'"),
            "aten::relu");
  // TASK + COMPUTE_TASK_INFO: the launch in the Dequeue belongs to the op around its Enqueue.
  EXPECT_EQ(qs(db, "SELECT o.name FROM device_tasks t JOIN ops o ON o.id=t.op_id WHERE t.correlation=40"), "aten::add");
  EXPECT_EQ(qs(db, "SELECT s.value FROM device_tasks t JOIN strings s ON s.id=t.name_id WHERE t.correlation=40"),
            "Add_kernel");
  EXPECT_EQ(qs(db, "SELECT s.value FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE t.correlation=40"), "Add");
  EXPECT_EQ(qs(db, "SELECT s.value FROM device_tasks t JOIN strings s ON s.id=t.shapes_id WHERE t.correlation=40"),
            "[[4, 4], [4, 4]]");
  EXPECT_EQ(q(db, "SELECT device * 100 + stream FROM device_tasks WHERE correlation=40"), 207);
  EXPECT_EQ(q(db, "SELECT start_ns * 1000 + dur_ns FROM device_tasks WHERE correlation=40"), 1700 * 1000 + 50);
  // A task without COMPUTE_TASK_INFO: named and typed by TASK.taskType.
  EXPECT_EQ(qs(db, "SELECT s.value || ' ' || y.value FROM device_tasks t JOIN strings s ON s.id=t.name_id"
                   " JOIN strings y ON y.id=t.type_id WHERE t.correlation=41"), "EVENT_WAIT_SQE EVENT_WAIT_SQE");
  EXPECT_EQ(qs(db, "SELECT o.name FROM device_tasks t JOIN ops o ON o.id=t.op_id WHERE t.correlation=41"),
            "AscendCL@aclrtStreamWaitEvent");
  // COMMUNICATION_OP: 100 FP16 values, its group, the group's lane from 1000, the run's device.
  EXPECT_EQ(qs(db, "SELECT comm_group || ' ' || bytes || ' ' || stream || ' ' || device FROM device_tasks"
                   " WHERE comm_group IS NOT NULL"), "grp 200 1000 2");
  // STEP_TIME (no ProfilerStep#N op): the step, and every op and task inside it.
  EXPECT_EQ(rows(db, "SELECT step, start_ns, dur_ns FROM steps"), std::vector<std::string>{"3|900|2100"});
  EXPECT_EQ(q(db, "SELECT count(*) FROM ops WHERE step=3"), 6);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks WHERE step=3"), 3);
  // MEMORY_RECORD: the PTA row only.
  EXPECT_EQ(rows(db, "SELECT ts_ns, device, allocated, reserved FROM memory"),
            std::vector<std::string>{"1050|2|4096|8192"});
  const std::string config = qs(db, "SELECT config_json FROM runs");
  EXPECT_NE(config.find("\"world_size\":8"), std::string::npos) << config;
  EXPECT_NE(config.find("Ascend910B2"), std::string::npos) << config;
}

// The folder of a db export: ASCEND_PROFILER_OUTPUT holds the .db (and maybe the text files too,
// which are then left unread); a folder of .db files is a cluster.
TEST_F(ImportTest, TorchNpuFolderWithTheDbReadsTheDb) {
  SKIP_WITHOUT_SAMPLE_DB();
  copy(kAscend + "/profiler_info_0.json", "r0_ascend_pt/profiler_info_0.json");
  copy(kAscend + "/ASCEND_PROFILER_OUTPUT/trace_view.json", "r0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json");
  copy(kSampleDb, "r0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db");
  const std::string db = path("f.db");
  auto r = importPath(path("r0_ascend_pt"), db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).device_tasks, 539);
  EXPECT_EQ(qs(db, "SELECT comm_group FROM device_tasks WHERE stream = 1000 LIMIT 1"), "17522688603477080586")
      << "read from the db, not trace_view.json";
  EXPECT_EQ(qs(db, "SELECT source_path FROM runs"), path("r0_ascend_pt"));
  const std::string config = qs(db, "SELECT config_json FROM runs");
  EXPECT_NE(config.find("\"profiler_info\""), std::string::npos) << "the folder's files still describe the run";
  EXPECT_NE(config.find("\"META_DATA\""), std::string::npos);
  // An export of type db only, given by its ASCEND_PROFILER_OUTPUT folder.
  std::remove(path("r0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json").c_str());
  ASSERT_EQ(*detectFormat(path("r0_ascend_pt/ASCEND_PROFILER_OUTPUT")), "torch_npu");
  auto again = importPath(path("r0_ascend_pt/ASCEND_PROFILER_OUTPUT"), path("g.db"));
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->runs.at(0).host_ops, 1885);
  EXPECT_EQ(again->runs.at(0).rank, 0);

  // Two ranks' files side by side: a cluster, ranks from RANK_DEVICE_MAP.
  copy(kSampleDb, "job/ascend_pytorch_profiler_0.db");
  exec(copy(kSampleDb, "job/ascend_pytorch_profiler_1.db"), "UPDATE RANK_DEVICE_MAP SET rankId = 1;");
  ASSERT_EQ(*detectFormat(path("job")), "cluster");
  const std::string job = path("job.db");
  auto cluster = importPath(path("job"), job);
  ASSERT_TRUE(cluster.isOk()) << cluster.status().message();
  EXPECT_EQ(rows(job, "SELECT rank, world_size FROM runs ORDER BY rank"), (std::vector<std::string>{"0|2", "1|2"}));
  EXPECT_EQ(q(job, "SELECT count(*) FROM device_tasks"), 2 * 539);
}

// MindStudio Insight adds tables and columns to the files it opens; other writers may order the
// columns differently. Neither changes what is read.
TEST_F(ImportTest, TorchNpuDbIsReadByColumnName) {
  SKIP_WITHOUT_SAMPLE_DB();
  const std::string plain = path("plain.db");
  ASSERT_TRUE(importPath(kSampleDb, plain).isOk());
  const std::string f = copy(kSampleDb, "ascend_pytorch_profiler_0.db");
  exec(f, R"(
    CREATE TABLE INSIGHT_CACHE (k TEXT, v BLOB);
    INSERT INTO INSIGHT_CACHE VALUES ('layout', x'00ff');
    CREATE TABLE TASK_DEPTH (globalTaskId INTEGER, depth INTEGER);
    ALTER TABLE TASK ADD COLUMN depth INTEGER DEFAULT 3;
    ALTER TABLE PYTORCH_API ADD COLUMN insightId INTEGER DEFAULT 9;
    ALTER TABLE COMPUTE_TASK_INFO ADD COLUMN hf32 TEXT;
    ALTER TABLE COMMUNICATION_OP ADD COLUMN bandwidth REAL;
    CREATE TABLE t AS SELECT depth, modelId, taskId, streamId, contextId, taskType, globalPid, globalTaskId,
      connectionId, deviceId, endNs, startNs FROM TASK;
    DROP TABLE TASK; ALTER TABLE t RENAME TO TASK;
    CREATE TABLE t AS SELECT insightId, type, callchainId, inputShapes, inputDtypes, fwdThreadId, sequenceNumber,
      name, connectionId, globalTid, endNs, startNs FROM PYTORCH_API;
    DROP TABLE PYTORCH_API; ALTER TABLE t RENAME TO PYTORCH_API;
    CREATE TABLE t AS SELECT name, connectionId, globalTid, type, endNs, startNs FROM CANN_API;
    DROP TABLE CANN_API; ALTER TABLE t RENAME TO CANN_API;
    CREATE TABLE t AS SELECT value, id FROM STRING_IDS;
    DROP TABLE STRING_IDS; ALTER TABLE t RENAME TO STRING_IDS;
  )");
  const std::string db = path("shuffled.db");
  auto r = importPath(f, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).linked_tasks, 537);
  EXPECT_EQ(rows(plain, kOps), rows(db, kOps));
  EXPECT_EQ(rows(plain, kTasks), rows(db, kTasks));
  EXPECT_EQ(rows(plain, kMemory), rows(db, kMemory));
}

TEST_F(ImportTest, TorchNpuDbWithoutOptionalTables) {
  SKIP_WITHOUT_SAMPLE_DB();
  const std::string full = path("full.db");
  ASSERT_TRUE(importPath(kSampleDb, full).isOk());
  // No CANN_API: tasks reach their torch op through the op's CONNECTION_IDS.
  const std::string no_cann = copy(kSampleDb, "a/ascend_pytorch_profiler_0.db");
  exec(no_cann, "DROP TABLE CANN_API;");
  const std::string a = path("a.db");
  auto ra = importPath(no_cann, a);
  ASSERT_TRUE(ra.isOk()) << ra.status().message();
  // Python over trace_view.json: 860 cpu_op + 159 enqueue + 159 dequeue events; 487 tasks (483
  // on Ascend Hardware, 4 collectives) carry the connection_id of a Node@launch call, the only
  // launches torch_npu records in a torch op's CONNECTION_IDS.
  EXPECT_EQ(ra->runs.at(0).host_ops, 1178);
  EXPECT_EQ(ra->runs.at(0).device_tasks, 539);
  EXPECT_EQ(ra->runs.at(0).linked_tasks, 487);
  // ... and each is the op the full import finds through the CANN call, Dequeue and Enqueue.
  const std::string linked = "SELECT t.start_ns, t.stream, o.name, o.start_ns FROM device_tasks t JOIN ops o"
                             " ON o.id = t.op_id ORDER BY 1, 2";
  const std::vector<std::string> via_ids = rows(a, linked), via_calls = rows(full, linked);
  ASSERT_EQ(via_ids.size(), 487u);
  size_t same = 0;
  for (const std::string& row : via_ids) same += std::count(via_calls.begin(), via_calls.end(), row) > 0;
  EXPECT_EQ(same, via_ids.size());

  // Only the device's tasks: no host ops, steps, memory or rank table; the rank from the name.
  const std::string tasks_only = copy(kSampleDb, "b/ascend_pytorch_profiler_5.db");
  exec(tasks_only, R"(
    DROP TABLE PYTORCH_API; DROP TABLE CONNECTION_IDS; DROP TABLE PYTORCH_CALLCHAINS; DROP TABLE CANN_API;
    DROP TABLE COMPUTE_TASK_INFO; DROP TABLE COMMUNICATION_OP; DROP TABLE MEMORY_RECORD; DROP TABLE STEP_TIME;
    DROP TABLE META_DATA; DROP TABLE NPU_INFO; DROP TABLE RANK_DEVICE_MAP; DROP TABLE ENUM_HCCL_DATA_TYPE;
    DROP TABLE ENUM_API_TYPE;)");
  const std::string b = path("b.db");
  auto rb = importPath(tasks_only, b);
  ASSERT_TRUE(rb.isOk()) << rb.status().message();
  EXPECT_EQ(rb->runs.at(0).host_ops, 0);
  EXPECT_EQ(rb->runs.at(0).device_tasks, 535);  // X events of "Ascend Hardware"
  EXPECT_EQ(rb->runs.at(0).linked_tasks, 0);
  EXPECT_EQ(rb->runs.at(0).steps, 0);
  EXPECT_EQ(rb->runs.at(0).memory_samples, 0);
  EXPECT_EQ(rb->runs.at(0).rank, 5);
  // Without COMPUTE_TASK_INFO a task is named and typed by TASK.taskType (172 AI_CORE tasks).
  EXPECT_EQ(q(b, "SELECT count(*) FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE s.value='AI_CORE'"), 172);

  // Steps from STEP_TIME when no op is ProfilerStep#N.
  const std::string no_step_op = copy(kSampleDb, "c/ascend_pytorch_profiler_0.db");
  exec(no_step_op, "DELETE FROM PYTORCH_API WHERE name = (SELECT id FROM STRING_IDS WHERE value = 'ProfilerStep#50');");
  const std::string c = path("c.db");
  auto rc = importPath(no_step_op, c);
  ASSERT_TRUE(rc.isOk()) << rc.status().message();
  EXPECT_EQ(rc->runs.at(0).host_ops, 1884);
  EXPECT_EQ(rows(c, "SELECT step, start_ns, dur_ns FROM steps"), rows(full, "SELECT step, start_ns, dur_ns FROM steps"));
  EXPECT_EQ(q(c, "SELECT start_ns FROM steps"), 1736408883686740710);  // ProfilerStep#50's start in trace_view.json
}

TEST_F(ImportTest, TorchNpuDbRefusals) {
  expectRefused(write("x.db", "hello, not a database"),
                "x.db: not an SQLite database (expected torch_npu's ascend_pytorch_profiler_*.db)");
  const std::string other = path("other.db");
  exec(other, "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('x');");
  expectRefused(other, other + ": not a torch_npu profiler export (no table STRING_IDS)");
  const std::string strings_only = path("strings.db");
  exec(strings_only, "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);");
  expectRefused(strings_only, strings_only + ": not a torch_npu profiler export (no table PYTORCH_API or TASK)");
  // An npuscope trace file given to import by mistake.
  const std::string trace = path("trace.db");
  ASSERT_TRUE(importPath(kKineto, trace).isOk());
  expectRefused(trace, trace + ": an npuscope trace file, not a torch_npu profiler export");
  if (kSampleDb.empty()) return;

  const std::string no_col = copy(kSampleDb, "nocol.db");
  exec(no_col, "CREATE TABLE t AS SELECT endNs, globalTid, name, type FROM PYTORCH_API; DROP TABLE PYTORCH_API;"
               " ALTER TABLE t RENAME TO PYTORCH_API;");
  expectRefused(no_col, no_col + ": table PYTORCH_API has no column 'startNs'");
  // Pages past the first overwritten: SQLite's schema reads, its tables do not.
  std::ifstream in(kSampleDb, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 16384u);
  std::string corrupt = bytes;
  for (size_t i = 4096; i < corrupt.size(); ++i) corrupt[i] = static_cast<char>(0x5a ^ (i * 7));
  expectRefused(write("corrupt.db", corrupt), "corrupt.db: corrupt SQLite database (");
  expectRefused(write("cut.db", bytes.substr(0, bytes.size() / 2)),
                "cut.db: corrupt SQLite database: truncated (" + std::to_string(bytes.size() / 2) + " of " +
                    std::to_string(bytes.size()) + " bytes)");

  // Into a file that already holds a run: the failed import adds none.
  const std::string keep = path("keep.db");
  ASSERT_TRUE(importPath(kKineto, keep).isOk());
  EXPECT_FALSE(importPath(path("corrupt.db"), keep).isOk());
  EXPECT_EQ(rows(keep, "SELECT status FROM runs"), std::vector<std::string>{"completed"});
}

TEST_F(ImportTest, TorchNpuDbCancelLeavesNoRun) {
  SKIP_WITHOUT_SAMPLE_DB();
  Options o;
  int64_t calls = 0, last_total = 0;
  o.progress = [&](int64_t, int64_t total) {
    last_total = total;
    return ++calls < 2;
  };
  const std::string db = path("c.db");
  auto r = importPath(kSampleDb, db, o);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(), kSampleDb + ": import cancelled");
  EXPECT_FALSE(exists(db));
  std::ifstream in(kSampleDb, std::ios::binary | std::ios::ate);
  EXPECT_EQ(last_total, static_cast<int64_t>(in.tellg())) << "progress counts the file's bytes";
}

}  // namespace
}  // namespace npuscope::import
