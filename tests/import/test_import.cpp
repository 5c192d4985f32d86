// The importers against the real samples in tests/data/traces (expected counts from an
// independent Python reading of the same files, noted at each figure) and against small fixtures
// written here for every documented variant and every bad input.
#include <gtest/gtest.h>

#include <map>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "import_fixture.h"
#include "npuscope/analysis/chrome_trace.h"
#include "npuscope/analysis/cluster.h"
#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/analysis/perf_compare.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/import/import.h"

namespace npuscope::import {
namespace {

using namespace npuscope::import::test;

// torch_npu computed the sample's step_trace_time.csv from the same device tasks on the real
// device: the cluster report's breakdown of the imported run must give its figures.
TEST_F(ImportTest, ClusterBreakdownMatchesTorchNpuStepTraceTime) {
  const std::string db = path("st.db");
  ASSERT_TRUE(importPath(kAscend, db).isOk());
  std::ifstream csv(kAscend + "/ASCEND_PROFILER_OUTPUT/step_trace_time.csv");
  std::string header, row;
  ASSERT_TRUE(std::getline(csv, header) && std::getline(csv, row));
  auto split = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (char c : line) {
      if (c == ',') out.emplace_back(); else if (c != '\r') out.back() += c;
    }
    return out;
  };
  const std::vector<std::string> names = split(header), values = split(row);
  ASSERT_EQ(names.size(), values.size());
  std::map<std::string, double> want;  // microseconds
  for (size_t i = 0; i < names.size(); ++i) want[names[i]] = std::stod(values[i]);
  auto rep = cluster::analyze({db});
  ASSERT_TRUE(rep.isOk()) << rep.status().message();
  ASSERT_EQ(rep->ranks.size(), 1u);
  // The rank's job: the folder that holds the job's *_ascend_pt folders.
  EXPECT_EQ(rep->job, "import:" + std::filesystem::absolute(kAscend).parent_path().lexically_normal().string());
  ASSERT_EQ(rep->ranks[0].steps.size(), 1u);
  const cluster::StepBreakdown& b = rep->ranks[0].steps[0];
  EXPECT_EQ(b.step, static_cast<int64_t>(want["Step"]));
  // Within 50 ns: the trace's timestamps are microseconds with three decimals.
  auto us = [](int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  EXPECT_NEAR(us(b.computing), want["Computing"], 0.05);                       // 8873.756
  EXPECT_NEAR(us(b.not_overlapped), want["Communication(Not Overlapped)"], 0.05);  // 101963.203
  EXPECT_NEAR(us(b.overlapped), want["Overlapped"], 0.05);                     // 4028.675
  EXPECT_NEAR(us(b.communication), want["Communication"], 0.05);               // 105991.878
  EXPECT_NEAR(us(b.free), want["Free"], 0.05);                                 // 25744.05
  EXPECT_NEAR(us(b.stage), want["Stage"], 0.05);                               // 136581.0
  EXPECT_NEAR(us(b.preparing), want["Preparing"], 0.05);                       // 17902.5
  // Its four all-reduces (communication.json: hcom_allReduce__586_0_1 .. _3_1), 105.99 ms in all.
  ASSERT_EQ(rep->ranks[0].collectives.size(), 1u);
  EXPECT_EQ(rep->ranks[0].collectives[0].kind, "allreduce");
  EXPECT_EQ(rep->ranks[0].collectives[0].count, 4);
}

TEST_F(ImportTest, TorchNpuSampleCountsMatchTheSource) {
  const std::string db = path("a.db");
  auto r = importPath(kAscend, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(r->runs.size(), 1u);
  const RunSummary& run = r->runs[0];
  // Python over trace_view.json: X events with cat cpu_op/enqueue/dequeue or in the CANN process.
  EXPECT_EQ(run.host_ops, 1885);
  // X events of "Ascend Hardware" plus the "Group 0 Communication" lane of "HCCL".
  EXPECT_EQ(run.device_tasks, 539);
  // Tasks whose connection_id a host event also carries.
  EXPECT_EQ(run.linked_tasks, 537);
  EXPECT_EQ(run.steps, 1);
  EXPECT_EQ(run.memory_samples, 381);  // memory_record.csv rows of Component PTA
  EXPECT_EQ(run.rank, 0);              // profiler_info_0.json rank_id
  EXPECT_EQ(q(db, "SELECT count(*) FROM op_events"), 1885);
  EXPECT_EQ(q(db, "SELECT step FROM steps"), 50);  // ProfilerStep#50
  // Types from kernel_details.csv (its Type column: 57 TransData, 8 MatMulV2 rows); each of the
  // 172 AI_CORE tasks of trace_view.json has a row there, so none keeps that type.
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE s.value='TransData'"), 57);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE s.value='MatMulV2'"), 8);
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE s.value='AI_CORE'"), 0);
  EXPECT_EQ(qs(db, "SELECT source FROM runs"), "torch_npu");
  EXPECT_EQ(q(db, "SELECT rank FROM runs"), 0);
  // Allocated peak: 1187.9814453125 MB in memory_record.csv.
  EXPECT_EQ(q(db, "SELECT max(allocated) FROM memory"), static_cast<int64_t>(1187.9814453125 * 1024 * 1024 + 0.5));
  // µs text to ns without loss: ProfilerStep#50 starts at "1736408883686740.710".
  EXPECT_EQ(q(db, "SELECT start_ns FROM steps"), 1736408883686740710);
  EXPECT_EQ(q(db, "SELECT wall_start_ns FROM runs"), q(db, "SELECT started_ns FROM runs"));
  // The allreduce on the HCCL group lane: count 4097000 of FP32.
  EXPECT_EQ(q(db, "SELECT bytes FROM device_tasks t JOIN strings s ON s.id=t.name_id"
                  " WHERE s.value='hcom_allReduce__586_0_1'"), 4097000 * 4);
  // A task launched through the task queue belongs to the op that enqueued it (on the main
  // thread 3096504), not to the ACL call on the dequeue thread 3099702: trans_TransData_0's
  // launch (connection_id 40004068119343529983, past 64 bits) sits in Dequeue@Conv2D, whose
  // Enqueue is inside the framework's Conv2D op.
  EXPECT_EQ(qs(db, "SELECT o.name || ' ' || o.thread_id FROM device_tasks t JOIN strings s ON s.id=t.name_id"
                   " JOIN ops o ON o.id=t.op_id WHERE s.value='trans_TransData_0'"), "Conv2D 3096504");

