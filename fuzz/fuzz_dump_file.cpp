// Ascend dump file bytes -> DecodedDumpFile: any input decodes or gives one error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "npuscope/dumper/dump_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto file = npuscope::dumper::decodeDumpFile(bytes, "fuzz.bin");
  if (file.isOk()) {
    size_t total = 8 + file->header_size;
    for (const auto* list : {&file->inputs, &file->outputs}) {
      for (const auto& t : *list) total += t.data.size();
    }
    if (total != size) __builtin_trap();  // a decoded file accounts for every byte
  }
  return 0;
}
