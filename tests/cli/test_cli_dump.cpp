// `npuscope train --dump-config`, ACL_DUMP_DATA=1, `dump list|show|export` and `compare` end to
// end: the dumped rows agree with the file, identical runs compare clean, an O2 run against an
// O0 run names a first divergent op, and bad input is one clear line.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"

namespace {

// An acl.json dumping every op of step 1; `extra`: more fields (", \"dump_update\": true").
std::string aclJson(const std::string& dump_path, const std::string& data, const std::string& extra = "") {
  const std::string p = scratchPath("acl_" + data + std::to_string(extra.size()) + ".json");
  std::ofstream(p) << R"({"dump": {"dump_path": ")" << dump_path << R"(", "dump_mode": "all", "dump_list": [],)"
                   << R"( "dump_step": "1", "dump_data": ")" << data << R"(")" << extra << "}}";
  return p;
}

const char* kTrain = "train --dataset synthetic --model mlp --steps 3 --optimizer adam --lr 1e-3 --seed 4";

TEST(CliDump, DumpListShowExportAndCompare) {
  const std::string dir = scratchPath("dumps");
  const std::string acl = aclJson(dir, "tensor");
  const std::string a = scratchPath("a.db"), b = scratchPath("b.db"), c = scratchPath("c.db");
  CliRun ra = run(std::string(kTrain) + " --opt-level O0 --dump-config " + acl + " --db " + a);
  ASSERT_EQ(ra.exit_code, 0) << ra.out;
  EXPECT_NE(ra.out.find("dumped           "), std::string::npos) << ra.out;
  EXPECT_NE(ra.out.find("npuscope: dump: about "), std::string::npos) << "the size per step, at start\n" << ra.out;
  const int64_t rows = sqlInt(a, "SELECT count(*) FROM tensor_dumps WHERE run_id=1");
  EXPECT_GT(rows, 20);
  EXPECT_EQ(sqlInt(a, "SELECT count(*) FROM tensor_dumps WHERE step <> 1"), 0) << "dump_step \"1\" keeps step 1 only";
  // Each dumped tensor names the recorded op that produced it.
  EXPECT_EQ(sqlInt(a, "SELECT count(*) FROM tensor_dumps WHERE op_id IS NULL"), 0);
  EXPECT_EQ(sqlInt(a, "SELECT count(*) FROM tensor_dumps d LEFT JOIN ops o ON o.id = d.op_id "
                      "WHERE o.name IS NOT d.op_type OR o.step IS NOT d.step"),
            0);
  EXPECT_EQ(sqlInt(a, "SELECT count(*) FROM tensor_dumps WHERE op_name LIKE '%.update' OR "
                      "op_name LIKE '_local_scalar_dense.%'"),
            0)
      << "the update after backward is left out by default, not labelled forward";

  CliRun list = run("dump list " + a);
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_NE(list.out.find("addmm.0.forward"), std::string::npos) << list.out;
  CliRun show = run("dump show " + a + " addmm.0.forward.output.0");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("histogram"), std::string::npos) << show.out;
  // A tensor that repeats an earlier one of its step (an op's input that was the previous op's
  // output) shares its stored bytes, and shows the same as any other.
  EXPECT_NE(ra.out.find("share its stored bytes"), std::string::npos) << ra.out;
  const int64_t shared = sqlInt(a, "SELECT min(id) FROM tensor_dumps WHERE data_ref IS NOT NULL AND data IS NULL");
  ASSERT_GT(shared, 0);
  CliRun show_shared = run("dump show " + a + " " + std::to_string(shared));
  ASSERT_EQ(show_shared.exit_code, 0) << show_shared.out;
  EXPECT_NE(show_shared.out.find("stored   with dump "), std::string::npos) << show_shared.out;
  EXPECT_NE(show_shared.out.find("histogram"), std::string::npos) << show_shared.out;

  const std::string out = scratchPath("npy");
  CliRun exp = run("dump export " + a + " --out " + out + " --format npy");
  ASSERT_EQ(exp.exit_code, 0) << exp.out;
  EXPECT_NE(exp.out.find("wrote " + std::to_string(rows) + " npy files"), std::string::npos) << exp.out;
  EXPECT_TRUE(std::ifstream(out + "/1/addmm.0.forward.output.0.npy").good()) << "step 1's tensors, one file each";

