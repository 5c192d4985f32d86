// The importers' text helpers against hand-written expectations.
#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
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

// Writes `file` to a new temporary path, gzip-compressed when `gzip`; returns the path.
std::string writeTemp(const std::string& file, bool gzip) {
  char path[] = "/tmp/npuscope_stream_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {};
  if (gzip) {
    gzFile gz = gzdopen(fd, "wb");
    if (gz == nullptr || gzwrite(gz, file.data(), static_cast<unsigned>(file.size())) != static_cast<int>(file.size())) {
      return {};
    }
    gzclose(gz);
  } else {
    if (::write(fd, file.data(), file.size()) != static_cast<ssize_t>(file.size())) return {};
    ::close(fd);
  }
  return path;
}

// The scanner hands out exactly the events written, whatever their strings hold and wherever
// they fall against its 64-byte blocks and 8 MiB reads: 20,000 random events (with the events
// known as written, not as any parser reads them), a bracket and a quote in the top-level members.
// The same file three ways: plain (mapped: 10 MiB), plain ending on a page boundary (the
// scanner's 64-byte look-ahead past the last event runs past the file's last byte), and gzip
// (read through zlib).
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
  // Leading blanks end the file on a page boundary, its last event 15 bytes before it.
  const std::string aligned = std::string((4096 - file.size() % 4096) % 4096, ' ') + file;
  ASSERT_EQ(aligned.size() % 4096, 0u);
  for (const auto& [text, gzip] : {std::pair<const std::string&, bool>{file, false}, {aligned, false}, {file, true}}) {
    SCOPED_TRACE(gzip ? "gzip" : text.size() == file.size() ? "plain" : "plain, page-aligned");
    const std::string path = writeTemp(text, gzip);
    ASSERT_FALSE(path.empty());
    JsonEventStream stream;
    size_t seen = 0;
    bool all_equal = true;
    int64_t last_done = 0, total = 0;
    const Status s = stream.run(
        path,
        [&](const char* t, size_t size, int64_t offset) -> Status {
          if (seen >= events.size() || std::string(t, size) != events[seen] ||
              text.compare(static_cast<size_t>(offset), size, events[seen]) != 0) {
            if (all_equal) ADD_FAILURE() << "event " << seen << " differs: " << std::string(t, std::min<size_t>(size, 200));
            all_equal = false;
          }
          ++seen;
          return Status::ok();
        },
        [&](int64_t done, int64_t of) {
          EXPECT_GE(done, last_done);
          last_done = done;
          total = of;
          return true;
        });
    const int64_t file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
    std::remove(path.c_str());
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_TRUE(all_equal);
    EXPECT_EQ(seen, events.size());
    EXPECT_EQ(stream.metadata(), "{\"a{\": \"]\\\"\", \"traceEvents\": [], \"b\": [\"}\"]}");
    EXPECT_EQ(total, file_bytes);
    EXPECT_EQ(last_done, file_bytes);  // progress reaches the whole file
  }
}

// Cancelling from the progress callback stops the stream with a one-line error, mapped or read;
// a plain file cut short is reported at its end.
TEST(JsonEventStream, CancelAndTruncationMappedOrRead) {
  std::string file = "{\"traceEvents\": [";
  for (int i = 0; file.size() < (size_t{20} << 20); ++i) {
    file += (i ? ",\n" : "") + std::string("{\"ph\": \"X\", \"name\": \"op") + std::to_string(i) + "\", \"ts\": " +
            std::to_string(i) + ", \"dur\": 1, \"pid\": 1, \"tid\": 1}";
  }
  file += "]}";
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    const std::string path = writeTemp(file, gzip);
    ASSERT_FALSE(path.empty());
    JsonEventStream stream;
    int64_t events = 0, calls = 0;
    const Status s = stream.run(
        path, [&](const char*, size_t, int64_t) { ++events; return Status::ok(); },
        [&](int64_t, int64_t) { return ++calls < 2; });
    std::remove(path.c_str());
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("import cancelled"), std::string::npos) << s.message();
    EXPECT_GT(events, 0);
    EXPECT_LT(events, 200000);  // stopped well before the ~290k events of the file
  }
  const std::string cut = writeTemp(file.substr(0, file.size() - 1000), false);
  ASSERT_FALSE(cut.empty());
  JsonEventStream stream;
  const Status s = stream.run(cut, [](const char*, size_t, int64_t) { return Status::ok(); });
  std::remove(cut.c_str());
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("byte " + std::to_string(file.size() - 1000) + ": the JSON ends early"), std::string::npos)
      << s.message();
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

