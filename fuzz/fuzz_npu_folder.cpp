// A torch_npu profiler folder built from the input: the bytes before the first NUL are
// ASCEND_PROFILER_OUTPUT/memory_record.csv, the rest trace_view.json (start: the real sample's
// files, cut down). Imported as `npuscope import FOLDER` does; none crashes, leaks or hangs.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "npuscope/import/import.h"
#include "scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = npuscope_fuzz::scratchPath("npu") + "_ascend_pt";
  static const std::string out = root + "/ASCEND_PROFILER_OUTPUT", db = root + ".db";
  static const bool made = ::mkdir(root.c_str(), 0755) == 0 || true;
  (void)made;
  ::mkdir(out.c_str(), 0755);
  for (const std::string& p : {db, db + "-wal", db + "-shm"}) std::remove(p.c_str());
  const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t csv = nul ? static_cast<size_t>(nul - data) : size;
  auto put = [](const std::string& path, const uint8_t* p, size_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return;
    std::fwrite(p, 1, n, f);
    std::fclose(f);
  };
  put(out + "/memory_record.csv", data, csv);
  if (nul) {
    put(out + "/trace_view.json", nul + 1, size - csv - 1);
  } else {
    std::remove((out + "/trace_view.json").c_str());
  }
  (void)npuscope::import::importPath(root, db);
  return 0;
}