  // The same run again compares clean; the O2 run does not, and a first divergent op is named.
  ASSERT_EQ(run(std::string(kTrain) + " --opt-level O0 --dump-config " + acl + " --db " + b).exit_code, 0);
  CliRun same = run("compare " + a + " " + b);
  ASSERT_EQ(same.exit_code, 0) << same.out;
  EXPECT_NE(same.out.find("first divergent op: none"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find(" 0 warning, 0 error"), std::string::npos) << same.out;
  ASSERT_EQ(run(std::string(kTrain) + " --opt-level O2 --dump-config " + acl + " --db " + c).exit_code, 0);
  const std::string csv = scratchPath("cmp.csv");
  CliRun diff = run("compare " + c + " " + a + " --csv " + csv);
  ASSERT_EQ(diff.exit_code, 0) << diff.out;
  EXPECT_EQ(diff.out.find("first divergent op: none"), std::string::npos) << diff.out;
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  EXPECT_NE(header.find("Cosine"), std::string::npos) << header;

  // dump_update: the same O2 run with its update dumped too, under names of their own; the
  // forward and backward names are the ones of the run without it, and compare still aligns.
  const std::string u = scratchPath("u.db");
  const std::string with_update = aclJson(dir, "tensor", R"(, "dump_update": true)");
  ASSERT_EQ(run(std::string(kTrain) + " --opt-level O2 --dump-config " + with_update + " --db " + u).exit_code, 0);
  // The fused optimizers' kernels work on the flat buffers below the op level; what the update
  // runs as ops (reading the loss for the log) is named apart.
  EXPECT_GT(sqlInt(u, "SELECT count(*) FROM tensor_dumps WHERE op_name = '_local_scalar_dense.0.update'"), 0);
  const std::string names = "SELECT group_concat(op_name || '.' || io || '.' || idx, ' ') FROM "
                            "(SELECT * FROM tensor_dumps WHERE op_name NOT LIKE '%.update' ORDER BY id)";
  EXPECT_EQ(sqlText(u, names), sqlText(c, names));
  CliRun diff_u = run("compare " + u + " " + a);
  ASSERT_EQ(diff_u.exit_code, 0) << diff_u.out;
  const auto first = [](const std::string& out) { return out.substr(out.find("first divergent op: ")).substr(0, 60); };
  EXPECT_EQ(first(diff_u.out), first(diff.out));
}

// The Ascend-format files a dump_path receives compare as the runs that wrote them: a folder
// against its own trace file is clean, an O2 folder against an O0 folder names the same first
// divergent op as the two trace files do, and a damaged file is one line naming it.
TEST(CliDump, AclDumpFoldersCompareLikeTheirRuns) {
  const std::string dir_a = scratchPath("acl_a"), dir_b = scratchPath("acl_b");
  const std::string a = scratchPath("acl_a.db"), b = scratchPath("acl_b.db");
  ASSERT_EQ(run(std::string(kTrain) + " --opt-level O0 --dump-config " + aclJson(dir_a, "tensor") + " --db " + a).exit_code, 0);
  ASSERT_EQ(run(std::string(kTrain) + " --opt-level O2 --dump-config " + aclJson(dir_b, "tensor", " ") + " --db " + b).exit_code, 0);
  const std::string imported = scratchPath("acl_a_imported.db");
  CliRun r = run("import -q " + dir_a + " --db " + imported);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(acl_dump)"), std::string::npos) << r.out;
  EXPECT_EQ(sqlInt(imported, "SELECT count(*) FROM tensor_dumps"), sqlInt(a, "SELECT count(*) FROM tensor_dumps"));
  EXPECT_EQ(sqlInt(imported, "SELECT count(*) FROM tensor_dumps WHERE length(data) > 0"),
            sqlInt(imported, "SELECT count(*) FROM tensor_dumps"))
      << "every tensor keeps its data";
  CliRun same = run("compare " + dir_a + " " + a);
  ASSERT_EQ(same.exit_code, 0) << same.out;
  EXPECT_NE(same.out.find("first divergent op: none"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find(" 0 warning, 0 error, 0 not compared"), std::string::npos) << same.out;
  CliRun folders = run("compare " + dir_b + " " + dir_a);
  CliRun files = run("compare " + b + " " + a);
  ASSERT_EQ(folders.exit_code, 0) << folders.out;
  ASSERT_EQ(files.exit_code, 0) << files.out;
  // The forward tensors' rows agree metric for metric (the step column aside: the folders have
  // no step number, their one dumped step is step 0). The backward ones need not: a folder does
  // not say the run's loss scale, so an O2 folder's gradients compare scaled, as with msprobe.
  const auto forwardRows = [](const std::string& out) {
    std::vector<std::string> rows;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.find(".forward.") == std::string::npos) continue;
      const size_t name = line.find_first_not_of(' ', line.find_first_not_of(' '));
      rows.push_back(line.substr(line.find(' ', name)));
    }
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  const std::vector<std::string> from_folders = forwardRows(folders.out), from_files = forwardRows(files.out);
  EXPECT_GT(from_files.size(), 10u) << files.out;
  // Every forward row the trace files' compare lists is in the folders' (which list more: the
  // loss scale's fill_ and mul, passing in the files' compare once divided by the scale).
  EXPECT_TRUE(std::includes(from_folders.begin(), from_folders.end(), from_files.begin(), from_files.end()))
      << folders.out << "\n---\n" << files.out;
  EXPECT_EQ(folders.out.find("first divergent op: none"), std::string::npos) << folders.out;
  // A file cut short: the compare stops with one line that names it.
  std::string victim;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_a)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("addmm.addmm.0.forward.", 0) == 0) victim = e.path();
  }
  ASSERT_FALSE(victim.empty());
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) - 7);
  CliRun bad = run("compare " + dir_a + " " + a);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find(victim), std::string::npos) << bad.out;
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
}