// parseMany reads a batch of events as parseFields reads each one, and stops where parseFields
// would fail (or where its documents do not start at the caller's events), so that the caller
// parses from there alone.
TEST(ChromeEventParser, ManyAtOnceReadWhatOneAtATimeReads) {
  const std::vector<std::string> events = {
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": "main", "ts": 1700000000123456.125, )"
      R"("dur": 2.5, "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "Sequence number": 9}})",
      R"({"ph":"s","id":"0x1f","pid":7,"tid":7,"ts":10,"cat":"ac2g","name":"a\"c\u00e92g"})",
      R"({"ph": "X", "cat": "kernel", "name": "k{[}]", "pid": 0, "tid": 7, "ts": 12, "dur": 1, )"
      R"("args": {"correlation": 41, "device": 0, "stream": "7", "External id": 3}})",
      R"({"ph": "i", "name": "zz\\zz", "pid": 1, "tid": 1, "ts": "15", "args": 3})",
  };
  std::string text;
  std::vector<uint32_t> starts;
  for (const std::string& e : events) {
    starts.push_back(static_cast<uint32_t>(text.size()));
    text += e + "\n";
  }
  const std::string pad(JsonEventStream::kPadding, ' ');
  const std::string padded = text + pad;
  // One at a time, each in its own padded buffer: the expectation.
  std::vector<std::string> own;
  std::vector<EventFields> one(events.size());
  ChromeEventParser single;
  StringArena arena1;
  for (size_t k = 0; k < events.size(); ++k) {
    own.push_back(events[k] + pad);
    ASSERT_TRUE(single.parseFields(own[k].data(), events[k].size(), 0, "t.json", &one[k], arena1).isOk());
  }
  auto same = [](const EventFields& a, const EventFields& b) {
    return a.ph == b.ph && a.cat == b.cat && a.name == b.name && a.id == b.id && a.pid == b.pid &&
           a.tid_text == b.tid_text && a.tid_is_number == b.tid_is_number && a.ts_ns == b.ts_ns &&
           a.dur_ns == b.dur_ns && a.input_dims == b.input_dims && a.input_types == b.input_types &&
           a.seq == b.seq && a.correlation == b.correlation && a.device == b.device && a.stream == b.stream &&
           a.external == b.external;
  };
  ChromeEventParser parser;
  StringArena arena;
  std::vector<EventFields> many;
  ASSERT_EQ(parser.parseMany(padded.data(), text.size(), starts.data(), starts.size(), &many, arena), events.size());
  ASSERT_EQ(many.size(), events.size());
  for (size_t k = 0; k < events.size(); ++k) EXPECT_TRUE(same(many[k], one[k])) << "event " << k;
  EXPECT_EQ(many[0].ts_ns, int64_t{1700000000123456125});
  EXPECT_EQ(many[1].name, "a\"c\xC3\xA9""2g");
  EXPECT_EQ(many[2].stream, 7);

  // A colon missing in the third event: the first two are read, the rest left to the caller.
  std::string bad = text;
  bad.replace(starts[2] + 1, 5, "\"ph\" ");
  bad += pad;
  many.clear();
  EXPECT_EQ(parser.parseMany(bad.data(), text.size(), starts.data(), starts.size(), &many, arena), 2u);
  EXPECT_EQ(many.size(), 2u);
  EventFields e;
  EXPECT_FALSE(parser.parseFields(bad.data() + starts[2], events[2].size(), 0, "t.json", &e, arena).isOk());

  // A document that is not an object (the scanner hands out objects only, but parseMany is not
  // to rely on it): the events before it stay as read, nothing else is added.
  {
    const std::string odd = events[0] + "\n[1, 2]\n" + pad;
    const uint32_t odd_starts[] = {0, static_cast<uint32_t>(events[0].size() + 1)};
    std::vector<EventFields> got;
    EXPECT_EQ(parser.parseMany(odd.data(), odd.size() - pad.size(), odd_starts, 2, &got, arena), 1u);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(same(got[0], one[0]));
    std::vector<EventFields> none;
    EXPECT_EQ(parser.parseMany(odd.data() + odd_starts[1], odd.size() - pad.size() - odd_starts[1], odd_starts, 1,
                               &none, arena),
              0u);
    EXPECT_TRUE(none.empty());
  }

  // Starts the documents do not have: nothing from the second on is taken.
  std::vector<uint32_t> shifted = starts;
  shifted[1] += 1;
  many.clear();
  EXPECT_EQ(parser.parseMany(padded.data(), text.size(), shifted.data(), shifted.size(), &many, arena), 1u);
  EXPECT_EQ(many.size(), 1u);
}

}  // namespace
}  // namespace npuscope::import