  // The real device's busy time in the step agrees with torch_npu's own step_trace_time.csv:
  // Computing + Communication(Not Overlapped) = 8873.756 + 101963.203 us.
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto device = (*reader)->stepDeviceTimes(run.run_id);
  ASSERT_TRUE(device.isOk());
  ASSERT_EQ(device->size(), 1u);
  const double busy_us = static_cast<double>((*device)[0].device_busy_ns) / 1e3;
  EXPECT_NEAR(busy_us, 8873.756 + 101963.203, 0.02 * (8873.756 + 101963.203));
}

TEST_F(ImportTest, KinetoSampleLinksTheKernelToItsLaunch) {
  const std::string db = path("k.db");
  auto r = importPath(kKineto, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const RunSummary& run = r->runs.at(0);
  EXPECT_EQ(run.host_ops, 5);      // 4 cpu_op + 1 cuda_runtime
  EXPECT_EQ(run.device_tasks, 3);  // 1 kernel + 2 cuda_sync on the stream
  EXPECT_EQ(run.linked_tasks, 3);  // the kernel by correlation 1, the syncs by their External id
  EXPECT_EQ(qs(db, "SELECT o.name FROM device_tasks t JOIN ops o ON o.id=t.op_id JOIN strings s ON s.id=t.name_id"
                   " WHERE s.value='Kernel'"), "cudaLaunchKernel");
  EXPECT_EQ(qs(db, "SELECT o.name FROM device_tasks t JOIN ops o ON o.id=t.op_id JOIN strings s ON s.id=t.name_id"
                   " WHERE s.value='Event Sync'"), "op_evt_sync");
  EXPECT_EQ(qs(db, "SELECT p.name FROM ops o JOIN ops p ON p.id=o.parent_id WHERE o.name='cudaLaunchKernel'"), "op1");
  // ts 88437691101.749 us, relative to baseTimeNanoseconds 1775078550000000000.
  EXPECT_EQ(q(db, "SELECT start_ns FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE s.value='kernel'"),
            88437691101749);
  EXPECT_EQ(q(db, "SELECT wall_start_ns - started_ns FROM runs"), 1775078550000000000);
  bool noted = false;
  for (const std::string& n : run.notes) noted |= n.find("1 Kineto trace spans (Trace) skipped") != std::string::npos;
  EXPECT_TRUE(noted);
}

// Two imports in one process (the workbench converts one trace after another): the second file's
// strings are its own, none of the first trace's names (torch_npu's aten:: ops; the Kineto
// sample has none) ride along, and its ops still read their names.
TEST_F(ImportTest, AnImportWritesOnlyItsOwnStrings) {
  const std::string first = path("first.db"), second = path("second.db");
  ASSERT_TRUE(importPath(kAscend, first).isOk());
  ASSERT_GT(q(first, "SELECT count(*) FROM strings WHERE value LIKE 'aten::%'"), 10);
  ASSERT_TRUE(importPath(kKineto, second).isOk());
  EXPECT_EQ(q(second, "SELECT count(*) FROM strings WHERE value LIKE 'aten::%'"), 0);
  // Every string the file holds is a name, category or type written in the trace it came from.
  std::ifstream in(kKineto);
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int64_t n = q(second, "SELECT count(*) FROM strings");
  EXPECT_GE(n, 10);  // 5 op names, 3 task names, 2 task types
  for (int64_t i = 0; i < n; ++i) {
    const std::string value = qs(second, "SELECT value FROM strings ORDER BY id LIMIT 1 OFFSET " + std::to_string(i));
    EXPECT_NE(source.find(value), std::string::npos) << "'" << value << "' is not in " << kKineto;
  }
  EXPECT_EQ(qs(second, "SELECT group_concat(name, ',') FROM (SELECT name FROM ops ORDER BY start_ns, id)"),
            "op1,cudaLaunchKernel,op_record,op_wait,op_evt_sync");
}

// Kineto 2021: Operator / Runtime / Kernel / Memcpy, string tids, no top-level keys but traceEvents.
TEST_F(ImportTest, Kineto2021NamesAndNoMetadata) {
  const std::string f = write("old.json", R"({"traceEvents": [
    {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 100, "dur": 50,
     "args": {"Input dims": [[2, 3], [3, 4]], "Sequence number": 12}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 110, "dur": 5,
     "args": {"correlation": 70}},
    {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 120, "dur": 30,
     "args": {"correlation": 70, "device": 0, "stream": 7}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": "stream 7", "ts": 160, "dur": 4,
     "args": {"correlation": 71, "device": 0, "stream": 7, "bytes": 4096}},
    {"ph": "X", "cat": "foo", "name": "a", "pid": 7, "tid": 7, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "foo", "name": "b", "pid": 7, "tid": 7, "ts": 2, "dur": 1}
  ]})");
  const std::string db = path("old.db");
  auto r = importPath(f, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs[0].host_ops, 2);
  EXPECT_EQ(r->runs[0].device_tasks, 2);
  EXPECT_EQ(r->runs[0].linked_tasks, 1);
  EXPECT_EQ(q(db, "SELECT seq_nr FROM ops WHERE name='aten::mm'"), 12);
  EXPECT_EQ(q(db, "SELECT depth FROM ops WHERE name='cudaLaunchKernel'"), 1);
  EXPECT_EQ(q(db, "SELECT stream FROM device_tasks WHERE bytes=4096"), 7);
  EXPECT_EQ(qs(db, "SELECT s.value FROM device_tasks t JOIN strings s ON s.id=t.type_id WHERE bytes=4096"), "gpu_memcpy");
  EXPECT_EQ(q(db, "SELECT count(*) FROM steps"), 0);
  bool noted = false;
  for (const std::string& n : r->runs[0].notes) noted |= n == "2 events of unknown category 'foo' skipped";
  EXPECT_TRUE(noted);
}

