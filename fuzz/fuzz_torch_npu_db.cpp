// torch_npu's database export (ascend_pytorch_profiler_{rank}.db; start: a cut-down export of the
// torch_npu sample made by tests/import/make_torch_npu_db.py) read as `npuscope import` reads it:
// tables and columns found by name, events into the import library's TraceModel, then
// classified. The trace file is not written (fuzz_chrome_trace and fuzz_npu_folder cover the
// writing). Every input is read or refused with one message; none crashes, leaks or hangs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "torch_npu_db.h"
#include "scratch.h"
#include "trace_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  static const std::string db = npuscope_fuzz::scratchPath("npu_db") + "_ascend_pytorch_profiler_0.db";
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((db + suffix).c_str());
  FILE* f = std::fopen(db.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  npuscope::StringTable strings;  // an input's names, as an import keeps its own
  TraceModel model("torch_npu", db, strings);
  TorchNpuDbRun run;
  const npuscope::Status read = readTorchNpuDb(db, model, &run, {});
  if (!read.isOk()) {
    if (read.message().empty()) __builtin_trap();  // an error says what is wrong
    return 0;
  }
  const npuscope::Status classified = model.classify();
  if (!classified.isOk() && classified.message().empty()) __builtin_trap();
  return 0;
}
