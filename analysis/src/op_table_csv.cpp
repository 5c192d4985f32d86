#include "npuscope/analysis/op_table_csv.h"

#include <cinttypes>
#include <cstdio>

namespace npuscope {
namespace {

std::string number(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

void appendMicros(std::string& out, int64_t ns) {
  char buf[48];
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t a = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  const int n = std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, sign, a / 1000, a % 1000);
  out.append(buf, static_cast<size_t>(n));
}

std::string csvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

void writeOpTableCsv(const OpAggregateTable& table, OpGroupBy group_by, std::ostream& out) {
  const bool shapes = group_by == OpGroupBy::kNameAndShapes;
  out << "Name" << (shapes ? ",Input Shapes" : "")
      << ",Self CPU %,Self CPU (us),CPU total %,CPU total (us),CPU time avg (us),CPU time min (us),"
         "CPU time max (us),# of Calls,Device time (modeled) (us),Device calls\n";
  for (const OpAggregate& r : table.rows) {
    out << csvField(r.name);
    if (shapes) out << ',' << csvField(r.input_shapes);
    out << ',' << number(r.self_pct, 2) << ',' << microsText(r.self_ns) << ',' << number(r.total_pct, 2) << ','
        << microsText(r.total_ns) << ',' << number(r.avg_ns / 1000.0, 3) << ',' << microsText(r.min_ns) << ','
        << microsText(r.max_ns) << ',' << r.calls << ',' << microsText(r.device_ns) << ',' << r.device_calls << '\n';
  }
}

}  // namespace npuscope