// Current torch.profiler output, gzipped: steps, shapes, memory, a launch linked only by its flow.
TEST_F(ImportTest, GzipTraceWithStepsMemoryAndFlows) {
  const std::string f = writeGz("cur.pt.trace.json.gz", R"({
  "schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1100, "dur": 100,
     "args": {"Input Dims": [[4,4], [4,4], []], "Input type": ["float", "float", "Scalar"], "External id": 9}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1150, "dur": 20},
    {"ph": "s", "cat": "ac2g", "id": 55, "pid": 1, "tid": 1, "ts": 1151, "name": "ac2g"},
    {"ph": "f", "cat": "ac2g", "id": 55, "pid": 0, "tid": 7, "ts": 1300, "bp": "e", "name": "ac2g"},
    {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 1300, "dur": 10,
     "args": {"correlation": 55, "device": 0, "stream": 7}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 7, "ts": 1400, "dur": 500,
     "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "AddBackward0", "pid": 1, "tid": 2, "ts": 1500, "dur": 50},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 2, "ts": 1510, "dur": 10},
    {"ph": "s", "cat": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 1100, "name": "fwdbwd"},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1120, "s": "t",
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 64, "Total Allocated": 640, "Total Reserved": 2048}},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1130, "s": "t",
     "args": {"Device Type": 0, "Device Id": -1, "Addr": 1, "Bytes": 64, "Total Allocated": 64, "Total Reserved": 0}}
  ],
  "traceName": "x"
})");
  const std::string db = path("cur.db");
  auto r = importPath(f, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const RunSummary& run = r->runs[0];
  EXPECT_EQ(run.rank, 3);
  EXPECT_EQ(q(db, "SELECT world_size FROM runs"), 8);
  EXPECT_EQ(run.steps, 1);
  EXPECT_EQ(q(db, "SELECT step FROM steps"), 3);
  EXPECT_EQ(q(db, "SELECT dur_ns FROM steps"), 1000000);
  EXPECT_EQ(q(db, "SELECT count(*) FROM ops WHERE step=3"), 5);  // every host op starts inside the step
  EXPECT_EQ(qs(db, "SELECT input_shapes FROM ops WHERE name='aten::add'"), "[[4, 4], [4, 4], []]");
  EXPECT_EQ(qs(db, "SELECT input_dtypes FROM ops WHERE name='aten::add'"), "float, float, Scalar");
  EXPECT_EQ(q(db, "SELECT is_backward FROM ops WHERE name='aten::mul'"), 1);  // inside AddBackward0
  EXPECT_EQ(q(db, "SELECT is_backward FROM ops WHERE name='aten::add'"), 0);
  // The kernel's correlation is on no host event: its launch flow starts inside cudaLaunchKernel.
  EXPECT_EQ(qs(db, "SELECT o.name FROM device_tasks t JOIN ops o ON o.id=t.op_id"), "cudaLaunchKernel");
  EXPECT_EQ(q(db, "SELECT step FROM device_tasks WHERE op_id IS NOT NULL"), 3);
  // Busy time: the 10 us kernel; the stream's 500 us wait on an event is not work.
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto device = (*reader)->stepDeviceTimes(run.run_id);
  ASSERT_TRUE(device.isOk());
  ASSERT_EQ(device->size(), 1u);
  EXPECT_EQ((*device)[0].device_busy_ns, 10000);
  EXPECT_EQ(run.memory_samples, 1);  // the CPU sample is not the device's
  EXPECT_EQ(q(db, "SELECT allocated FROM memory"), 640);
  EXPECT_EQ(q(db, "SELECT reserved FROM memory"), 2048);
  EXPECT_EQ(q(db, "SELECT wall_start_ns FROM runs"), 1700000000000000000 + 1000000);
  EXPECT_NE(qs(db, "SELECT config_json FROM runs").find("\"backend\":\"nccl\""), std::string::npos);
}