TEST(CliDump, EnvironmentVariableTurnsDumpingOn) {
  const std::string dir = scratchPath("env_dumps");
  const std::string acl = aclJson(dir, "stats");
  const std::string db = scratchPath("env.db");
  const std::string work = scratchPath("work");
  std::system(("mkdir -p '" + work + "' && cp '" + acl + "' '" + work + "/acl.json'").c_str());
  // run() puts the executable first: let it print its version, then start the real run from the
  // directory holding acl.json with the variable set, as a user's shell would.
  CliRun r = run("--version >/dev/null 2>&1; cd '" + work + "' && ACL_DUMP_DATA=1 " + std::string(NPUSCOPE_CLI) + " " +
                 kTrain + " --db " + db);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM tensor_dumps"), 20);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM tensor_dumps WHERE data IS NOT NULL AND length(data) > 0"), 0)
      << "stats mode stores no payloads";
}

TEST(CliDump, RefusesToStartWhenTheDiskCannotHoldTheDump) {
  const std::string dir = scratchPath("full_dumps");
  const std::string acl = aclJson(dir, "tensor");
  const std::string db = scratchPath("full.db");
  const std::string tiny_disk = "NPUSCOPE_FAKE_FREE_BYTES=1000";
  CliRun r = run(std::string(kTrain) + " --dump-config " + acl + " --db " + db, true, tiny_disk);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("npuscope: dump: about "), std::string::npos) << "the size per step, at start\n" << r.out;
  for (const std::string& part : {std::string("npuscope: error: dump.dump_path: not enough free space: "), dir,
                                  std::string("has 1000 bytes free"), std::string("1 dumped step needs"),
                                  std::string("per step"), std::string("--dump-force")}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
  // Refused before the first step: nothing trained, nothing dumped, the trace file consistent
  // with the run ended as failed and the reason kept.
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps"), 0);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM tensor_dumps"), 0);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM runs WHERE status = 'failed' AND ended_ns IS NOT NULL AND "
                       "results_json LIKE '%not enough free space%'"),
            1);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "no dump directory";

  // Forced, the same run trains and dumps, with a warning.
  CliRun forced = run(std::string(kTrain) + " --dump-config " + acl + " --db " + db + " --dump-force", true, tiny_disk);
  ASSERT_EQ(forced.exit_code, 0) << forced.out;
  EXPECT_NE(forced.out.find("dumping anyway (force)"), std::string::npos) << forced.out;
  EXPECT_GT(sqlInt(db, "SELECT count(*) FROM tensor_dumps WHERE run_id = 2"), 20);
}

