// CSV of a key_averages-style op table (TraceReader::opAggregates), for spreadsheets and scripts.
// Columns (times in microseconds with three decimals, i.e. exact nanoseconds):
//   Name[,Input Shapes],Self CPU %,Self CPU (us),CPU total %,CPU total (us),CPU time avg (us),
//   CPU time min (us),CPU time max (us),# of Calls,Device time (modeled) (us),Device calls
// Quoting follows RFC 4180: fields holding a comma, quote or line break are quoted, quotes doubled.
#pragma once

#include <ostream>
#include <string>

#include "npuscope/store/trace_reader.h"

namespace npuscope {

void writeOpTableCsv(const OpAggregateTable& table, OpGroupBy group_by, std::ostream& out);

// One CSV field, quoted when it must be.
std::string csvField(const std::string& text);

// Nanoseconds as microseconds with exactly three decimals ("-1.500"), without floating point:
// how the exports (this CSV, chrome traces, torch_npu's folders) write times.
void appendMicros(std::string& out, int64_t ns);
inline std::string microsText(int64_t ns) {
  std::string s;
  appendMicros(s, ns);
  return s;
}

}  // namespace npuscope