// torch_npu's layout: a bare array with string time stamps, devices as named processes, the task
// queue (enqueue on the main thread, dequeue + ACL call on another), memory_record.csv.
TEST_F(ImportTest, TorchNpuFolderWithTaskQueue) {
  const std::string root = "r1_ascend_pt";
  write(root + "/profiler_info_1.json", R"({"config": {}, "rank_id": 1})");
  write(root + "/ASCEND_PROFILER_OUTPUT/memory_record.csv",
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n"
        "APP,1000.000\t,,4,,,NPU:3\n"
        "PTA,1000.500\t,1.5,2,,,NPU:3\n");
  write(root + "/ASCEND_PROFILER_OUTPUT/trace_view.json", R"([
    {"name": "process_name", "ph": "M", "pid": 10, "tid": 0, "args": {"name": "Python"}},
    {"name": "process_name", "ph": "M", "pid": 20, "tid": 0, "args": {"name": "CANN"}},
    {"name": "process_name", "ph": "M", "pid": 30, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"name": "process_name", "ph": "M", "pid": 40, "tid": 0, "args": {"name": "Overlap Analysis"}},
    {"ph": "X", "name": "ProfilerStep#7", "pid": 10, "tid": 1, "ts": "1000.000", "dur": 900, "cat": "cpu_op"},
    {"ph": "X", "name": "aten::add", "pid": 10, "tid": 1, "ts": "1001.000", "dur": 50, "cat": "cpu_op",
     "args": {"Input Dims": "4,4;\r\n4,4;\r\n", "Input type": "float;\r\nfloat;\r\nNone", "Sequence number": -1}},
    {"ph": "X", "name": "Enqueue", "pid": 10, "tid": 1, "ts": "1010.000", "dur": 5, "cat": "enqueue", "args": {"correlation_id": 5}},
    {"ph": "X", "name": "Dequeue@add", "pid": 10, "tid": 2, "ts": "1020.000", "dur": 30, "cat": "dequeue", "args": {"correlation_id": 5}},
    {"name": "AscendCL@aclnnAdd", "pid": 20, "tid": 2, "ts": "1025.000", "dur": 10, "ph": "X",
     "args": {"connection_id": 9}},
    {"name": "Add_kernel", "pid": 30, "tid": 2, "ts": "1040.250", "dur": 7.5, "ph": "X",
     "args": {"Task Type": "AI_VECTOR_CORE", "Physic Stream Id": 2, "connection_id": 9}},
    {"name": "Computing", "pid": 40, "tid": 0, "ts": "1040.250", "dur": 7.5, "ph": "X"},
    {"name": "APP/HBM", "pid": 50, "tid": 0, "ts": "1000", "ph": "C", "args": {"KB": 1}}
  ])");
  const std::string db = path("npu.db");
  auto r = importPath(path(root), db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const RunSummary& run = r->runs[0];
  EXPECT_EQ(run.rank, 1);
  EXPECT_EQ(run.host_ops, 5);
  EXPECT_EQ(run.device_tasks, 1);
  EXPECT_EQ(qs(db, "SELECT o.name FROM device_tasks t JOIN ops o ON o.id=t.op_id"), "aten::add");
  EXPECT_EQ(qs(db, "SELECT s.value FROM device_tasks t JOIN strings s ON s.id=t.type_id"), "AI_VECTOR_CORE");
  EXPECT_EQ(q(db, "SELECT device FROM device_tasks"), 3);  // from memory_record's NPU:3
  EXPECT_EQ(q(db, "SELECT stream FROM device_tasks"), 2);
  EXPECT_EQ(q(db, "SELECT start_ns FROM device_tasks"), 1040250);
  EXPECT_EQ(q(db, "SELECT dur_ns FROM device_tasks"), 7500);
  EXPECT_EQ(qs(db, "SELECT input_shapes FROM ops WHERE name='aten::add'"), "[[4, 4], [4, 4], []]");
  EXPECT_EQ(qs(db, "SELECT input_dtypes FROM ops WHERE name='aten::add'"), "float, float, ");
  // The CANN call runs on thread 2 like the dequeue that holds it.
  EXPECT_EQ(qs(db, "SELECT p.name FROM ops o JOIN ops p ON p.id=o.parent_id WHERE o.name='AscendCL@aclnnAdd'"),
            "Dequeue@add");
  EXPECT_EQ(run.memory_samples, 1);
  EXPECT_EQ(q(db, "SELECT allocated FROM memory"), 1572864);  // 1.5 MB
  EXPECT_EQ(qs(db, "SELECT device FROM runs"), "npu:3");
  // Through ASCEND_PROFILER_OUTPUT itself: the same run.
  auto again = importPath(path(root + "/ASCEND_PROFILER_OUTPUT"), path("npu2.db"));
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->runs[0].rank, 1);
  EXPECT_EQ(again->runs[0].linked_tasks, 1);
}

