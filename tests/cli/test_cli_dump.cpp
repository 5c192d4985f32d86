// `npuscope train --dump-config`, ACL_DUMP_DATA=1, `dump list|show|export` and `compare` end to
// end: the dumped rows agree with the file, identical runs compare clean, an O2 run against an
// O0 run names a first divergent op, and bad input is one clear line.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli_run.h"

namespace {

std::string aclJson(const std::string& dump_path, const std::string& data) {
  const std::string p = scratchPath("acl_" + data + ".json");
  std::ofstream(p) << R"({"dump": {"dump_path": ")" << dump_path << R"(", "dump_mode": "all", "dump_list": [],)"
                   << R"( "dump_step": "1", "dump_data": ")" << data << R"("}})";
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
  const int64_t rows = sqlInt(a, "SELECT count(*) FROM tensor_dumps WHERE run_id=1");
  EXPECT_GT(rows, 20);
  EXPECT_EQ(sqlInt(a, "SELECT count(*) FROM tensor_dumps WHERE step <> 1"), 0) << "dump_step \"1\" keeps step 1 only";

  CliRun list = run("dump list " + a);
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_NE(list.out.find("addmm.0.forward"), std::string::npos) << list.out;
  CliRun show = run("dump show " + a + " addmm.0.forward.output.0");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("histogram"), std::string::npos) << show.out;

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
