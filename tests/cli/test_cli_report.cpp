// `npuscope report`, `export` and `ops` end to end on recorded synthetic runs: the figures are
// checked against the trace file itself (SQL over op_events), errors are one line + exit 1, and
// a file that is not ours is never touched.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_run.h"

namespace {


std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One recorded run shared by the tests of this file (recording takes a few seconds).
const std::string& recordedDb() {
  static const std::string db = [] {
    const std::string p = scratchPath("report.db");
    CliRun r = run("train --dataset synthetic --model cnn --steps 12 --seed 5 --db " + p);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("recorded         run 1 in " + p), std::string::npos) << r.out;
    return p;
  }();
  return db;
}

// `--version` names the schema of the files this build writes: the newest migration of
// store/schema/, and the user_version of the file the report tests recorded.
TEST(CliVersion, NamesTheTraceSchemaTheBuildWrites) {
  int newest = 0;
  for (const auto& e : std::filesystem::directory_iterator(NPUSCOPE_SCHEMA_DIR)) {
    newest = std::max(newest, std::atoi(e.path().filename().string().c_str()));
  }
  ASSERT_GE(newest, 8);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(recordedDb().c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), newest);
  sqlite3_finalize(st);
  sqlite3_close(db);
  CliRun r = run("--version");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(trace schema " + std::to_string(newest) + ","), std::string::npos) << r.out;
}

TEST(CliReport, TextReportShowsOpsStepsAndMemory) {
  CliRun r = run("report " + recordedDb());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* expect : {"run 1  train  cnn", "Operators by self time, top 20 of", "aten::convolution",
                             "Self CPU time total:", "Steps: 12 recorded", "step time      mean",
                             "(measured: the emulator's CPU running every op)",
                             "predicted on a real npu (model, task queue on): median step", "Overflow events: 0", "Peak memory:", "npu:0  allocated"}) {
    EXPECT_NE(r.out.find(expect), std::string::npos) << "missing \"" << expect << "\" in\n" << r.out;
  }
  EXPECT_EQ(r.out.find("is damaged"), std::string::npos) << r.out;  // a sound file
}

TEST(CliReport, JsonFiguresMatchTheFile) {
  const std::string& db = recordedDb();
  CliRun r = run("report --json --top 0 " + db, false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["damage"].is_array() && j["damage"].empty()) << j["damage"];  // a sound file
  EXPECT_EQ(j["op_count"].get<int64_t>(), sqlInt(db, "SELECT count(*) FROM op_events WHERE run_id=1"));
  EXPECT_EQ(j["ops"].size(), static_cast<size_t>(sqlInt(db, "SELECT count(DISTINCT name_id) FROM op_events WHERE run_id=1")));
  int64_t self = 0, calls = 0;
  for (const auto& op : j["ops"]) {
    self += op["self_ns"].get<int64_t>();
    calls += op["calls"].get<int64_t>();
  }
  // Self times partition the time of the top-level ops.
  EXPECT_EQ(self, sqlInt(db, "SELECT sum(dur_ns) FROM op_events WHERE run_id=1 AND parent_id IS NULL"));
  EXPECT_EQ(calls, j["op_count"].get<int64_t>());
  EXPECT_EQ(j["steps"]["recorded"].get<int64_t>(), 12);
  EXPECT_EQ(j["run"]["config"]["model"], "cnn");
  EXPECT_EQ(j["run"]["results"]["steps"].get<int64_t>(), 12);
}

TEST(CliReport, CsvHasOneRowPerOpName) {
  const std::string& db = recordedDb();
  CliRun r = run("report --csv --top 0 " + db, false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("Name,Self CPU %,Self CPU (us)", 0), 0u) << r.out.substr(0, 200);
  const int64_t lines = std::count(r.out.begin(), r.out.end(), '\n');
  EXPECT_EQ(lines, 1 + sqlInt(db, "SELECT count(DISTINCT name_id) FROM op_events WHERE run_id=1"));
  CliRun shapes = run("report --csv --group-by-shape --top 5 " + db, false);
  ASSERT_EQ(shapes.exit_code, 0);
  EXPECT_EQ(shapes.out.rfind("Name,Input Shapes,", 0), 0u);
  EXPECT_EQ(std::count(shapes.out.begin(), shapes.out.end(), '\n'), 6);
}

