// Reads torch_npu's database export (ascend_pytorch_profiler_{rank}.db, SQLite) into a TraceModel:
// the same events the text export's trace_view.json shows, so the model nests, links and writes
// them exactly as it does for the JSON. Tables and columns are found by name (PRAGMA table_info):
// extra tables and columns (MindStudio Insight adds some) are ignored, optional ones may be missing.
// docs/import.md has the mapping and the schema version followed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "npuscope/store/status.h"

namespace npuscope::import {

class TraceModel;

// True when the file starts with SQLite's 16-byte header.
bool isSqliteFile(const std::string& path);

// What the database says about its run besides the events.
struct TorchNpuDbRun {
  int64_t rank = -1;        // RANK_DEVICE_MAP.rankId
  int32_t device = -1;      // RANK_DEVICE_MAP / NPU_INFO / the tasks' deviceId
  std::string metadata;     // JSON object: META_DATA (values parsed when they are JSON), NPU_INFO
};

// Reads `file` whole into `model`. Errors are one line naming the file: not SQLite, corrupt or
// truncated, not a torch_npu export (no STRING_IDS, or neither PYTORCH_API nor TASK), a table
// without a column the mapping needs. `progress` gets an estimate in bytes of the file and may
// cancel (false).
Status readTorchNpuDb(const std::string& file, TraceModel& model, TorchNpuDbRun* run,
                      const std::function<bool(int64_t done, int64_t total)>& progress);

}  // namespace npuscope::import
