// torch_npu's npu_module_mem.csv in memory (ascend_csv.h's addModuleMemory, as `npuscope import`
// reads it from a folder; seeds: the AlexNet and Qwen3 exports' first rows, in their two column
// layouts, with empty reservations) into the in-memory TraceModel. No file or SQLite: it runs at
// parser speed. Reading either succeeds or gives one error that says what; every sample it keeps
// has a component name and zero or more bytes, and each component kept reserved something once.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "ascend_csv.h"
#include "npuscope/store/string_table.h"
#include "trace_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  npuscope::StringTable strings;
  TraceModel model("torch_npu", "fuzz_ascend_pt", strings);
  const npuscope::Status read =
      addModuleMemory("npu_module_mem.csv", std::string(reinterpret_cast<const char*>(data), size), model);
  if (!read.isOk()) {
    if (read.message().empty() || read.message().find('\n') != std::string::npos) __builtin_trap();  // one line
    return 0;
  }
  std::map<std::pair<int32_t, std::string>, int64_t> most;
  for (const npuscope::MemoryComponentRecord& c : model.memoryComponents()) {
    if (c.reserved < 0) __builtin_trap();
    int64_t& m = most[{c.device, c.component}];
    if (c.reserved > m) m = c.reserved;
  }
  for (const auto& [key, bytes] : most) {
    if (bytes <= 0) __builtin_trap();  // a component that never reserved anything is left out
  }
  return 0;
}