// kernel_details.csv: each row gives the trace_view.json task of its name and start its op type
// (else its accelerator core) and input shapes.
TEST_F(ImportTest, KernelDetailsGiveTorchNpuTasksTheirOpTypeAndShapes) {
  const std::string db = path("k.db");
  auto r = importPath(kAscend, db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  // Python: all 191 rows have a task of their name starting within 1 us (3 HCCL rows are 1 ns
  // off), 174 of them with Input Shapes other than N/A.
  for (const std::string& n : r->runs[0].notes) EXPECT_EQ(n.find("kernel_details.csv"), std::string::npos) << n;
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks WHERE shapes_id IS NOT NULL"), 174);
  EXPECT_EQ(qs(db, "SELECT s.value || ' ' || y.value FROM device_tasks t JOIN strings n ON n.id=t.name_id"
                   " JOIN strings s ON s.id=t.shapes_id JOIN strings y ON y.id=t.type_id WHERE n.value='Conv2D1'"),
            "[[32, 1, 224, 224, 8], [121, 4, 16, 8], [64]] Conv2D");
  // The collectives' rows (Type hcom_allReduce_) leave them HCCL tasks.
  EXPECT_EQ(q(db, "SELECT count(*) FROM device_tasks t JOIN strings y ON y.id=t.type_id WHERE y.value='HCCL'"), 4);

  const std::string root = "kd_ascend_pt/ASCEND_PROFILER_OUTPUT/";
  write(root + "trace_view.json", R"([
    {"name": "process_name", "ph": "M", "pid": 30, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"name": "Add_kernel", "pid": 30, "tid": 2, "ts": "1040.250", "dur": 7.5, "ph": "X", "args": {"Task Type": "AI_CORE"}},
    {"name": "Cast_kernel", "pid": 30, "tid": 2, "ts": "1050.000", "dur": 2, "ph": "X", "args": {"Task Type": "AI_CORE"}},
    {"name": "Sort_kernel", "pid": 30, "tid": 2, "ts": "1060.000", "dur": 2, "ph": "X", "args": {"Task Type": "AI_CPU"}}
  ])");
  // Columns in another order, with extras; a start 0.4 us off; a row of no task; a row too far.
  write(root + "kernel_details.csv",
        "Step Id,Name,Input Shapes,Accelerator Core,Type,Start Time(us),Duration(us),Input Data Types\n"
        "7,Add_kernel,\"\"\"4,4;4,4\"\"\",AI_VECTOR_CORE,Add,1040.250\t,7.5,FLOAT;FLOAT\n"
        "7,Cast_kernel,N/A,AI_CPU,N/A,1049.600\t,2,N/A\n"
        "7,Gone_kernel,N/A,AI_CORE,Gone,1070.000\t,2,N/A\n"
        "7,Add_kernel,N/A,AI_CORE,Add,1042.000\t,2,N/A\n");
  const std::string kd = path("kd.db");
  auto k = importPath(path("kd_ascend_pt"), kd);
  ASSERT_TRUE(k.isOk()) << k.status().message();
  const std::string tasks = "SELECT n.value || ' ' || y.value || ' ' || coalesce(s.value, '-') FROM device_tasks t"
                            " JOIN strings n ON n.id=t.name_id JOIN strings y ON y.id=t.type_id"
                            " LEFT JOIN strings s ON s.id=t.shapes_id ORDER BY t.start_ns";
  EXPECT_EQ(rows(kd, tasks), (std::vector<std::string>{"Add_kernel Add [[4, 4], [4, 4]]", "Cast_kernel AI_CPU -",
                                                        "Sort_kernel AI_CPU -"}));
  bool noted = false;
  for (const std::string& n : k->runs[0].notes) {
    noted |= n == "kernel_details.csv: 2 of 4 rows match no device task (same name, start within 1 us);"
                  " their details are not used";
  }
  EXPECT_TRUE(noted);
  write(root + "kernel_details.csv", "Name,Type,Start(us)\nAdd_kernel,Add,1040.25\n");
  expectRefused(path("kd_ascend_pt"), "kernel_details.csv: line 1: no column 'Start Time(us)'");
}

TEST_F(ImportTest, FolderOfRanksIsOneClusterInOneFile) {
  for (int rank : {0, 1}) {
    write("job/rank" + std::to_string(rank) + ".pt.trace.json",
          R"({"distributedInfo": {"rank": )" + std::to_string(rank) + R"(, "world_size": 2}, "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]})");
  }
  write("job/notes.txt", "not a trace");
  ASSERT_EQ(*detectFormat(path("job")), "cluster");
  const std::string db = path("job.db");
  auto r = importPath(path("job"), db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(r->runs.size(), 2u);
  EXPECT_EQ(q(db, "SELECT count(*) FROM runs WHERE world_size=2"), 2);
  EXPECT_EQ(qs(db, "SELECT group_concat(rank) FROM (SELECT rank FROM runs ORDER BY rank)"), "0,1");
  EXPECT_EQ(q(db, "SELECT count(*) FROM op_events"), 2);
}

