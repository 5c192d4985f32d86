// A torch_npu folder without the timeline, in memory: the bytes before the first NUL are its
// kernel_details.csv, the rest its communication.json (start: the real Qwen3 export's first
// kernel rows with its collectives, and its communication.json cut down). Read as `npuscope
// import` reads such a folder (ascend_csv.h: the collective groups, then the kernels as device
// tasks and steps) into the in-memory TraceModel, then classify(). The same bytes are also read
// as a folder with neither timeline nor kernels (the CSV as its step_trace_time.csv, the rest
// its communication.json: collectives as tasks, steps from the CSV rows; start: a real Qwen3
// pipeline rank's two files). No file or SQLite: it runs at parser speed. Reading either
// succeeds or gives one error; what succeeds classifies.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "ascend_csv.h"
#include "npuscope/store/string_table.h"
#include "trace_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::import;
  const char* p = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  const size_t csv = nul ? static_cast<size_t>(nul - p) : size;
  npuscope::StringTable strings;
  TraceModel model("torch_npu", "fuzz_ascend_pt", strings);
  const auto collectives = nul ? parseCommunication(std::string_view(nul + 1, size - csv - 1))
                               : std::map<std::string, CollectiveInfo>();
  const npuscope::Status read = addKernelTasks("kernel_details.csv", std::string(p, csv), collectives, model);
  if (read.isOk()) (void)model.classify();
  else if (read.message().empty()) __builtin_trap();  // an error always says what

  TraceModel bare("torch_npu", "fuzz_ascend_pt", strings);
  auto rows = parseStepTraceTime("step_trace_time.csv", std::string(p, csv));
  if (!rows.isOk() && rows.status().message().empty()) __builtin_trap();
  const int64_t tasks = addCommunicationTasks(nul ? std::string_view(nul + 1, size - csv - 1) : std::string_view(),
                                              rows.isOk() ? *rows : nlohmann::json(), bare);
  if (tasks < 0) __builtin_trap();
  (void)bare.classify();
  return 0;
}
