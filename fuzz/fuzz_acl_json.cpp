// acl.json text -> DumpConfig: any input gives a config or one error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "npuscope/dumper/dump_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = npuscope::dumper::DumpConfig::fromJson(text, "acl.json");
  if (config.isOk()) {
    // What a dump then asks of a config: the step set and the op filter.
    (void)config->steps.countIn(0, 1000);
    (void)config->steps.contains(7);
    (void)config->keepsOp("aten::addmm", "addmm.0.forward");
  } else if (config.status().message().empty()) {
    __builtin_trap();  // an error must say what is wrong
  }
  return 0;
}
