// The CSV text of torch_npu's profiler folders (memory_record.csv, kernel_details.csv; start: the
// real sample's first rows) through the import library's readers: records split at commas
// outside quotes (quoted fields may hold line breaks), and every field read as a µs time stamp
// as the importers read times. No file or SQLite: it runs at parser speed (fuzz_npu_folder keeps
// the whole folder import). Reading always ends, line numbers only grow, and a field of plain
// digits reads as exactly that many µs; plain fields joined again split back into themselves.
#include <cstddef>
#include <cstdint>
#include <string>

#include "text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  CsvReader csv(std::string(reinterpret_cast<const char*>(data), size));
  int64_t line = 0, last_line = 0;
  size_t records = 0;
  while (auto row = csv.next(&line)) {
    if (++records > size + 1 || line < 1 || line < last_line) __builtin_trap();  // must end; lines in order
    last_line = line;
    for (const std::string& field : *row) {
      const auto ns = microsToNs(field);
      if (!field.empty() && field.size() <= 15 && field.find_first_not_of("0123456789") == std::string::npos) {
        if (!ns || *ns != std::stoll(field) * 1000) __builtin_trap();
      }
    }
    // Fields without quotes, commas or line breaks, joined again, split back into themselves.
    std::string joined;
    bool plain = true;
    for (const std::string& field : *row) {
      plain = plain && field.find_first_of("\",\r\n") == std::string::npos &&
              (field.empty() || (field.back() != ' ' && field.back() != '\t'));
      joined += (&field == &row->front() ? "" : ",") + field;
    }
    if (plain && !row->empty() && splitCsvRecord(joined) != *row) __builtin_trap();  // (an empty line: no fields)
  }
  return 0;
}
