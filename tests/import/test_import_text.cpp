// The importers' text helpers against hand-written expectations.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "chrome_parser.h"
#include "json_stream.h"
#include "text.h"
#include "trace_model.h"

namespace npuscope::import {
namespace {

TEST(MicrosToNs, KeepsEveryNanosecondOfAUnixTime) {
  // A double holds this µs value only to 0.25 µs; the decimal text is exact.
  EXPECT_EQ(microsToNs("1736408883686740.710"), 1736408883686740710);
  EXPECT_EQ(microsToNs("\"1736408883686740.711\""), 1736408883686740711);
  EXPECT_EQ(microsToNs("88437691101.749"), 88437691101749);
  EXPECT_EQ(microsToNs("1736408883704643.212\t"), 1736408883704643212);  // torch_npu CSV: trailing tab
  EXPECT_EQ(microsToNs("0.0005"), 1);   // half a ns rounds up
  EXPECT_EQ(microsToNs("0.00049"), 0);
  EXPECT_EQ(microsToNs("-2.5"), -2500);
  EXPECT_EQ(microsToNs("12"), 12000);
  EXPECT_EQ(microsToNs("1e-05"), 0);    // 0.01 ns
  EXPECT_EQ(microsToNs("2.5e3"), 2500000);
}

TEST(MicrosToNs, RefusesWhatIsNotANumber) {
  EXPECT_FALSE(microsToNs(""));
  EXPECT_FALSE(microsToNs("N/A"));
  EXPECT_FALSE(microsToNs("12us"));
  EXPECT_FALSE(microsToNs("."));
  EXPECT_FALSE(microsToNs("99999999999999999999999"));  // past int64 ns
}

TEST(Csv, TorchNpuQuotingAndTabs) {
  // A kernel_details.csv row: triple-quoted shapes, a time stamp ending in a tab, N/A.
  const auto f = splitCsvRecord("50,trans_TransData_0,1736408883704643.212\t,\"\"\"32,3,224,224\"\"\",N/A,");
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0], "50");
  EXPECT_EQ(f[2], "1736408883704643.212");
  EXPECT_EQ(f[3], "32,3,224,224");
  EXPECT_EQ(f[4], "N/A");
  EXPECT_EQ(f[5], "");
  EXPECT_EQ(splitCsvRecord("\"a \"\"b\"\" c\",d")[0], "a \"b\" c");
}

TEST(Csv, ReaderKeepsLineBreaksInsideQuotesAndCountsLines) {
  CsvReader r("\xEF\xBB\xBFh1,h2\r\n\"x\ny\",2\n\n3,4\n");
  int64_t line = 0;
  auto a = r.next(&line);
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)[0], "h1");  // BOM dropped
  EXPECT_EQ(line, 1);
  auto b = r.next(&line);
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)[0], "x\ny");
  EXPECT_EQ(line, 2);
  auto c = r.next(&line);
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)[1], "4");
  EXPECT_EQ(line, 5);
  EXPECT_FALSE(r.next());
}

// A JSON string of random text full of what a scanner must not take for structure: brackets,
// escaped quotes and backslashes, \u escapes, runs of backslashes.
std::string randomJsonString(std::mt19937& rng) {
  static const char* kPieces[] = {"{", "}", "[", "]", ",", ":", "\\\"", "\\\\", "\\n", "\\u00e9", "a",
                                  "aten::conv2d", " ", "\\\\\\\"", "x}", "]]"};
  std::string s = "\"";
  const int n = static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) s += kPieces[rng() % (sizeof(kPieces) / sizeof(*kPieces))];
  return s + "\"";
}

