// acl.json parsing: every malformed input is one error that names the field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "npuscope/dumper/dump_config.h"

namespace npuscope::dumper {
namespace {

Status parseError(const std::string& json) {
  auto c = DumpConfig::fromJson(json);
  return c.isOk() ? Status::ok() : c.status();
}

TEST(DumpConfigTest, ParsesAllFields) {
  auto c = DumpConfig::fromJson(R"({"dump": {"dump_path": "", "dump_mode": "output", "dump_list": ["addmm"],
      "dump_op_switch": "on", "dump_step": "0|5|10-20", "dump_data": "stats"}})");
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c->mode, DumpMode::kOutput);
  EXPECT_EQ(c->data, DumpDataKind::kStats);
  EXPECT_TRUE(c->steps.contains(0));
  EXPECT_FALSE(c->steps.contains(1));
  EXPECT_TRUE(c->steps.contains(15));
  EXPECT_FALSE(c->steps.contains(21));
  EXPECT_EQ(c->steps.count(), 13);
  EXPECT_TRUE(c->keepsOp("aten::addmm", "addmm.0.forward"));
  EXPECT_FALSE(c->keepsOp("aten::relu", "relu.0.forward"));
  EXPECT_FALSE(c->dump_update);
  EXPECT_TRUE(DumpConfig::fromJson(R"({"dump": {"dump_update": true, "force": true}})")->dump_update);
}

TEST(DumpConfigTest, StepsOfARunThatDumpStepSelects) {
  auto steps = StepSet::parse("0|5|10-20|15-25");
  ASSERT_TRUE(steps.isOk());
  EXPECT_EQ(steps->countIn(0, 3), 1);      // 0
  EXPECT_EQ(steps->countIn(0, 12), 4);     // 0, 5, 10, 11
  EXPECT_EQ(steps->countIn(1, 100), 17);   // 5, 10-25 (overlapping ranges counted once)
  EXPECT_EQ(steps->countIn(30, 40), 0);
  EXPECT_EQ(steps->countIn(5, 5), 0);
  EXPECT_EQ(StepSet().countIn(2, 9), 7) << "empty dump_step: every step of the run";
  EXPECT_EQ(steps->countIn(0, std::numeric_limits<int64_t>::max()), 18);
}

TEST(DumpConfigTest, ErrorsNameTheField) {
  EXPECT_NE(parseError("{\"dump\": {").message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_mode": "inputs"}})").message().find("dump.dump_mode: unknown value 'inputs'"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_data": "full"}})").message().find("dump.dump_data"), std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_step": "1-"}})").message().find("dump.dump_step"), std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_step": "5-2"}})").message().find("dump.dump_step"), std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_mod": "all"}})").message().find("dump.dump_mod: unknown field"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_path": 3}})").message().find("dump.dump_path: expected a string"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_op_switch": "off"}})").message().find("dump.dump_op_switch"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"overflow_limit": 0}})").message().find("dump.overflow_limit"), std::string::npos);
  EXPECT_NE(parseError(R"({"dump": {"dump_update": "yes"}})").message().find("dump.dump_update"), std::string::npos);
  EXPECT_NE(parseError(R"({"dumps": {}})").message().find("dump"), std::string::npos);
}

TEST(DumpConfigTest, UnwritableDumpPathIsRefused) {
  DumpConfig c;
  c.dump_path = "/proc/npuscope_cannot_exist/x";  // refused even for root
  const Status s = c.validate();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("dump.dump_path: ", 0), 0u) << s.message();
  auto missing = DumpConfig::fromFile("/nonexistent/acl.json");
  EXPECT_FALSE(missing.isOk());
}

TEST(DumpConfigTest, EnvironmentSwitch) {
  ::unsetenv("ACL_DUMP_DATA");
  EXPECT_FALSE(*dumpRequestedByEnvironment());
  ::setenv("ACL_DUMP_DATA", "1", 1);
  EXPECT_TRUE(*dumpRequestedByEnvironment());
  ::setenv("ACL_DUMP_DATA", "yes", 1);
  EXPECT_NE(dumpRequestedByEnvironment().status().message().find("ACL_DUMP_DATA"), std::string::npos);
  ::unsetenv("ACL_DUMP_DATA");
}

}  // namespace
}  // namespace npuscope::dumper

namespace npuscope::dumper {
namespace {

// Found by fuzz_acl_json: a number past double's range made nlohmann throw out_of_range, which
// escaped fromJson and ended the process.
TEST(DumpConfigFuzzFindings, ANumberPastDoubleIsAnErrorNotACrash) {
  auto c = DumpConfig::fromJson(R"({"dump":{"overflow_limit":7e777777}})");
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("acl.json: not valid JSON"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace npuscope::dumper

#include "npuscope/dumper/dump_file.h"

namespace npuscope::dumper {
namespace {

// Corrupt dump files give one error each, before any allocation the file cannot back, and
// protobuf logs nothing of its own beside it.
TEST(DumpFileDecode, CorruptFilesAreOneErrorEach) {
  using namespace std::string_literals;
  const std::string header_len_4 = "\x04\x00\x00\x00\x00\x00\x00\x00"s;
  testing::internal::CaptureStderr();
  auto bad_utf8 = decodeDumpFile(header_len_4 + "\x32\x02\xff\xfe"s, "a.bin");  // op_name: invalid UTF-8
  const std::string logged = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(bad_utf8.isOk());
  EXPECT_EQ(bad_utf8.status().message(), "a.bin: the header is not a toolkit.dumpdata.DumpData message");
  EXPECT_EQ(logged, "");
  // An input claiming a 2^40-byte payload in a 14-byte file.
  const std::string huge = "\x09\x00\x00\x00\x00\x00\x00\x00"s +
                           "\x22\x07\x28\x80\x80\x80\x80\x80\x20"s;  // input { size: 1 << 40 }
  auto claimed = decodeDumpFile(huge, "b.bin");
  ASSERT_FALSE(claimed.isOk());
  EXPECT_EQ(claimed.status().message(), "b.bin: payload sizes exceed the file");
  EXPECT_FALSE(decodeDumpFile("short", "c.bin").isOk());
}

}  // namespace
}  // namespace npuscope::dumper
