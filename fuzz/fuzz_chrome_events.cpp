// Chrome-trace events, one per line (start: the events of the chrome_trace seeds and of the
// torch_npu sample's trace_view.json), parsed with the importer's simdjson event parser into its
// in-memory TraceModel and classified (host ops, device tasks, steps, flows), as `npuscope
// import` does after scanning a file — without the file scan and without writing SQLite, so it
// runs at parser speed. (The file scan, gzip and the writing are fuzz_chrome_trace's: the scanner
// zeroes an 8 MiB buffer per file, which caps that target near 100 inputs/s.) A first line
// "#torch_npu" models the events as torch_npu's, else as a Kineto trace's. As in the importer,
// the first malformed event ends the read. Every input is modelled or refused with a message.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "chrome_parser.h"
#include "json_stream.h"
#include "trace_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  static const std::string kPath = "fuzz.json";
  static ChromeEventParser parser;  // one per reading thread in the importer, reused likewise
  // The events' text, padded for simdjson as the importer pads its batches.
  std::string text(reinterpret_cast<const char*>(data), size);
  text.append(JsonEventStream::kPadding, ' ');
  const char* p = text.data();
  const char* end = p + size;
  const bool ascend = size >= 10 && std::memcmp(p, "#torch_npu", 10) == 0;
  npuscope::StringTable strings;  // an input's names, as an import keeps its own
  TraceModel model(ascend ? "torch_npu" : "kineto", kPath, strings);
  for (int64_t offset = 0; p < end;) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const size_t n = static_cast<size_t>((nl ? nl : end) - p);
    if (n > 0 && p[0] != '#') {
      const npuscope::Status s = parser.parse(p, n, offset, kPath, model);
      if (!s.isOk()) {
        if (s.message().empty()) __builtin_trap();  // an error says what is wrong
        return 0;
      }
    }
    offset += static_cast<int64_t>(n) + 1;
    p += n + 1;
  }
  const npuscope::Status classified = model.classify();
  if (!classified.isOk() && classified.message().empty()) __builtin_trap();
  return 0;
}
