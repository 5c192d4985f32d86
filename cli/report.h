// `npuscope report` (report_command.cpp), also printed by `npuscope run` after the script:
// everything it shows comes from the store's reader and analysis; the command only lays it out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuscope {
struct DeviceMemory;
struct DeviceComponents;
class TraceReader;
}  // namespace npuscope

namespace npuscope::cli {

struct ReportOptions {
  std::string file;
  int64_t run = -1;  // -1: the latest run
  std::string sort = "self";
  int64_t top = 20;  // 0: every op
  bool group_by_shape = false;
  std::string format = "text";  // text | csv | json
};

// Prints the report on stdout; returns the process exit code (errors: one line on stderr).
int runReport(const ReportOptions& options);

// The memory section of the report for one device (memory_command.cpp): the peak by category,
// the `top` largest live tensors, fragmentation, refused allocations; and the same as JSON.
void printMemoryBreakdown(const DeviceMemory& d, TraceReader& reader, int64_t top);
nlohmann::json memoryJson(const DeviceMemory& d, TraceReader& reader, int64_t top);
// Device memory by component of the device software (an imported npu_module_mem.csv): each
// component's reservation when the total was highest and its own peak; and the same as JSON.
void printComponentPeaks(const DeviceComponents& d, const char* indent);
nlohmann::json componentsJson(const DeviceComponents& d);

// `npuscope report --cluster`: the ranks of one job (analysis/cluster.h), as text or JSON.
int runClusterReport(const std::vector<std::string>& paths, const std::string& job, double threshold, bool json);

}  // namespace npuscope::cli