TEST(CliDump, SizingPassLeavesTrainingUnchanged) {
  // BatchNorm statistics, a dynamic loss scale and fp16 overflows: everything the sizing pass
  // touches must be as if it had not run.
  const std::string t = "train --dataset synthetic --model resnet --steps 3 --batch-size 16 --optimizer adam --lr 1e-3 "
                        "--seed 4 --opt-level O2";
  const std::string plain = scratchPath("plain.db"), dumped = scratchPath("sized.db");
  ASSERT_EQ(run(t + " --db " + plain).exit_code, 0);
  CliRun r = run(t + " --db " + dumped + " --dump-config " + aclJson(scratchPath("sized_dumps"), "stats"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("npuscope: dump: about "), std::string::npos) << r.out;
  const std::string steps = "SELECT group_concat(printf('%.17g %g %d', loss, loss_scale, skipped), ';') FROM "
                            "(SELECT * FROM steps ORDER BY step)";
  const std::string expected = sqlText(plain, steps);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(sqlText(dumped, steps), expected);
  const std::string results = "SELECT json_extract(results_json, '$.test_accuracy') || ' ' || "
                              "json_extract(results_json, '$.final_loss') FROM runs";
  EXPECT_EQ(sqlText(dumped, results), sqlText(plain, results));
}

TEST(CliDump, WriteErrorMidRunStopsDumpingOnceTrainingGoesOnOrStopsByOption) {
  // A full disk as the process sees it: files beyond 4 MiB fail (EFBIG). The first dumped op
  // (the batch of 1024 images copied to the npu, 2 x 3 MiB) is the first to fail; the trace
  // file stays far smaller.
  const std::string full = "trap '' XFSZ; ulimit -f 4096;";
  const std::string train = std::string(kTrain) + " --batch-size 1024 --epochs 2";
  const std::string dir = scratchPath("efbig_dumps");
  const std::string db = scratchPath("efbig.db");
  CliRun goes_on = run(train + " --dump-config " + aclJson(dir, "tensor") + " --db " + db, true, full);
  ASSERT_EQ(goes_on.exit_code, 0) << goes_on.out;
  size_t messages = 0;
  for (size_t at = goes_on.out.find("dump stopped"); at != std::string::npos;
       at = goes_on.out.find("dump stopped", at + 1)) {
    ++messages;
  }
  EXPECT_EQ(messages, 1u) << goes_on.out;
  EXPECT_NE(goes_on.out.find("File too large"), std::string::npos) << goes_on.out;
  EXPECT_NE(goes_on.out.find("test accuracy"), std::string::npos) << "training went on\n" << goes_on.out;
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps WHERE run_id = 1"), 3);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM runs WHERE id = 1 AND status = 'completed'"), 1);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);

  // on_error: stop ends training after the step that failed, with the reason.
  const std::string stop_acl = aclJson(dir, "tensor", R"(, "on_error": "stop")");
  CliRun stops = run(train + " --dump-config " + stop_acl + " --db " + db, true, full);
  EXPECT_EQ(stops.exit_code, 1) << stops.out;
  EXPECT_NE(stops.out.find("npuscope: error: "), std::string::npos) << stops.out;
  EXPECT_NE(stops.out.find("on_error: stop"), std::string::npos) << stops.out;
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM steps WHERE run_id = 2"), 2) << "steps 0 and 1 (the dumped step)";
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM runs WHERE id = 2 AND status = 'failed'"), 1);
  EXPECT_EQ(sqlInt(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

TEST(CliDump, BadInputIsOneClearLine) {
  const std::string bad_acl = scratchPath("bad_acl.json");
  std::ofstream(bad_acl) << R"({"dump": {"dump_mode": "sideways"}})";
  const std::string junk = scratchPath("junk.db");
  std::ofstream(junk) << "not a database at all, just text that is long enough to have a header......";
  struct Case {
    std::string args, expect;
  } cases[] = {
      {std::string(kTrain) + " --no-db --dump-config " + bad_acl, "dump_mode"},
      {"dump list " + junk, "not an npuscope trace file"},
      {"compare " + junk + " " + junk, "not an npuscope trace file"},
      {"dump show /nonexistent/x.db 1", "/nonexistent/x.db"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("npuscope: error: "), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