TEST_F(ImportTest, BadInputIsOneLineAndLeavesNoFile) {
  expectRefused(path("missing.json"), "no such file");
  expectRefused(write("text.json", "hello"), "not JSON");
  expectRefused(write("string.json", "\"traceEvents\""), "string.json: byte 0: not JSON (expected { or [)");
  expectRefused(write("empty.json", "   "), "empty file");
  // A colon missing inside the second event: the message names the file and the event's byte.
  const std::string bad = R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}, {"ph" "X"}]})";
  const std::string f = write("malformed.json", bad);
  expectRefused(f, f + ": byte " + std::to_string(bad.find("{\"ph\" \"X\"}")) + ": malformed event");
  expectRefused(write("cut.json", R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}, {"ph": "X", "na)"),
                "the JSON ends early");
  // A gzip file cut in half.
  const std::string big = [] {
    std::string s = R"({"traceEvents": [)";
    for (int i = 0; i < 20000; ++i) {
      s += (i ? "," : "") + std::string(R"({"ph": "X", "cat": "cpu_op", "name": "op)") + std::to_string(i * 7919 % 100003) +
           R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(i * 10) + R"(, "dur": 5})";
    }
    return s + "]}";
  }();
  const std::string gz = writeGz("whole.json.gz", big);
  std::ifstream in(gz, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  expectRefused(write("half.json.gz", bytes.substr(0, bytes.size() / 2)), "truncated");
  // torch_npu: a CSV without a needed column; a folder without its trace.
  write("nocol_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", "[]");
  write("nocol_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv", "Component,Total Allocated(MB)\nPTA,1\n");
  expectRefused(path("nocol_ascend_pt"), "memory_record.csv: line 1: no column 'Timestamp(us)'");
  // Megabytes whose bytes do not fit 64 bits (fuzz_npu_folder's find: 1.7e15 MB): refused.
  const std::string header =
      "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n";
  write("hugemb_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", "[]");
  write("hugemb_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv",
        header + "PTA,1000.0\t,2,2,,,NPU:0\nPTA,1001.0\t,1736408883673932.92,2,,,NPU:0\n");
  expectRefused(path("hugemb_ascend_pt"),
                "memory_record.csv: line 3: Total Allocated(MB) '1736408883673932.92' is out of range "
                "(expected megabytes below 8.8e12)");
  write("infmb_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", "[]");
  write("infmb_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv", header + "PTA,1000.0\t,2,inf,,,NPU:0\n");
  expectRefused(path("infmb_ascend_pt"), "memory_record.csv: line 2: Total Reserved(MB) 'inf' is out of range");
  write("notrace_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", "Name\n");
  expectRefused(path("notrace_ascend_pt"), "kernel_details.csv: line 1: no column 'Type'");
  // Only a step_trace_time.csv without rows (and no communication.json): nothing to import.
  write("empty_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "Step\n");
  expectRefused(path("empty_ascend_pt"), "empty_ascend_pt: no host ops, device tasks or memory samples in the trace");
  write("nothing/readme.md", "x");
  expectRefused(path("nothing"), "no trace in this folder");
  expectRefused(write("noevents.json", R"({"traceEvents": []})"), "no host ops, device tasks or memory samples");
}

TEST_F(ImportTest, CancelLeavesNoRun) {
  Options o;
  o.progress = [](int64_t, int64_t) { return false; };
  const std::string db = path("c.db");
  auto r = importPath(kAscend, db, o);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("cancelled"), std::string::npos);
  EXPECT_FALSE(exists(db));
}


TEST_F(ImportTest, ChromeExportOfAnImportedRunReimportsToTheSameOpsAndTasks) {
  for (const std::string& source : {kAscend, kKineto}) {
    const std::string a = path("a.db"), b = path("b.db"), json = path("a.json");
    std::remove(a.c_str());
    std::remove(b.c_str());
    ASSERT_TRUE(importPath(source, a).isOk());
    auto reader = TraceReader::open(a);
    ASSERT_TRUE(reader.isOk());
    auto exported = exportChromeTrace(**reader, json);
    ASSERT_TRUE(exported.isOk()) << exported.status().message();
    auto again = importPath(json, b);
    ASSERT_TRUE(again.isOk()) << again.status().message();
    const std::string t0 = "(SELECT min(m) FROM (SELECT min(start_ns) m FROM op_events UNION ALL"
                           " SELECT min(start_ns) FROM device_tasks))";
    const std::string ops = "SELECT name, start_ns - " + t0 + ", dur_ns, depth, coalesce(seq_nr, -1), is_backward,"
                            " coalesce(input_shapes, ''), coalesce(step, -1),"
                            " (SELECT p.name FROM ops p WHERE p.id = o.parent_id) FROM ops o"
                            " ORDER BY start_ns - " + t0 + ", depth, name";
    const std::string tasks = "SELECT n.value, y.value, t.device, t.stream, t.start_ns - " + t0 + ", t.dur_ns,"
                              " coalesce(t.bytes, -1), coalesce(t.step, -1), coalesce(o.name, ''),"
                              " coalesce(o.start_ns - " + t0 + ", -1)"
                              " FROM device_tasks t JOIN strings n ON n.id=t.name_id JOIN strings y ON y.id=t.type_id"
                              " LEFT JOIN op_events o2 ON o2.id=t.op_id LEFT JOIN ops o ON o.id=t.op_id"
                              " ORDER BY t.start_ns, n.value";
    EXPECT_EQ(rows(a, ops), rows(b, ops)) << source;
    EXPECT_EQ(rows(a, tasks), rows(b, tasks)) << source;
    EXPECT_EQ(rows(a, "SELECT ts_ns - " + t0 + ", device, allocated, reserved FROM memory ORDER BY 1"),
              rows(b, "SELECT ts_ns - " + t0 + ", device, allocated, reserved FROM memory ORDER BY 1"));
    EXPECT_EQ(q(a, "SELECT wall_start_ns - started_ns + " + t0 + " FROM runs"),
              q(b, "SELECT wall_start_ns - started_ns + " + t0 + " FROM runs")) << "the same wall clock";
  }
}

}  // namespace
}  // namespace npuscope::import

