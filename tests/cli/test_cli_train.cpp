// `npuscope train` end to end, as a user runs it: results printed, errors as one line + exit 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"

TEST(CliTrain, SyntheticRunLearnsAndReports) {
  CliRun r = run("train --dataset synthetic --model cnn --steps 40 --lr 0.05 --seed 3 --no-db");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("device           npu:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("steps            32"), std::string::npos) << r.out;  // 2048 / 64 = one epoch
  const auto pos = r.out.find("test accuracy    ");
  ASSERT_NE(pos, std::string::npos);
  const double acc = std::stod(r.out.substr(pos + 17));
  EXPECT_GT(acc, 0.5) << "the synthetic classes are separable; a working device learns them";
}

TEST(CliTrain, SameSeedSameResultOnNpuAndCpu) {
  CliRun a = run("train --dataset synthetic --model mlp --steps 10 --seed 7 --device npu:1 --no-db");
  CliRun b = run("train --dataset synthetic --model mlp --steps 10 --seed 7 --device cpu --no-db");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  auto loss = [](const std::string& s) { return s.substr(s.find("final loss"), 30); };
  EXPECT_EQ(loss(a.out), loss(b.out));
}

TEST(CliTrain, BadInputIsOneClearLineAndExitOne) {
  struct Case {
    const char* args;
    const char* expect;
  } cases[] = {
      {"train --model resnet9000", "unknown model 'resnet9000': expected one of mlp, cnn"},
      {"train --data /nonexistent", "/nonexistent/train-images-idx3-ubyte.gz: cannot open"},
      {"train --device npu:12 --dataset synthetic", "npu:12 does not exist"},
      {"train --device gpu:0 --dataset synthetic", "device 'gpu:0': expected npu, npu:N or N"},
      {"train --batch-size 0 --dataset synthetic", "--batch-size 0: expected at least 1"},
      {"train --dataset imagenet", "--dataset 'imagenet': expected fashion-mnist or synthetic"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(std::string("npuscope: error: ") + c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST(CliTrain, CorruptDatasetFileIsNamed) {
  const std::string dir = testing::TempDir() + "/bad_fmnist";
  std::system(("mkdir -p " + dir).c_str());
  std::ofstream(dir + "/train-images-idx3-ubyte.gz") << "this is not gzip idx";
  CliRun r = run("train --data " + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("train-images-idx3-ubyte.gz: not an IDX file"), std::string::npos) << r.out;
}

namespace {

double resultOf(const std::string& db, int64_t run, const std::string& key) {
  sqlite3* d = nullptr;
  sqlite3_open_v2(db.c_str(), &d, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT json_extract(results_json, '$." + key + "') FROM runs WHERE id = " + std::to_string(run);
  EXPECT_EQ(sqlite3_prepare_v2(d, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(d);
  double v = std::nan("");
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(d);
  return v;
}

}  // namespace

TEST(CliTrain, O2WithAnOverflowingScaleSkipsBacksOffAndRecordsIt) {
  const std::string db = scratchPath("o2.db");
  CliRun r = run("train --dataset synthetic --model cnn --steps 12 --opt-level O2 --optimizer adam --lr 1e-3"
                 " --dynamic-init-scale 16777216 --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("amp              O2, NpuFusedAdam"), std::string::npos) << r.out;
  const double skipped = resultOf(db, 1, "skipped_steps");
  EXPECT_GE(skipped, 1) << "2^24 overflows fp16 gradients: the first steps must be skipped\n" << r.out;
  EXPECT_LT(resultOf(db, 1, "final_loss_scale"), 16777216.0);
  CliRun rep = run("report " + db);
  EXPECT_NE(rep.out.find("backoff"), std::string::npos) << rep.out;
  EXPECT_EQ(rep.out.find("Overflow events: 0"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("skipped steps " + std::to_string(static_cast<int>(skipped))), std::string::npos) << rep.out;
}

// With float-status tracking, every skipped step names its first overflowing op, linked to a
// recorded op of that step and run in backward (2^24 overflows the fp16 gradients there), and the
// report counts the step time the skipped steps cost.
TEST(CliTrain, FloatStatusNamesEachOverflowStepsFirstOp) {
  const std::string db = scratchPath("first_op.db");
  CliRun r = run("train --dataset synthetic --model cnn --steps 8 --opt-level O2 --optimizer adam --lr 1e-3"
                 " --dynamic-init-scale 16777216 --overflow-check-by float_status --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const int skipped = static_cast<int>(resultOf(db, 1, "skipped_steps"));
  ASSERT_GE(skipped, 2) << r.out;
  CliRun js = run("report --json " + db, false);
  ASSERT_EQ(js.exit_code, 0) << js.out;
  const nlohmann::json j = nlohmann::json::parse(js.out);
  int linked = 0;
  for (const auto& e : j["overflow_events"]) {
    if (e["source"] != "first_op" || e["op_id"].is_null()) continue;
    ++linked;
    EXPECT_NE(e["detail"].get<std::string>().find("\"phase\": \"backward\""), std::string::npos) << e.dump();
    EXPECT_EQ(e["op_name"].get<std::string>().rfind("aten::", 0), 0u) << e.dump();
  }
  EXPECT_EQ(linked, skipped) << js.out;  // every skipped step overflowed, each in a recorded op
  EXPECT_GT(j["steps"]["skipped_ns"].get<int64_t>(), 0);
  CliRun rep = run("report " + db);
  EXPECT_NE(rep.out.find("of step time lost to skipped steps"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("first_op         aten::"), std::string::npos) << rep.out;
}

// A run saved after 4 steps and resumed for 4 more ends exactly where 8 uninterrupted steps end.
TEST(CliTrain, ResumeMatchesTheUninterruptedRunBitExactly) {
  const std::string db = scratchPath("resume.db"), ck = scratchPath("half.pt"), full = scratchPath("full.pt");
  const std::string common = " --dataset synthetic --model cnn --opt-level O2 --optimizer adam --lr 1e-3 --seed 11 --db " + db;
  ASSERT_EQ(run("train --steps 8 --save " + full + common).exit_code, 0);
  ASSERT_EQ(run("train --steps 4 --save " + ck + common).exit_code, 0);
  CliRun resumed = run("train --steps 4 --resume " + ck + common);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed after step 4"), std::string::npos) << resumed.out;
  EXPECT_EQ(resultOf(db, 3, "final_loss"), resultOf(db, 1, "final_loss"));
  EXPECT_EQ(resultOf(db, 3, "test_accuracy"), resultOf(db, 1, "test_accuracy"));
  EXPECT_EQ(resultOf(db, 3, "final_loss_scale"), resultOf(db, 1, "final_loss_scale"));

  CliRun inf = run("infer " + full + " --dataset synthetic");
  ASSERT_EQ(inf.exit_code, 0) << inf.out;
  const auto pos = inf.out.find("top-1 accuracy   ");
  ASSERT_NE(pos, std::string::npos) << inf.out;
  EXPECT_NEAR(std::stod(inf.out.substr(pos + 17)), resultOf(db, 1, "test_accuracy"), 5e-5)  // printed with 4 decimals
      << "infer evaluates the saved model as train did";
}

TEST(CliTrain, BadAmpAndOptimizerFlagsAreOneClearLine) {
  struct Case {
    const char* args;
    const char* expect;
  } cases[] = {
      {"train --dataset synthetic --opt-level O5", "O5"},
      {"train --dataset synthetic --optimizer sgdd", "--optimizer 'sgdd': expected one of sgd, adam"},
      {"train --dataset synthetic --loss-scale -3", "--loss-scale"},
      {"train --dataset synthetic --low-precision float8", "--low-precision 'float8': expected float16 or bfloat16"},
      {"train --dataset synthetic --opt-level O1 --keep-batchnorm-fp32 true", "keep_batchnorm_fp32"},
      {"train --dataset synthetic --resume /nonexistent/ck.pt", "/nonexistent/ck.pt.json: cannot open"},
      {"infer /nonexistent/ck.pt", "/nonexistent/ck.pt.json: cannot open"},
  };
  for (const auto& c : cases) {
    CliRun r = run(std::string(c.args) + " --no-db");
    if (std::string(c.args).rfind("infer", 0) == 0) r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("npuscope: error: "), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

// --nproc 2: two ranks, each on half of every batch, gradients averaged through the hccl
// backend. The mean of the ranks' losses at each step is the one-process loss on the whole batch
// (the parameters stay the same as one process's), every rank's file holds its rank, the job
// and the same collectives, and report --cluster reads them as one job.
TEST(CliTrain, NprocRanksTrainAsOneProcessOnTheWholeBatch) {
  const std::string one = scratchPath("nproc_one.db"), job = scratchPath("nproc_job.db");
  const std::string r0 = scratchPath("nproc_job.rank0.db"), r1 = scratchPath("nproc_job.rank1.db");
  for (const std::string& f : {one, job, r0, r1}) std::remove(f.c_str());
  const std::string args = "train --model mlp --dataset synthetic --steps 4 --batch-size 32 ";
  ASSERT_EQ(run(args + "--db " + one).exit_code, 0);
  const CliRun r = run(args + "--nproc 2 --db " + job);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("rank             1 of 2"), std::string::npos) << r.out;
  auto losses = [](const std::string& db) {
    std::vector<double> v;
    sqlite3* d = nullptr;
    sqlite3_open_v2(db.c_str(), &d, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(d, "SELECT loss FROM steps ORDER BY step", -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) v.push_back(sqlite3_column_double(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(d);
    return v;
  };
  const std::vector<double> whole = losses(one), a = losses(r0), b = losses(r1);
  ASSERT_EQ(whole.size(), 4u);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_NEAR((a[s] + b[s]) / 2, whole[s], 1e-5) << "step " << s;
    if (s > 0) {
      EXPECT_NE(a[s], b[s]) << "each rank has its own half of the batch";
    }
  }
  const std::string job_id = sqlText(r0, "SELECT job FROM runs");
  EXPECT_FALSE(job_id.empty());
  EXPECT_EQ(sqlText(r1, "SELECT job FROM runs"), job_id);
  for (int k = 0; k < 2; ++k) {
    const std::string f = k == 0 ? r0 : r1;
    EXPECT_EQ(sqlInt(f, "SELECT rank FROM runs"), k);
    EXPECT_EQ(sqlInt(f, "SELECT world_size FROM runs"), 2);
    // One coalesced gradient all-reduce per step (and AMP's overflow flag), all completed.
    EXPECT_GE(sqlInt(f, "SELECT count(*) FROM collectives WHERE kind = 'allreduce'"), 4);
    EXPECT_EQ(sqlInt(f, "SELECT count(*) FROM collectives WHERE end_ns IS NULL"), 0);
  }
  EXPECT_EQ(sqlText(r0, "SELECT group_concat(seq || kind || bytes) FROM collectives"),
            sqlText(r1, "SELECT group_concat(seq || kind || bytes) FROM collectives"));
  const CliRun c = run("report --cluster " + r0 + " " + r1);
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("cluster: job " + job_id + ", 2 rank(s)"), std::string::npos) << c.out;

  for (const auto& [bad, expect] :
       std::vector<std::pair<std::string, std::string>>{{"--nproc 2 --batch-size 31", "expected a multiple of --nproc 2"},
                                                        {"--nproc 0", "--nproc 0: expected 1 to 64 ranks"}}) {
    const CliRun e = run("train --model mlp --dataset synthetic --steps 1 --no-db " + bad);
    EXPECT_EQ(e.exit_code, 1) << e.out;
    EXPECT_NE(e.out.find("npuscope: error: "), std::string::npos) << e.out;
    EXPECT_NE(e.out.find(expect), std::string::npos) << e.out;
  }
}

// npuscope loads no libtorch: a report or import starts at once. The torch subcommands run in
// npuscope-torch, which npuscope becomes (same pid, so Ctrl-C and exit codes are the user's).
TEST(CliSplit, NpuscopeMapsNoTorchAndHandsTrainToNpuscopeTorch) {
  // The executable's libraries, as the loader resolves them.
  const CliRun ldd = [] {
    FILE* p = popen(("ldd " + std::string(NPUSCOPE_CLI) + " 2>&1").c_str(), "r");
    CliRun r{-1, ""};
    std::array<char, 4096> buf{};
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
    r.exit_code = pclose(p);
    return r;
  }();
  ASSERT_EQ(ldd.exit_code, 0) << ldd.out;
  EXPECT_NE(ldd.out.find("libsqlite3"), std::string::npos) << ldd.out;
  EXPECT_EQ(ldd.out.find("libtorch"), std::string::npos) << ldd.out;
  EXPECT_EQ(ldd.out.find("libc10"), std::string::npos) << ldd.out;

  // Its help lists the torch subcommands; theirs comes from npuscope-torch, with their options.
  const CliRun help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* sub : {"train", "infer", "ops", "calibrate", "report", "import"}) {
    EXPECT_NE(help.out.find(std::string("\n  ") + sub + " "), std::string::npos) << sub << "\n" << help.out;
  }
  const CliRun train_help = run("train --help");
  EXPECT_EQ(train_help.exit_code, 0) << train_help.out;
  EXPECT_NE(train_help.out.find("--opt-level"), std::string::npos) << train_help.out;
  // An unknown option is npuscope-torch's parse error, with CLI11's exit code.
  const CliRun bad = run("train --no-such-option");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--no-such-option"), std::string::npos) << bad.out;
}

TEST(CliSplit, AMissingNpuscopeTorchIsOneLineNamingIt) {
  // npuscope alone in a folder: report still works, train names what is missing.
  const std::string scratch = scratchPath("alone");
  std::filesystem::create_directories(scratch);
  const std::string dir = std::filesystem::canonical(scratch).string();
  std::filesystem::copy_file(NPUSCOPE_CLI, dir + "/npuscope");
  const auto lone = [&](const std::string& args) {
    FILE* p = popen((dir + "/npuscope " + args + " 2>&1").c_str(), "r");
    CliRun r{-1, ""};
    std::array<char, 4096> buf{};
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
    const int st = pclose(p);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
  };
  const CliRun version = lone("--version");
  EXPECT_EQ(version.exit_code, 0) << version.out;
  const CliRun train = lone("train --model mlp --steps 1");
  EXPECT_EQ(train.exit_code, 1) << train.out;
  EXPECT_EQ(train.out, "npuscope: error: train runs in npuscope-torch, which is not installed beside npuscope (looked for " +
                           dir + "/npuscope-torch and " + dir + "/../libexec/npuscope/npuscope-torch)\n");
  std::filesystem::remove_all(dir);
}