TEST(CliExport, ChromeTraceAndCsvFiles) {
  const std::string& db = recordedDb();
  const std::string json = scratchPath("trace.json"), csv = scratchPath("ops.csv");
  CliRun r = run("export " + db + " --chrome " + json + " --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("12 steps"), std::string::npos) << r.out;
  const nlohmann::json trace = nlohmann::json::parse(slurp(json));
  int steps = 0;
  for (const auto& e : trace["traceEvents"]) steps += e.value("name", "").rfind("ProfilerStep#", 0) == 0;
  EXPECT_EQ(steps, 12);
  EXPECT_EQ(slurp(csv).rfind("Name,Self CPU %", 0), 0u);
}

// torch_npu's profiler folder of a recorded run: steps 3-5 only, read back by import with those
// steps; a bad step range or a range without steps is one line and exit 1, nothing written.
TEST(CliExport, AscendPtFolderOfSomeStepsImportsBack) {
  const std::string& db = recordedDb();
  const std::string dir = scratchPath("apt");
  std::filesystem::remove_all(dir);
  CliRun r = run("export " + db + " --ascend-pt " + dir + " --steps 3-5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("ascend_pt folder of run 1: 3 steps"), std::string::npos) << r.out;
  std::vector<std::filesystem::path> folders;
  for (const auto& e : std::filesystem::directory_iterator(dir)) folders.push_back(e.path());
  ASSERT_EQ(folders.size(), 1u);
  const std::string folder = folders[0].string();
  EXPECT_EQ(folder.substr(folder.size() - 10), "_ascend_pt");
  const nlohmann::json tv = nlohmann::json::parse(slurp(folder + "/ASCEND_PROFILER_OUTPUT/trace_view.json"));
  ASSERT_TRUE(tv.is_array());
  std::vector<std::string> steps;
  for (const auto& e : tv) {
    if (e.value("name", "").rfind("ProfilerStep#", 0) == 0) steps.push_back(e["name"]);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"}));
  const std::string back = scratchPath("apt_back.db");
  std::remove(back.c_str());
  CliRun imp = run("import " + folder + " --db " + back);
  ASSERT_EQ(imp.exit_code, 0) << imp.out;
  EXPECT_EQ(sqlInt(back, "SELECT count(*) FROM steps"), 3);
  EXPECT_EQ(sqlInt(back, "SELECT min(step) FROM steps"), 3);

  for (const char* bad : {"5-3", "x", "2-x"}) {
    CliRun b = run("export " + db + " --ascend-pt " + scratchPath("apt_bad") + " --steps " + std::string(bad));
    EXPECT_EQ(b.exit_code, 1) << bad;
    EXPECT_NE(b.out.find("--steps: expected N or FIRST-LAST"), std::string::npos) << b.out;
  }
  CliRun none = run("export " + db + " --ascend-pt " + scratchPath("apt_none") + " --steps 40-50");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("has no recorded step in 40..50"), std::string::npos) << none.out;
  EXPECT_EQ(std::count(none.out.begin(), none.out.end(), '\n'), 1) << none.out;
  EXPECT_FALSE(std::filesystem::exists(scratchPath("apt_none")));
}

TEST(CliOps, CoverageOfTheCnnStep) {
  CliRun r = run("ops --model cnn --batch-size 8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* expect : {"aten::convolution", "aten::max_pool2d_with_indices", "forward", "backward", "optimizer",
                             "npu kernel", "CPU kernel, zero-copy", "distinct ops:", "0 refused"}) {
    EXPECT_NE(r.out.find(expect), std::string::npos) << "missing \"" << expect << "\" in\n" << r.out;
  }
  // What a real torch_npu would do, per the shipped list (checked by hand in
  // analysis/data/torch_npu_ops_v2.0.1-5.0.0.txt: "aten::convolution<TAB>native",
  // "aten::_to_copy<TAB>composite").
  auto lineOf = [&](const std::string& op) {
    const size_t at = r.out.find("\n" + op + " ");
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(r.out.find("A real torch_npu"), std::string::npos) << r.out;
  const std::string conv = lineOf("aten::convolution");
  ASSERT_FALSE(conv.empty()) << r.out;
  EXPECT_EQ(conv.substr(conv.size() - 7), " native") << conv;
  const std::string to_copy = lineOf("aten::_to_copy");
  if (!to_copy.empty()) {
    EXPECT_EQ(to_copy.substr(to_copy.size() - 10), " composite") << to_copy;
  }
  EXPECT_NE(r.out.find("on a real device (torch_npu v2.0.1"), std::string::npos) << r.out;
  CliRun half = run("ops --model mlp --dtype float16 --batch-size 8");
  ASSERT_EQ(half.exit_code, 0) << half.out;
  EXPECT_NE(half.out.find("Half"), std::string::npos) << half.out;
  EXPECT_NE(half.out.find("fp16/bf16 computed in fp32, rounded"), std::string::npos) << half.out;
}

// Coverage of a run's own ops (a GPU trace before porting): a model calling torch.fft.rfft
// (aten::_fft_r2c: torch_npu 2.0.1 runs it on the host, "tocpu") and matrix_exp (no NPU kernel)
// beside a relu; each judged as the shipped list says, and the time not native stated.
TEST(CliOps, CoverageOfAnImportedTraceWithOpsARealDeviceLacks) {
  const std::string json = scratchPath("fft_model.pt.trace.json"), db = scratchPath("fft_model.db");
  {
    std::ofstream f(json);
    f << R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
      {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 10, "dur": 100},
      {"ph": "X", "cat": "cpu_op", "name": "aten::_fft_r2c", "pid": 1, "tid": 1, "ts": 200, "dur": 300},
      {"ph": "X", "cat": "cpu_op", "name": "aten::_fft_r2c", "pid": 1, "tid": 1, "ts": 520, "dur": 300},
      {"ph": "X", "cat": "cpu_op", "name": "aten::linalg_matrix_exp", "pid": 1, "tid": 1, "ts": 850, "dur": 100}
    ]})";
  }
  ASSERT_EQ(run("import " + json + " --db " + db).exit_code, 0);
  CliRun r = run("ops " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto lineOf = [&](const std::string& op) {
    const size_t at = r.out.find("\n" + op + " ");
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(lineOf("aten::relu").find(" native"), std::string::npos) << r.out;
  EXPECT_NE(lineOf("aten::_fft_r2c").find("       2 "), std::string::npos) << r.out;  // calls
  EXPECT_NE(lineOf("aten::_fft_r2c").find("host fallback"), std::string::npos) << r.out;
  EXPECT_NE(lineOf("aten::linalg_matrix_exp").find("no NPU kernel: fails"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 distinct operators on a real device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 host fallback, 1 native, 1 no NPU kernel"), std::string::npos) << r.out;
  // 700 of the 800 us of op self time (the step annotation's own 200 us included) is not native.
  EXPECT_NE(r.out.find("700.000us of self time (70.0%) is in ops a real device would not run natively"),
            std::string::npos) << r.out;
  CliRun csv = run("ops " + db + " --csv", false);
  ASSERT_EQ(csv.exit_code, 0) << csv.out;
  EXPECT_NE(csv.out.find("aten::_fft_r2c,2,600000,600000,host fallback"), std::string::npos) << csv.out;
}

// The advisor over a recorded O2 run whose first loss scale overflows: its skipped steps are the
// ones the file marks skipped; a clean O0 run of the same model has no finding.
TEST(CliAdvise, SkippedStepsOfARecordedRunAndACleanRun) {
  const std::string db = scratchPath("advise.db");
  ASSERT_EQ(run("train --dataset synthetic --model cnn --steps 12 --opt-level O2 --dynamic-init-scale 16777216 --db " +
                db).exit_code, 0);
  const int64_t skipped = sqlInt(db, "SELECT count(*) FROM steps WHERE skipped != 0");
  ASSERT_GT(skipped, 0);
  CliRun text = run("advise " + db);
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("[warning] " + std::to_string(skipped) + " of 12 steps skipped for overflow"),
            std::string::npos) << text.out;
  CliRun json = run("advise --json " + db);
  ASSERT_EQ(json.exit_code, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out.substr(json.out.find('{')));
  bool found = false;
  for (const auto& f : j["findings"]) {
    if (f["rule"] != "skipped_steps") continue;
    found = true;
    EXPECT_EQ(static_cast<int64_t>(f["steps"].size()), skipped);
  }
  EXPECT_TRUE(found) << json.out;
  // The fp32 CNN at batch 64 is clean: no skipped steps, and with the calibrated cost model its
  // predicted step is balanced (the device busy about 60 %), neither host- nor device-bound.
  CliRun clean = run("advise --json " + recordedDb());
  ASSERT_EQ(clean.exit_code, 0) << clean.out;
  const auto c = nlohmann::json::parse(clean.out.substr(clean.out.find('{')));
  EXPECT_EQ(c["findings"].size(), 0u) << clean.out;
  CliRun bad = run("advise /nonexistent/x.db");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("/nonexistent/x.db"), std::string::npos) << bad.out;
}

// The predicted npu step depends on the recorded ops alone, not on how fast this machine ran
// them: the same training recorded twice (other measured times) predicts the same, and the
// prediction is far from the emulator's measured step.
TEST(CliReport, PredictedStepIsTheSameForTheSameOps) {
  // The CNN under O2 (fp16 Cube ops, fp32 masters, loss scaling), recorded twice.
  const std::string files[2] = {scratchPath("report_o2_a.db"), scratchPath("report_o2_b.db")};
  for (const std::string& f : files) {
    ASSERT_EQ(run("train --dataset synthetic --model cnn --opt-level O2 --steps 12 --seed 5 --db " + f).exit_code, 0);
  }
  nlohmann::json p[2];
  int64_t measured[2];
  for (int i = 0; i < 2; ++i) {
    CliRun r = run("report --json " + files[i], false);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.contains("predicted")) << r.out;
    p[i] = j["predicted"];
    measured[i] = j["steps"]["p50_ns"].get<int64_t>();
  }
  EXPECT_GT(p[0]["kernels"].get<int64_t>(), 12 * 20);
  EXPECT_EQ(p[0]["steps"].get<int64_t>(), 12);
  for (const char* key : {"median_step_ns", "step_ns", "device_busy_ns", "host_wait_ns", "kernels", "syncs", "bound"}) {
    EXPECT_EQ(p[0][key], p[1][key]) << key;
  }
  EXPECT_NE(measured[0], measured[1]);  // the measured steps differ, as measured times do
  EXPECT_LT(p[0]["median_step_ns"].get<int64_t>(), measured[0]);
}

