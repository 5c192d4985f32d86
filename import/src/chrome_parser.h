// Parses one chrome-trace event (the text JsonEventStream hands out) into EventFields and gives
// it to a TraceModel. The only translation unit that includes simdjson.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope::import {

class TraceModel;
struct EventFields;

// Storage for the strings of parsed events that cannot point into their text (those with
// escapes, unescaped): views stay valid until clear() or destruction.
class StringArena {
 public:
  std::string_view copy(std::string_view s);
  void clear();

 private:
  static constexpr size_t kBlock = size_t{64} << 10;
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t used_ = 0, capacity_ = 0;
};

class ChromeEventParser {
 public:
  ChromeEventParser();
  ~ChromeEventParser();
  // `text` has JsonEventStream::kPadding readable bytes after `size`. Parses and adds to `model`.
  Status parse(const char* text, size_t size, int64_t offset, const std::string& path, TraceModel& model);
  // Parses only: the fields' strings point into `text` or `arena`, valid as long as both are, so
  // one thread can parse while another fills the model (addParsedEvent).
  Status parseFields(const char* text, size_t size, int64_t offset, const std::string& path, EventFields* out,
                     StringArena& arena);
  // Many events at once: `text` holds `count` events back to back (separated by whitespace, with
  // JsonEventStream::kPadding readable bytes after `size`), event k starting at text[starts[k]].
  // Appends the fields of the events parsed in order and returns how many: fewer than `count` at
  // the first event it cannot read as parseFields would, which the caller then parses alone (for
  // the error naming its byte). One simdjson stage 1 over the text instead of one per event.
  size_t parseMany(const char* text, size_t size, const uint32_t* starts, size_t count, std::vector<EventFields>* out,
                   StringArena& arena);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Adds an event parseFields produced (or counts it as skipped when it has no phase).
void addParsedEvent(const EventFields& e, TraceModel& model);

}  // namespace npuscope::import
