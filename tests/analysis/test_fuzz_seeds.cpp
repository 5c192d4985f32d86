// The trace-file fuzzer's seeds (fuzz/corpus/trace_file) must be files this build reads: a seed
// at an older schema version is refused at open ("needs migrating"), and the fuzzer then never
// gets past the version check (as happened when schema 5 came: coverage fell from ~1,700 edges
// to ~100). After a schema change, record the seeds again (fuzz/README.md says how).
#include <gtest/gtest.h>

#include <filesystem>

#include "npuscope/store/trace_reader.h"

namespace npuscope {
namespace {

TEST(FuzzSeeds, TraceFileSeedsOpenAtTheCurrentSchemaWithARun) {
  int seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NPUSCOPE_FUZZ_CORPUS) + "/trace_file")) {
    if (e.path().extension() != ".db" || e.path().filename().string().rfind("crash-", 0) == 0) continue;
    ++seeds;
    auto reader = TraceReader::open(e.path().string());
    ASSERT_TRUE(reader.isOk()) << reader.status().message();
    auto runs = (*reader)->runs();
    ASSERT_TRUE(runs.isOk()) << runs.status().message();
    EXPECT_FALSE(runs->empty()) << e.path();
  }
  EXPECT_GE(seeds, 3);
}

}  // namespace
}  // namespace npuscope
