// Export of a run's tensor dumps from a trace file: Ascend-format dump files (one per op) or
// `.npy` files (one per tensor). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope {
class TraceReader;
}

namespace npuscope::dumper {

enum class ExportFormat { kAscend, kNpy };
StatusOr<ExportFormat> parseExportFormat(const std::string& text);  // "ascend" | "npy"

struct ExportOptions {
  int64_t run_id = -1;              // -1: the latest run
  std::string out_dir;
  ExportFormat format = ExportFormat::kAscend;
  std::optional<int64_t> step;      // only this step
};

// Writes `{out_dir}/{step}/{file}`: Ascend files named as dumpFileName() (task id = the op's
// order in the run, stream 0) or `{op_name}.{io}.{idx}.npy` (bfloat16 exported as float32,
// which numpy lacks). Statistics-only dumps have no payload: Ascend files then carry sizes of 0
// and no .npy is written. Returns the number of files written.
StatusOr<size_t> exportDumps(TraceReader& reader, const ExportOptions& options);

// A .npy (format 1.0) file of `count` elements of `dtype` with `shape`.
Status writeNpy(const std::string& path, const std::string& dtype, const std::string& shape_text,
                const std::vector<uint8_t>& data);

}  // namespace npuscope::dumper