// The points where a real host waits for the device are recorded: each step copies its batch
// (images, labels) to the npu with blocking copies (op_events.host_sync), and with float-status
// overflow checks AMP reads the register once per step (an npu::get_float_status op).
TEST(CliReport, HostSyncPointsAreRecorded) {
  const std::string db = scratchPath("syncs.db");
  ASSERT_EQ(run("train --dataset synthetic --model cnn --opt-level O2 --overflow-check-by float_status --steps 3 --db " +
                db).exit_code, 0);
  for (int step = 1; step < 3; ++step) {  // step 0 also moves the model's weights to the npu
    const std::string where = " FROM op_events e JOIN strings s ON s.id = e.name_id WHERE e.step = " + std::to_string(step);
    EXPECT_EQ(sqlInt(db, "SELECT count(*)" + where + " AND e.host_sync = 1"), 2) << "step " << step;
    EXPECT_EQ(sqlInt(db, "SELECT count(*)" + where + " AND e.host_sync = 1 AND s.value = 'aten::_copy_from'"), 2);
    EXPECT_EQ(sqlInt(db, "SELECT count(*)" + where + " AND s.value = 'npu::get_float_status'"), 1) << "step " << step;
  }
  // Copies between npu tensors (O2's fp16 model and fp32 masters) are not sync points.
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM op_events e JOIN strings s ON s.id = e.name_id"
                       " WHERE s.value = 'aten::_copy_from' AND e.host_sync IS NULL AND e.step >= 0"), 0);
}

