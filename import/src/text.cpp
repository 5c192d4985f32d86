#include "text.h"

#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace npuscope::import {

void tracePhase(const char* what) {
  static const bool on = std::getenv("NPUSCOPE_IMPORT_TRACE") != nullptr;
  if (!on) return;
  static const auto t0 = std::chrono::steady_clock::now();
  long pages = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  std::fprintf(stderr, "import: %8.3f s  rss %7.1f MB  %s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               static_cast<double>(resident) * 4096 / 1048576, what);
}

std::string fieldText(std::string_view field) {
  std::string out;
  for (char c : field.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (field.size() > 40) out += "...";
  return out;
}

std::optional<int64_t> microsToNs(std::string_view t) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '"' || c == '\r' || c == '\n'; };
  while (!t.empty() && blank(t.front())) t.remove_prefix(1);
  while (!t.empty() && blank(t.back())) t.remove_suffix(1);
  if (t.empty()) return std::nullopt;
  size_t i = 0;
  bool negative = false;
  if (t[i] == '-' || t[i] == '+') negative = t[i++] == '-';
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i, ++digits) {
    if (whole > (INT64_MAX / 1000 - 9) / 10) return std::nullopt;  // past ~292 years in ns
    whole = whole * 10 + (t[i] - '0');
  }
  int64_t frac_ns = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    int64_t scale = 100;  // the first fractional digit of a µs is 100 ns
    double rest = 0, rest_scale = 0.1;
    for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i, ++digits) {
      if (scale >= 1) {
        frac_ns += (t[i] - '0') * scale;
        scale /= 10;
      } else {
        rest += (t[i] - '0') * rest_scale;  // below a ns: rounds
        rest_scale /= 10;
      }
    }
    if (rest >= 0.5) ++frac_ns;
  }
  if (digits == 0) return std::nullopt;
  if (i < t.size()) {
    // Exponent notation (rare: tiny durations such as 1e-05): through a double.
    if (t[i] != 'e' && t[i] != 'E') return std::nullopt;
    char* end = nullptr;
    const std::string s(t);
    const double us = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(us) || std::fabs(us) > 9e15) return std::nullopt;
    return static_cast<int64_t>(std::llround(us * 1000.0));
  }
  const int64_t ns = whole * 1000 + frac_ns;
  return negative ? -ns : ns;
}

std::vector<std::string> splitCsvRecord(std::string_view line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i <= line.size(); ++i) {
    const char c = i < line.size() ? line[i] : ',';
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          ++i;  // "" inside quotes: a quote, which torch_npu uses to wrap shapes ("""1,2""")
          field += '"';
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      while (!field.empty() && (field.back() == '\t' || field.back() == ' ' || field.back() == '\r')) field.pop_back();
      out.push_back(std::move(field));
      field.clear();
    } else {
      field += c;
    }
  }
  // Shapes come wrapped in their own quotes after unquoting ("32,3,224,224" -> 32,3,224,224).
  for (std::string& f : out) {
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
  }
  return out;
}

std::optional<std::vector<std::string>> CsvReader::next(int64_t* line) {
  // Skip empty lines between records.
  while (at_ < text_.size() && (text_[at_] == '\n' || text_[at_] == '\r')) {
    if (text_[at_] == '\n') ++line_;
    ++at_;
  }
  if (at_ >= text_.size()) return std::nullopt;
  if (line) *line = line_ + 1;
  const size_t begin = at_;
  bool quoted = false;
  for (; at_ < text_.size(); ++at_) {
    const char c = text_[at_];
    if (c == '"') quoted = !quoted;
    if (c == '\n' && !quoted) break;
    if (c == '\n') ++line_;
  }
  std::string_view record(text_.data() + begin, at_ - begin);
  if (at_ < text_.size()) {
    ++at_;
    ++line_;
  }
  if (!record.empty() && record.back() == '\r') record.remove_suffix(1);
  if (begin == 0 && record.size() >= 3 && record.substr(0, 3) == "\xEF\xBB\xBF") record.remove_prefix(3);  // BOM
  return splitCsvRecord(record);
}

}  // namespace npuscope::import
