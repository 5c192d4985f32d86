// Streams the events of a chrome-trace JSON file (plain or gzip) without holding the file: the
// elements of its `traceEvents` array (or of a bare top-level array, as torch_npu writes
// trace_view.json) are handed out one at a time as raw text, padded for simdjson; the other
// top-level members are kept as a small JSON object of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "npuscope/store/status.h"

namespace npuscope::import {

class JsonEventStream {
 public:
  // `text` points into a buffer with at least 64 readable bytes after `size` (simdjson padding).
  // `offset` is the event's byte offset in the (decompressed) file, for messages.
  using EventFn = std::function<Status(const char* text, size_t size, int64_t offset)>;
  // Bytes read so far (compressed for gzip) and the file size; false cancels.
  using ProgressFn = std::function<bool(int64_t done, int64_t total)>;

  // Reads `path` to its end. Errors name the file and the byte where reading failed.
  Status run(const std::string& path, const EventFn& on_event, const ProgressFn& progress = {});

  // The top-level object's members other than traceEvents, as JSON ("{}" for a bare array).
  const std::string& metadata() const { return metadata_; }
  bool bareArray() const { return bare_array_; }
  int64_t events() const { return events_; }

  static constexpr size_t kPadding = 64;

 private:
  class Scanner;  // the byte-level state machine (json_stream.cpp)
  std::string metadata_;
  bool bare_array_ = false;
  int64_t events_ = 0;
};

}  // namespace npuscope::import