TEST(CliReport, TwoRunsInOneFile) {
  const std::string db = scratchPath("two.db");
  ASSERT_EQ(run("train --dataset synthetic --model mlp --steps 3 --db " + db).exit_code, 0);
  ASSERT_EQ(run("train --dataset synthetic --model cnn --steps 2 --db " + db).exit_code, 0);
  CliRun latest = run("report " + db);
  EXPECT_NE(latest.out.find("run 2  train  cnn"), std::string::npos) << latest.out;
  CliRun first = run("report --run 1 " + db);
  EXPECT_NE(first.out.find("run 1  train  mlp"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("Steps: 3 recorded"), std::string::npos) << first.out;
}

TEST(CliReport, BadInputIsOneClearLineAndNothingIsTouched) {
  const std::string junk = scratchPath("junk.db");
  {
    std::ofstream out(junk, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 7919) & 0xff));
  }
  const std::string before = slurp(junk);
  const std::string& db = recordedDb();
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"report /nonexistent/x.db", "/nonexistent/x.db"},
      {"report " + junk, junk + ": not an npuscope trace file"},
      {"report --run 99 " + db, "no run 99"},
      {"report --sort bogus " + db, "--sort: unknown sort key 'bogus'"},
      {"report --csv --json " + db, "--csv and --json exclude each other"},
      {"report " + db + " " + db, "report: one trace file expected, got 2 (several only with --cluster)"},
      {"report --job j1 " + db, "report: --job needs --cluster"},
      {"report --cluster /nonexistent/ranks", "/nonexistent/ranks: no such trace file or folder"},
      {"report --cluster " + db, "no run of a multi-rank job in 1 file(s)"},
      {"report --cluster --csv " + db, "--csv is not available"},
      {"report --cluster --slow-threshold -1 " + db, "--slow-threshold: expected a fraction >= 0"},
      {"export " + db, "export: nothing to do"},
      {"export " + db + " --chrome /nonexistent/dir/t.json", "/nonexistent/dir/t.json"},
      {"train --dataset synthetic --steps 2 --db " + junk, junk + ": not an npuscope trace file"},
      {"train --dataset synthetic --steps 2 --schedule wait=x --db " + scratchPath("s.db"), "--schedule"},
      {"ops --dtype float64", "--dtype 'float64': expected float32, float16 or bfloat16"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("npuscope: error: "), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
    // One error line, the last thing printed (train may have announced itself before it).
    const size_t first = r.out.find("npuscope: error: ");
    EXPECT_EQ(r.out.find("npuscope: error: ", first + 1), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find('\n', first), r.out.size() - 1) << "one line: " << c.args << "\n" << r.out;
  }
  EXPECT_EQ(slurp(junk), before) << "a file that is not ours was modified";
}


