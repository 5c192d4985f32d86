// The profiler's schedule string: any text parses or gives one error; a parsed schedule answers
// for any step without overflow.
#include <cstddef>
#include <cstdint>
#include <string>

#include "npuscope/profiler/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = npuscope::profiler::Schedule::parse(text);
  if (s.isOk()) {
    for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{1} << 20, int64_t{1} << 40}) (void)s->actionFor(step);
  }
  return 0;
}
