// Small text helpers of the importers: time stamps as decimal text, CSV rows as torch_npu writes them.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npuscope::import {

// A time in µs written as decimal text ("1736408883686740.710", 88437691101.749, "12\t", "1e3")
// to integer ns, exactly for plain decimals (a double would lose the ns of a Unix-epoch time).
// Quotes and surrounding blanks are ignored; none when the text is not a number.
std::optional<int64_t> microsToNs(std::string_view text);
// A field as an error message quotes it: control characters (a quoted field's line breaks) as
// '?', at most 40 characters (then "..."), so the message stays one line.
std::string fieldText(std::string_view field);

// One CSV record: fields split at commas outside double quotes; quotes removed ("" inside a
// quoted field is one quote, so torch_npu's """32,3""" reads 32,3); a trailing tab or blank of a
// field is dropped (torch_npu ends time stamps with a tab so spreadsheets keep their digits).
std::vector<std::string> splitCsvRecord(std::string_view line);

// Reads CSV text record by record (a quoted field may hold line breaks).
class CsvReader {
 public:
  explicit CsvReader(std::string text) : text_(std::move(text)) {}
  // The next record, none at the end. `line` is its first line number (1-based).
  std::optional<std::vector<std::string>> next(int64_t* line = nullptr);

 private:
  std::string text_;
  size_t at_ = 0;
  int64_t line_ = 0;
};

// A link id (correlation, connection_id, flow id) as a number: its value when it fits 63 bits,
// else a hash of its text (torch_npu writes ids such as 40004068119343529983). Inline: the
// chrome parser calls it for every event that links.
// `s` is the literal: its length is a constant, so the comparison compiles to a few integer
// compares instead of a memcmp call (a trace's every event is tried against many keys, phases
// and categories, most of the same length as one of them).
template <size_t N>
inline bool is(std::string_view s, const char (&literal)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), literal, N - 1) == 0;
}

inline int64_t linkKey(std::string_view t) {
  while (!t.empty() && (t.front() == '"' || t.front() == ' ')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == '"' || t.back() == ' ')) t.remove_suffix(1);
  if (t.empty()) return -1;
  int64_t v = 0;
  bool digits = true;
  for (char c : t) {
    if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) {
      digits = false;
      break;
    }
    v = v * 10 + (c - '0');
  }
  if (digits) return v;
  return static_cast<int64_t>(std::hash<std::string_view>()(t) >> 1);
}

// With NPUSCOPE_IMPORT_TRACE=1 in the environment: one stderr line per import phase, with the
// time since the first call and the process's resident memory (for tuning; off by default).
void tracePhase(const char* what);

}  // namespace npuscope::import