// A recorded file whose strings table a fuzzer's mutation damaged (it still opens): each command
// that names ops (report, ops, advise, export, compare --perf) prints what it can, then one
// warning per damage seen, last, and exits 0; the JSON report lists the damage; the file is only
// read.
TEST(CliReport, ADamagedFileIsReadWithAWarningLast) {
  const std::string damaged = scratchPath("damaged.db");
  std::filesystem::copy_file(std::string(NPUSCOPE_FUZZ_CORPUS) + "/trace_file/uaf-duplicate-string-id.db", damaged);
  const std::string before = slurp(damaged);
  const std::string warning = "npuscope: warning: " + damaged + " is damaged: its strings table ";
  for (const std::string& args : {"report " + damaged, "report --csv " + damaged, "ops " + damaged,
                                  "advise " + damaged, "export --csv " + scratchPath("damaged.csv") + " " + damaged,
                                  "compare --perf " + recordedDb() + " " + damaged}) {
    CliRun r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    const size_t at = r.out.find(warning);
    ASSERT_NE(at, std::string::npos) << args << "\n" << r.out;
    EXPECT_GT(at, 0u) << "the command's output comes first: " << args;
    EXPECT_NE(r.out.find("(check: sqlite3 " + damaged + " 'PRAGMA integrity_check')\n", at), std::string::npos) << r.out;
    const size_t last_line = r.out.rfind('\n', r.out.size() - 2);
    EXPECT_NE(r.out.find("npuscope: warning: ", last_line), std::string::npos) << "a warning is last: " << r.out;
  }
  CliRun j = run("report --json " + damaged, false);
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const nlohmann::json report = nlohmann::json::parse(j.out);
  ASSERT_FALSE(report["damage"].empty());
  EXPECT_EQ(report["damage"][0].get<std::string>().rfind("its strings table ", 0), 0u) << report["damage"];
  EXPECT_EQ(slurp(damaged), before) << "reading a damaged file changed it";
}

// Another process holds the file's write lock for longer than the writer waits (5 s).
TEST(CliTrain, LockedDatabaseIsNamedAndLeftConsistent) {
  const std::string db = scratchPath("locked.db");
  ASSERT_EQ(run("train --dataset synthetic --model mlp --steps 1 --db " + db).exit_code, 0);
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN EXCLUSIVE; INSERT INTO strings(value) VALUES ('held')", nullptr, nullptr, nullptr),
            SQLITE_OK);
  CliRun r = run("train --dataset synthetic --model mlp --steps 1 --db " + db);
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("npuscope: error: " + db + ": cannot start a run: database is locked"), std::string::npos)
      << r.out;
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM runs"), 1) << "the earlier run is still there";
  CliRun check = run("report " + db);
  EXPECT_EQ(check.exit_code, 0) << check.out;
}

}  // namespace
