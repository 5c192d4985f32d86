// Parses one chrome-trace event (the text JsonEventStream hands out) into EventFields and gives
// it to a TraceModel. The only translation unit that includes simdjson.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "npuscope/core/status.h"

namespace npuscope::import {

class TraceModel;

class ChromeEventParser {
 public:
  ChromeEventParser();
  ~ChromeEventParser();
  // `text` has JsonEventStream::kPadding readable bytes after `size`.
  Status parse(const char* text, size_t size, int64_t offset, const std::string& path, TraceModel& model);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A link id (correlation, connection_id, flow id) as a number: its value when it fits 63 bits,
// else a hash of its text (torch_npu writes ids such as 40004068119343529983).
int64_t linkKey(std::string_view text);

}  // namespace npuscope::import