namespace npuscope::import {
namespace {

using namespace npuscope::import::test;

// Two known runs: A's aten::mm takes 100 us twice, B's 150 us twice; aten::relu only in A,
// aten::gelu only in B; B's kernel is twice as long; steps of 1000 and 1500 us.
TEST_F(ImportTest, PerfCompareOfTwoKnownRuns) {
  auto trace = [&](const std::string& name, int mm_us, const std::string& only, int kernel_us, int step_us) {
    std::string s = R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": )" +
                    std::to_string(step_us) + R"(},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": )" + std::to_string(mm_us) + R"(},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 400, "dur": )" + std::to_string(mm_us) + R"(},
      {"ph": "X", "cat": "cpu_op", "name": ")" + only + R"(", "pid": 1, "tid": 1, "ts": 800, "dur": 20},
      {"ph": "X", "cat": "kernel", "name": "gemm_7", "pid": 0, "tid": 7, "ts": 20, "dur": )" + std::to_string(kernel_us) +
                    R"(, "args": {"device": 0, "stream": 7, "External id": 999}}
    ]})";
    return write(name, s);
  };
  const std::string a = path("pa.db"), b = path("pb.db");
  ASSERT_TRUE(importPath(trace("a.json", 100, "aten::relu", 50, 1000), a).isOk());
  ASSERT_TRUE(importPath(trace("b.json", 150, "aten::gelu", 100, 1500), b).isOk());
  EXPECT_EQ(q(a, "SELECT count(op_id) FROM device_tasks"), 0) << "External id 999 names no op";
  auto ra = TraceReader::open(a);
  auto rb = TraceReader::open(b);
  ASSERT_TRUE(ra.isOk() && rb.isOk());
  auto res = comparePerf(**ra, 1, **rb, 1);
  ASSERT_TRUE(res.isOk()) << res.status().message();
  auto find = [](const std::vector<PerfRow>& rows, const std::string& n) -> const PerfRow* {
    for (const PerfRow& r : rows) {
      if (r.name == n) return &r;
    }
    return nullptr;
  };
  const PerfRow* mm = find(res->host, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->a.calls, 2);
  EXPECT_EQ(mm->a.total_ns, 200000);
  EXPECT_EQ(mm->b.total_ns, 300000);
  EXPECT_EQ(mm->b.max_ns, 150000);
  EXPECT_EQ(mm->diffNs(), 100000);
  EXPECT_DOUBLE_EQ(mm->ratio(), 1.5);
  ASSERT_NE(find(res->host, "aten::relu"), nullptr);
  EXPECT_TRUE(find(res->host, "aten::relu")->onlyA());
  EXPECT_TRUE(find(res->host, "aten::gelu")->onlyB());
  // Largest difference first: the step annotation (500 us), then aten::mm (100 us).
  EXPECT_EQ(res->host[0].name, "ProfilerStep#0");
  EXPECT_EQ(res->host[1].name, "aten::mm");
  // Device tasks by name without the instance number.
  ASSERT_EQ(res->device.size(), 1u);
  EXPECT_EQ(res->device[0].name, "gemm");
  EXPECT_DOUBLE_EQ(res->device[0].ratio(), 2.0);
  EXPECT_EQ(res->device_a, "real");
  ASSERT_EQ(res->steps.size(), 1u);
  EXPECT_EQ(res->steps[0].dur_a, 1000000);
  EXPECT_EQ(res->steps[0].dur_b, 1500000);
  EXPECT_EQ(taskGroupName("hcom_allReduce__586_0_1"), "hcom_allReduce_");
  EXPECT_EQ(taskGroupName("trans_TransData_12"), "trans_TransData");
  EXPECT_EQ(taskGroupName("Kernel"), "Kernel");
  EXPECT_EQ(taskGroupName("123"), "123");
  // Tasks with an op type compare by it; generic types fall back to the name.
  EXPECT_EQ(taskCompareKey("Conv2D1", "Conv2D"), "Conv2D");
  EXPECT_EQ(taskCompareKey("Conv2D4", "Conv2D"), "Conv2D");
  EXPECT_EQ(taskCompareKey("trans_TransData_12", "AI_CORE"), "trans_TransData");
  EXPECT_EQ(taskCompareKey("hcom_allReduce__586_0_1", "HCCL"), "hcom_allReduce_");
  EXPECT_EQ(taskCompareKey("gemm_7", "kernel"), "gemm");
}

