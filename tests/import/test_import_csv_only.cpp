// torch_npu folders without the timeline (data_simplification, newer levels): the real Qwen3-0.6B
// export of a 910B (tests/data/traces/ascend_qwen3_rank0_ascend_pt: kernel_details.csv,
// step_trace_time.csv, memory_record.csv, communication.json, no trace_view.json or db) imports
// as device tasks, its step and memory. The expected figures were counted with Python's csv
// module on the source files; the step's span is step_trace_time.csv's Stage.
#include <gtest/gtest.h>

#include <string>

#include "import_fixture.h"
#include "npuscope/import/import.h"

namespace npuscope::import {
namespace {

using namespace npuscope::import::test;

const std::string kQwen3 = kTraces + "/ascend_qwen3_rank0_ascend_pt";

TEST_F(ImportTest, CsvOnlyFolderImportsItsKernelsStepAndMemory) {
  const std::string db = path("qwen3.db");
  auto r = importPath(kQwen3, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(r->runs.size(), 1u);
  const RunSummary& run = r->runs[0];
  EXPECT_EQ(run.rank, 0);
  EXPECT_EQ(run.host_ops, 0);
  EXPECT_EQ(run.device_tasks, 2463);   // kernel_details.csv's rows
  EXPECT_EQ(run.steps, 1);
  EXPECT_EQ(run.memory_samples, 9309);  // memory_record.csv's PTA rows
  bool said = false;
  for (const std::string& n : run.notes) said |= n.find("no host ops: the folder has no timeline") != std::string::npos;
  EXPECT_TRUE(said);

  EXPECT_EQ(q(db, "SELECT step FROM steps"), 13);
  EXPECT_EQ(q(db, "SELECT dur_ns FROM steps"), 810022360);  // first kernel start to last kernel end
  // Types from the Type column (112 rows of RmsNorm); the 15 COMMUNICATION rows are collectives,
  // 4 of them in group 5862276114690318097 by communication.json's "{op}@{group}" keys.
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings y ON y.id = t.type_id WHERE y.value = 'HCCL'"), 15);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks WHERE comm_group = '5862276114690318097'"), 4);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings y ON y.id = t.type_id WHERE y.value = 'RmsNorm'"), 112);
  EXPECT_EQ(q(db, "SELECT sum(dur_ns) FROM device_tasks"), 651464360);  // the Duration(us) column summed
  EXPECT_EQ(qs(db, "SELECT DISTINCT s.value FROM device_tasks t JOIN strings s ON s.id = t.shapes_id"
                   " JOIN strings n ON n.id = t.name_id WHERE n.value = 'aclnnEmbedding_GatherV2AiCore_GatherV2'"),
            "[[151936, 1024], [1, 4096], [1]]");
  const std::string meta = qs(db, "SELECT config_json FROM runs");
  EXPECT_NE(meta.find("\"missing\":[\"trace_view.json\""), std::string::npos) << meta;
}

TEST_F(ImportTest, CsvOnlyFolderRefusesBadRowsInOneLine) {
  const std::string header = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n";
  write("nodur_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", "Step Id,Name,Type,Start Time(us)\n1,a,A,5\t\n");
  expectRefused(path("nodur_ascend_pt"), "kernel_details.csv: line 1: no column 'Duration(us)'");
  write("baddur_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", header + "1,a,A,AI_CORE,5.0\t,x\n");
  expectRefused(path("baddur_ascend_pt"), "kernel_details.csv: line 2: bad Duration(us) 'x'");
  write("negdur_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", header + "1,a,A,AI_CORE,5.0\t,-3\n");
  expectRefused(path("negdur_ascend_pt"), "kernel_details.csv: line 2: bad Duration(us) '-3'");
  write("badts_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", header + "1,a,A,AI_CORE,soon,1\n");
  expectRefused(path("badts_ascend_pt"), "kernel_details.csv: line 2: bad Start Time(us) 'soon'");
  // A broken communication.json costs the collectives their groups, not the import.
  write("comm_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", header + "1,hcom_allReduce__1,hcom_allReduce_,COMMUNICATION,5.0\t,2\n");
  write("comm_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json", "{not json");
  auto r = importPath(path("comm_ascend_pt"), path("comm.db"));
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).device_tasks, 1);
}

// A pipeline rank whose export kept only step_trace_time.csv and communication.json (ranks 1 and
// 3 of the real Qwen3 job: tests/data/traces/ascend_qwen3_rank1_ascend_pt) imports as its
// collectives (15 entries with a Start Timestamp(us) in communication.json, counted with
// Python's json module) and its step, which starts at the first of them (1764246877150725.0 us)
// and lasts the CSV's Stage (809431.75 us); the CSV's rows stay with the run for the cluster
// report.
TEST_F(ImportTest, KernelLessRankFolderImportsItsCollectivesAndStep) {
  const std::string db = path("qwen3_rank1.db");
  auto r = importPath(kTraces + "/ascend_qwen3_rank1_ascend_pt", db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const RunSummary& run = r->runs.at(0);
  EXPECT_EQ(run.rank, 1);
  EXPECT_EQ(run.host_ops, 0);
  EXPECT_EQ(run.device_tasks, 15);
  EXPECT_EQ(run.steps, 1);
  bool said = false;
  for (const std::string& n : run.notes) said |= n.find("15 collectives from communication.json") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings y ON y.id = t.type_id WHERE y.value = 'HCCL'"), 15);
  EXPECT_EQ(q(db, "SELECT step FROM steps"), 13);
  EXPECT_EQ(q(db, "SELECT dur_ns FROM steps"), 809431750);
  EXPECT_EQ(q(db, "SELECT min(start_ns) FROM device_tasks"), q(db, "SELECT start_ns FROM steps"));
  const std::string meta = qs(db, "SELECT config_json FROM runs");
  EXPECT_NE(meta.find("\"Computing\":230903.7200000004"), std::string::npos) << meta;

  // A step_trace_time.csv without its Step column is refused in one line; a folder with none of
  // the files is too.
  write("nostep_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "Device_id,Computing\n0,5\n");
  expectRefused(path("nostep_ascend_pt"), "step_trace_time.csv: line 1: no column 'Step'");
  write("empty_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv", "");
  expectRefused(path("empty_ascend_pt"), "no trace_view.json, ascend_pytorch_profiler_*.db, kernel_details.csv, "
                                         "step_trace_time.csv or communication.json");
}

// A collective's bytes are its count times its dtype's size; a count no tensor has (found by
// fuzz_chrome_events: 4e18 elements of INT32 overflowed) leaves the bytes unknown instead.
TEST_F(ImportTest, ACollectivesBytesFromCountAndDtypeWithoutOverflow) {
  const std::string events = R"([
    {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "HCCL"}},
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "Group 1 Communication"}},
    {"ph": "X", "name": "hcom_allReduce__1", "pid": 7, "tid": 1, "ts": "10.000", "dur": 5,
     "args": {"count": 1024, "data_type": "INT32"}},
    {"ph": "X", "name": "hcom_allReduce__2", "pid": 7, "tid": 1, "ts": "20.000", "dur": 5,
     "args": {"count": 4097666319462527994, "data_type": "INT32"}}
  ])";
  write("hccl_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", events);
  const std::string db = path("hccl.db");
  auto r = importPath(path("hccl_ascend_pt"), db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks"), 2);
  EXPECT_EQ(q(db, "SELECT bytes FROM device_tasks ORDER BY start_ns LIMIT 1"), 4096);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks WHERE bytes IS NULL"), 1);
}

}  // namespace
}  // namespace npuscope::import