// A random value: strings, numbers, nested arrays and objects, with random white space.
std::string randomJsonValue(std::mt19937& rng, int depth) {
  const std::string ws = std::string(rng() % 3, ' ') + (rng() % 5 == 0 ? "\n" : "");
  switch (depth > 3 ? rng() % 2 : rng() % 4) {
    case 0: return ws + randomJsonString(rng);
    case 1: return ws + std::to_string(static_cast<int64_t>(rng()) - 1000000) + ".25";
    case 2: {
      std::string a = ws + "[";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) a += (i ? "," : "") + randomJsonValue(rng, depth + 1);
      return a + ws + "]";
    }
    default: {
      std::string o = ws + "{";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) o += (i ? "," : "") + randomJsonString(rng) + ws + ":" + randomJsonValue(rng, depth + 1);
      return o + ws + "}";
    }
  }
}

// The scanner hands out exactly the events written, whatever their strings hold and wherever
// they fall against its 64-byte blocks and 8 MiB reads: 20,000 random events (with the events
// known as written, not as any parser reads them), a bracket and a quote in the top-level members.
TEST(JsonEventStream, HandsOutEveryEventExactlyWhateverItsStringsHold) {
  std::mt19937 rng(20261125);
  std::vector<std::string> events;
  std::string file = "{\"a{\": \"]\\\"\", \"traceEvents\": [";
  size_t bytes = 0;
  for (int i = 0; bytes < (size_t{10} << 20); ++i) {
    std::string e = "{\"ph\": \"X\", \"name\": " + randomJsonString(rng) + ", \"args\": " + randomJsonValue(rng, 0);
    // Pad some events to push later ones across block boundaries at every offset.
    e += std::string(rng() % 64, ' ') + "}";
    if (i % 100 == 0) e = "{\"name\": \"" + std::string(rng() % 300000, 'x') + "\"}";  // long: across reads
    file += (i ? ",\n " : "") + e;
    bytes += e.size();
    events.push_back(std::move(e));
  }
  file += "], \"b\": [\"}\"]}";
  char path[] = "/tmp/npuscope_stream_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, file.data(), file.size()), static_cast<ssize_t>(file.size()));
  ::close(fd);
  JsonEventStream stream;
  size_t seen = 0;
  bool all_equal = true;
  const Status s = stream.run(path, [&](const char* text, size_t size, int64_t offset) -> Status {
    if (seen >= events.size() || std::string(text, size) != events[seen] ||
        file.compare(static_cast<size_t>(offset), size, events[seen]) != 0) {
      if (all_equal) ADD_FAILURE() << "event " << seen << " differs: " << std::string(text, std::min<size_t>(size, 200));
      all_equal = false;
    }
    ++seen;
    return Status::ok();
  });
  std::remove(path);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(all_equal);
  EXPECT_EQ(seen, events.size());
  EXPECT_EQ(stream.metadata(), "{\"a{\": \"]\\\"\", \"traceEvents\": [], \"b\": [\"}\"]}");
}

// parseFields' strings outlive the parser's next event: escaped ones are unescaped into the
// arena, the rest point into the event's own text.
TEST(ChromeEventParser, ParsedStringsOutliveTheNextEvent) {
  ChromeEventParser parser;
  StringArena arena;
  const std::string pad(JsonEventStream::kPadding, ' ');
  const std::string a = std::string("{\"ph\":\"X\",\"name\":\"a\\\"b{\\u00e9\",\"cat\":\"cpu_op\"}") + pad;
  const std::string b = std::string("{\"ph\":\"i\",\"name\":\"zz\\\\zz\",\"cat\":\"kernel\"}") + pad;
  EventFields ea, eb;
  ASSERT_TRUE(parser.parseFields(a.data(), a.size() - pad.size(), 0, "t.json", &ea, arena).isOk());
  ASSERT_TRUE(parser.parseFields(b.data(), b.size() - pad.size(), 0, "t.json", &eb, arena).isOk());
  EXPECT_EQ(ea.name, "a\"b{\xC3\xA9");
  EXPECT_EQ(ea.cat, "cpu_op");
  EXPECT_EQ(ea.ph, "X");
  EXPECT_EQ(eb.name, "zz\\zz");
  EXPECT_EQ(eb.ph, "i");
  EXPECT_TRUE(ea.cat.data() >= a.data() && ea.cat.data() < a.data() + a.size());  // no copy made
}

}  // namespace
}  // namespace npuscope::import