// The real torch_npu sample against itself: its device rows are the op types of
// kernel_details.csv (TransData 57 tasks, MatMulV2 8: counted with Python from the CSV).
TEST_F(ImportTest, PerfCompareGroupsTorchNpuTasksByOpType) {
  const std::string db = path("self.db");
  ASSERT_TRUE(importPath(std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt", db).isOk());
  auto r = TraceReader::open(db);
  ASSERT_TRUE(r.isOk());
  auto res = comparePerf(**r, 1, **r, 1);
  ASSERT_TRUE(res.isOk()) << res.status().message();
  std::map<std::string, int64_t> calls;
  for (const PerfRow& row : res->device) {
    calls[row.name] = row.a.calls;
    EXPECT_EQ(row.a.total_ns, row.b.total_ns);
  }
  EXPECT_EQ(calls["TransData"], 57);
  EXPECT_EQ(calls["MatMulV2"], 8);
  EXPECT_EQ(calls.count("Conv2D1"), 0u) << "instances of an op type share its row";
}

}  // namespace
}  // namespace npuscope::import

namespace npuscope::import {
namespace {

// torch_npu's operator_memory.csv becomes memory blocks owned by the allocating op's name
// (counted with Python's csv module from the sample: 184 rows, 24 without a release time holding
// 258711.0 KB, the largest aten::mm's 147456.5 KB, never released).
TEST_F(ImportTest, OperatorMemoryBecomesMemoryBlocks) {
  const std::string db = path("opmem.db");
  auto r = importPath(std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt", db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).memory_blocks, 184);
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto blocks = (*reader)->memoryBlocks(1);
  ASSERT_TRUE(blocks.isOk());
  ASSERT_EQ(blocks->size(), 184u);
  int64_t live = 0, live_bytes = 0;
  const MemoryBlockRecord* largest = &blocks->front();
  for (const MemoryBlockRecord& b : *blocks) {
    if (b.free_seq < 0) ++live, live_bytes += b.size;
    if (b.size > largest->size) largest = &b;
    EXPECT_GT(b.alloc_seq, 0);
    if (b.free_seq >= 0) {
      EXPECT_GT(b.free_seq, b.alloc_seq);
    }
  }
  EXPECT_EQ(live, 24);
  EXPECT_EQ(live_bytes, 258711 * 1024);
  EXPECT_EQ(largest->owner, "aten::mm");
  EXPECT_EQ(largest->size, 147456 * 1024 + 512);
  EXPECT_LT(largest->free_seq, 0);
  // The live set at the end is the never-released blocks.
  const LiveSet end = liveAtSeq(*blocks, 0, INT64_MAX - 1);
  EXPECT_EQ(end.allocated, live_bytes);
}

// npu_module_mem.csv of the real Qwen3 export: 45 samples of 77 components, four of which ever
// reserve anything. Their highest figures, read off the file with awk: APP 10372 MB, HCCL
// 1241.69921875, SLOG 158.65234375, RUNTIME 58.24609375 (constant over the window).
TEST_F(ImportTest, NpuModuleMemBecomesMemoryByComponent) {
  const std::string db = path("modmem.db");
  auto r = importPath(std::string(NPUSCOPE_TRACES) + "/ascend_qwen3_rank0_ascend_pt", db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->runs.at(0).memory_components, 4 * 45);
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto rows = (*reader)->memoryComponents(1);
  ASSERT_TRUE(rows.isOk()) << rows.status().message();
  ASSERT_EQ(rows->size(), 180u);
  const std::vector<DeviceComponents> peaks = componentPeaks(*rows);
  ASSERT_EQ(peaks.size(), 1u);
  ASSERT_EQ(peaks[0].components.size(), 4u);
  auto mb = [](double v) { return static_cast<int64_t>(v * 1048576.0 + 0.5); };
  const std::pair<const char*, int64_t> expected[] = {
      {"APP", mb(10372.0)}, {"HCCL", mb(1241.69921875)}, {"SLOG", mb(158.65234375)}, {"RUNTIME", mb(58.24609375)}};
  int64_t sum_of_peaks = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(peaks[0].components[i].component, expected[i].first);
    EXPECT_EQ(peaks[0].components[i].peak, expected[i].second) << expected[i].first;
    sum_of_peaks += expected[i].second;
  }
  EXPECT_LE(peaks[0].total_peak, sum_of_peaks);
  EXPECT_GE(peaks[0].total_peak, mb(10372.0));
  int64_t at_total = 0;
  for (const ComponentPeak& c : peaks[0].components) at_total += c.at_total_peak;
  EXPECT_EQ(at_total, peaks[0].total_peak);
  // A row whose reservation is not a size is refused with its line.
  const std::string bad_folder = path("bad_ascend_pt/ASCEND_PROFILER_OUTPUT");
  ASSERT_EQ(std::system(("mkdir -p '" + bad_folder + "'").c_str()), 0);
  {
    std::ofstream f(bad_folder + "/npu_module_mem.csv");
    f << "Component,Timestamp(us),Total Reserved(MB),Device\nAPP,12.5\t,1e300,NPU:0\n";
  }
  {
    std::ofstream f(bad_folder + "/step_trace_time.csv");
    f << "Step,Computing\n1,10\n";
  }
  auto bad = importPath(path("bad_ascend_pt"), path("bad.db"));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("npu_module_mem.csv: line 2: Total Reserved(MB) '1e300' is out of range"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace npuscope::import
