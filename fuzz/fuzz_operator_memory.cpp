// torch_npu's operator_memory.csv in memory (ascend_csv.h's addOperatorMemory, as `npuscope
// import` reads it from a folder; start: the real AlexNet export's first rows and a row with an
// empty release time) into the in-memory TraceModel. No file or SQLite: it runs at parser speed.
// Reading either succeeds or gives one error that says what; every block it keeps has a size of
// zero or more and is released after it was allocated, or never.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ascend_csv.h"
#include "npuscope/store/string_table.h"
#include "trace_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  npuscope::StringTable strings;
  TraceModel model("torch_npu", "fuzz_ascend_pt", strings);
  const npuscope::Status read =
      addOperatorMemory("operator_memory.csv", std::string(reinterpret_cast<const char*>(data), size), model);
  if (!read.isOk()) {
    if (read.message().empty() || read.message().find('\n') != std::string::npos) __builtin_trap();  // one line
    return 0;
  }
  for (const npuscope::MemoryBlockRecord& b : model.memoryBlocks()) {
    if (b.size < 0 || b.size != b.requested) __builtin_trap();
    if (b.free_ns >= 0 && b.free_ns < b.alloc_ns) __builtin_trap();
  }
  return 0;
}
