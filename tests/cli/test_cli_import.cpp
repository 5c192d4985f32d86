// npuscope import / report / compare --perf on imported traces, as a user runs them.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_run.h"

namespace {

const std::string kAscend = std::string(NPUSCOPE_TRACES) + "/ascend_alexnet_rank0_ascend_pt";

TEST(CliImport, TorchNpuFolderReportsAndComparesWithItself) {
  const std::string db = scratchPath("npu.db");
  CliRun r = run("import -q '" + kAscend + "' --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("1885 host ops, 539 device tasks (537 linked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("import: 1282 Python stack frames (python_function) skipped"), std::string::npos) << r.out;

  r = run("report " + db + " --top 5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("imported from torch_npu: " + kAscend + "  (rank 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Device tasks by total time, top 5 of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device (real) busy"), std::string::npos) << r.out;

  r = run("report " + db + " --json", false);
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["run"]["source"], "torch_npu");
  EXPECT_EQ(j["steps_device"], "real");
  int64_t tasks = 0;
  for (const auto& t : j["device_tasks"]) tasks += t["calls"].get<int64_t>();
  EXPECT_EQ(tasks, 539);

  // The same trace twice in one file: every name on both sides, every ratio 1.
  ASSERT_EQ(run("import -q '" + kAscend + "' --db " + db).exit_code, 0);
  r = run("compare --perf " + db + " " + db + " --top 3 --csv " + db + ".csv");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("mean step A 155.986ms, B 155.986ms, B / A 1.00"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 names only in A, 0 only in B"), std::string::npos) << r.out;
  std::ifstream csv(db + ".csv");
  std::string line;
  int rows = 0, ones = 0;
  std::getline(csv, line);
  EXPECT_EQ(line, "kind,name,calls_a,total_a_ns,avg_a_ns,max_a_ns,calls_b,total_b_ns,avg_b_ns,max_b_ns,diff_ns,ratio");
  while (std::getline(csv, line)) {
    ++rows;
    ones += line.size() > 2 && line.substr(line.size() - 2) == ",1";
  }
  EXPECT_GT(rows, 200);
  EXPECT_EQ(ones, rows) << "every row's ratio is 1";
}

// The real Qwen3 export's memory as a user reads it: the op allocations of operator_memory.csv
// (the allocator's own peak from memory_record.csv beside them) and each component of
// npu_module_mem.csv, in report's text and JSON and in `npuscope memory`.
TEST(CliImport, QwenMemoryByOpAndByComponent) {
  const std::string db = scratchPath("qwen3_memory.db");
  CliRun r = run("import -q '" + std::string(NPUSCOPE_TRACES) + "/ascend_qwen3_rank0_ascend_pt' --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("3103 operator allocations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("180 samples of device memory by component"), std::string::npos) << r.out;
  r = run("report " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("the allocator's own peak was 10.04 GiB allocated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Device memory by component (npu_module_mem):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("11.55 GiB reserved by the device software at its highest"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("APP             10.13 GiB    10.13 GiB"), std::string::npos) << r.out;
  r = run("report " + db + " --json", false);
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["memory_components"].size(), 1u);
  const auto& c = j["memory_components"][0]["components"];
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0]["component"], "APP");
  EXPECT_EQ(c[0]["peak"], int64_t{10372} * 1048576);
  EXPECT_EQ(c[1]["component"], "HCCL");
  EXPECT_EQ(c[1]["peak"], static_cast<int64_t>(1241.69921875 * 1048576));
  EXPECT_GT(j["memory"][0]["pool_peak_allocated"].get<int64_t>(), j["memory"][0]["peak_allocated"].get<int64_t>());
  r = run("memory " + db + " --top 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("npu::npu_fusion_attention_grad"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HCCL             1.21 GiB     1.21 GiB"), std::string::npos) << r.out;
}

// A job of CSV-only rank folders (the real Qwen3 rank 0, and a copy of it labelled rank 1 in its
// profiler_info, as a second rank of the same job would be): imported as one run per rank, and
// report --cluster prints their step breakdown from the device tasks.
TEST(CliImport, CsvOnlyRankFoldersImportAsAJob) {
  // The real 4-rank Qwen3 job (TP1 PP2 DP2): ranks 0 and 2 kept kernel_details.csv, ranks 1 and
  // 3 only step_trace_time.csv and communication.json.
  const std::string dir = scratchPath("qwen3_job");
  std::string copy = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  for (const char* rank : {"0", "1", "2", "3"}) {
    copy += std::string(" && cp -r '") + NPUSCOPE_TRACES + "/ascend_qwen3_rank" + rank + "_ascend_pt' '" + dir + "/rank_" +
            rank + "_ascend_pt'";
  }
  ASSERT_EQ(std::system(copy.c_str()), 0);
  const std::string db = scratchPath("qwen3_job.db");
  std::remove(db.c_str());
  CliRun r = run("import '" + dir + "' --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* rank : {"0", "1", "2", "3"}) EXPECT_NE(r.out.find("rank " + std::string(rank) + "  torch_npu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 host ops, 2463 device tasks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 host ops, 2587 device tasks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("15 collectives from communication.json"), std::string::npos) << r.out;
  r = run("report --cluster " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("4 rank(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Step trace time per rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: no kernels in its folder; its step breakdown is the export's own step_trace_time.csv"),
            std::string::npos) << r.out;
  // Step 13 of each rank equals its export's own step_trace_time.csv: ranks 0 and 2 recomputed
  // from their kernels, ranks 1 and 3 read from the CSV (Computing, Communication(Not
  // Overlapped), Overlapped, Communication, Free, Stage, Preparing in ms).
  for (const char* row : {"    13     0     231.290        420.174       0.000        420.174    158.558    810.022",
                          "    13     1     230.904        441.708       0.000        441.708    136.820    809.432      0.205",
                          "    13     2     400.448        277.650       0.000        277.650    131.705    809.803",
                          "    13     3     401.132        261.498       0.000        261.498    147.520    810.150      0.279"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
}

// `npuscope calibrate` on the real Qwen3 export: every kernel read (2463), the compute kernels'
// time equal to the export's own step_trace_time.csv Computing (231290.1 us), MatMulV3's 280
// calls (counted with Python's csv module), the uncosted share stated; bad input is one line.
TEST(CliCalibrate, QwenKernelsAgainstTheModel) {
  const std::string qwen3 = std::string(NPUSCOPE_TRACES) + "/ascend_qwen3_rank0_ascend_pt";
  CliRun r = run("calibrate " + qwen3);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("kernel_details.csv: 2463 kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of the 231290.1 us of compute kernels"), std::string::npos) << r.out;
  r = run("calibrate --json " + qwen3 + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv", false);
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["compute_us"].get<double>(), 231290.1, 0.01);
  int64_t matmul = -1;
  double share = 0;
  for (const auto& t : j["types"]) {
    if (t["type"] == "MatMulV3") matmul = t["calls"];
    share += t["share"].get<double>();
    EXPECT_GT(t["geomean"].get<double>(), 0);
  }
  EXPECT_EQ(matmul, 280);
  EXPECT_NEAR(share + j["uncosted_share"].get<double>(), 1.0, 1e-9);
  // The model's stated accuracy on this LLM step (docs/device.md): every type with >= 1 % of
  // the time within 0.77-1.3x, geometric sd <= x1.6, <= 5 % uncosted, the step's compute
  // time within 25 %.
  for (const auto& t : j["types"]) {
    if (t["share"].get<double>() < 0.01) continue;
    EXPECT_GE(t["geomean"].get<double>(), 0.77) << t["type"];
    EXPECT_LE(t["geomean"].get<double>(), 1.3) << t["type"];
  }
  EXPECT_TRUE(j["types_outside"].empty()) << j["types_outside"].dump();
  EXPECT_LE(j["geometric_sd"].get<double>(), 1.6);
  EXPECT_LE(j["uncosted_share"].get<double>(), 0.05);
  EXPECT_NEAR(j["predicted_compute_ratio"].get<double>(), 1.0, 0.25);
  // Rank 2 of the same job (the last pipeline stage: the output layer and the loss over a
  // 151,936-word vocabulary), which the parameters were not fitted on but for its FRACTAL_NZ
  // conversions: the same bounds overall; the types outside are the two whose 2.5 GB operands
  // exceed the L2 cache (docs/device.md, "remaining known biases").
  r = run("calibrate --json " + std::string(NPUSCOPE_TRACES) + "/ascend_qwen3_rank2_ascend_pt", false);
  ASSERT_EQ(r.exit_code, 0);
  const auto j2 = nlohmann::json::parse(r.out);
  EXPECT_LE(j2["geometric_sd"].get<double>(), 1.6);
  EXPECT_LE(j2["uncosted_share"].get<double>(), 0.05);
  EXPECT_NEAR(j2["predicted_compute_ratio"].get<double>(), 1.0, 0.25);
  for (const auto& t : j2["types_outside"]) EXPECT_TRUE(t == "Exp" || t == "ArgMaxWithValue") << t;

  r = run("calibrate " + scratchPath("nothing_here"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("no such file, or not a torch_npu *_ascend_pt folder"), std::string::npos) << r.out;
  const std::string bad = scratchPath("kd.csv");
  std::ofstream(bad) << "Type,Duration(us)\nAdd,3\n";
  r = run("calibrate " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("no column 'Input Shapes' (calibrate needs the kernels' shapes)"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(CliImport, BadPathIsOneLine) {
  const CliRun r = run("import /nonexistent/trace.json --db " + scratchPath("x.db"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "npuscope: error: /nonexistent/trace.json: no such file or folder\n");
}

// A ~300 MB Kineto-shaped trace: seconds of reading and writing.
void writeBigTrace(const std::string& json) {
  std::ofstream out(json);
  out << "{\"traceEvents\": [\n";
  const std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.5, "dur": 0.5,)"
                         R"( "args": {"Input Dims": [[64, 1024], [64, 1024], []], "Input type": ["float", "float", "Scalar"]}},)";
  std::string block;
  for (int i = 0; i < 4096; ++i) block += ev + "\n";
  for (int i = 0; i < 420; ++i) out << block;
  out << ev.substr(0, ev.size() - 1) << "]}\n";
}

// Starts `npuscope import -q JSON --db DB` with its phase lines on a pipe; returns the pid.
pid_t startImport(const std::string& json, const std::string& db, int* err_fd) {
  int err[2];
  if (pipe(err) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    setenv("NPUSCOPE_IMPORT_TRACE", "1", 1);
    execl(NPUSCOPE_CLI, NPUSCOPE_CLI, "import", "-q", json.c_str(), "--db", db.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err[1]);
  *err_fd = err[0];
  return pid;
}

// Reads the child's stderr into `text` until it holds `what` (or the pipe closes).
bool waitFor(int fd, const std::string& what, std::string* text) {
  char buf[256];
  while (text->find(what) == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    text->append(buf, static_cast<size_t>(n));
  }
  return true;
}

// Ctrl-C while a large trace is read: exit 130 at once, one line, no trace file.
TEST(CliImport, InterruptLeavesNoFile) {
  const std::string json = scratchPath("big.json"), db = scratchPath("big.db");
  writeBigTrace(json);
  int err = -1;
  const pid_t pid = startImport(json, db, &err);
  ASSERT_GT(pid, 0);
  // Wait for the import to start reading (its first phase line), then interrupt it.
  std::string text;
  ASSERT_TRUE(waitFor(err, "start", &text)) << text;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  waitFor(err, "\x01", &text);  // to the end
  int status = 0;
  waitpid(pid, &status, 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 130) << text;
  EXPECT_LE(secs, 2.0);
  EXPECT_NE(text.find("npuscope: error: " + json + ": import interrupted"), std::string::npos) << text;
  struct stat st {};
  EXPECT_NE(::stat(db.c_str(), &st), 0) << "no trace file";
  std::remove(json.c_str());
}

}  // namespace

namespace {

// SIGKILL while the run is being written: the file stays consistent, and the next import into
// it ends the killed run failed (its process is gone) and adds its own.
TEST(CliImport, KilledWhileWritingLeavesAConsistentFile) {
  const std::string json = scratchPath("kill.json"), db = scratchPath("kill.db");
  writeBigTrace(json);
  int err = -1;
  const pid_t pid = startImport(json, db, &err);
  ASSERT_GT(pid, 0);
  std::string text;
  ASSERT_TRUE(waitFor(err, "nested", &text)) << text;  // reading done; the writer has begun
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(err);
  std::remove(json.c_str());
  ASSERT_TRUE(WIFSIGNALED(status)) << text;
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs WHERE id=1"), "running");
  const CliRun r = run("import -q '" + kAscend + "' --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs WHERE id=1"), "failed");
  EXPECT_NE(sqlText(db, "SELECT results_json FROM runs WHERE id=1").find("ended without ending the run"), std::string::npos);
  EXPECT_EQ(sqlText(db, "SELECT status FROM runs WHERE id=2"), "completed");
  EXPECT_EQ(sqlText(db, "PRAGMA integrity_check"), "ok");
}

}  // namespace
