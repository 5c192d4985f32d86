// msprobe's dump files (dump.json, stack.json, construct.json; seeds: the real samples of
// tests/data/msprobe) through the import library's reader, in memory at parser speed (the folder
// import around it is fuzz_npu_folder's kind of work). The input is split at its first NUL into a
// dump.json and one more file, read as both stack.json and construct.json. Reading ends with a
// result or one error line; every tensor row belongs to an entry of the file, names its argument
// under input/output, and keeps its step.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "npuscope/import/msprobe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view dump = all.substr(0, nul);
  const std::string_view extra = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  MsprobeDump d;
  const npuscope::Status s = parseMsprobeDump(dump, "dump.json", 7, &d);
  if (!s.isOk()) {
    if (s.message().empty() || s.message().find('\n') != std::string::npos) __builtin_trap();  // one line
    return 0;
  }
  std::set<std::string> names;
  for (const auto& e : d.entries) names.insert(e.name);
  for (const auto& t : d.tensors) {
    if (!names.count(t.op_name) || t.step != 7) __builtin_trap();
    if (t.io != "input" && t.io != "output") __builtin_trap();
    if (t.arg.empty() || t.shape.empty() || t.shape.front() != '[' || t.shape.back() != ']') __builtin_trap();
  }
  if (!extra.empty()) {
    const npuscope::Status a = applyMsprobeStacks(extra, "stack.json", &d);
    const npuscope::Status b = applyMsprobeConstruct(extra, "construct.json", &d);
    if (a.isOk() != b.isOk()) __builtin_trap();  // the same JSON parses for both or neither
  }
  for (const auto& e : d.entries) (void)msprobeOpType(e.name);
  return 0;
}
