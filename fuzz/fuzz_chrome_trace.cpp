// A chrome trace's bytes (start: the Kineto sample, torch_npu trace_view excerpts, the variants
// of tests/import) imported as `npuscope import FILE` does: plain or gzip, object or bare array.
// Every input is imported or refused with a Status; none crashes, leaks or hangs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "npuscope/import/import.h"
#include "scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string in = npuscope_fuzz::scratchPath("chrome") + ".json",
                           db = npuscope_fuzz::scratchPath("chrome") + ".db";
  for (const std::string& p : {db, db + "-wal", db + "-shm"}) std::remove(p.c_str());
  FILE* f = std::fopen(in.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  (void)npuscope::import::importPath(in, db);
  return 0;
}
