// `npuscope report`, `export` and `advise`: everything they show comes from core's TraceReader and
// exporters; these files only lay it out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// `npuscope report --cluster`: the ranks of one job (core/cluster.h), as text or JSON.
int runClusterReport(const std::vector<std::string>& paths, const std::string& job, double threshold, bool json);

struct ExportOptions {
  std::string file;
  int64_t run = -1;
  std::string chrome;  // output path of the chrome trace
  std::string csv;     // output path of the op table as CSV
  int64_t max_file_mb = 256;
};

int runExport(const ExportOptions& options);

struct AdviseOptions {
  std::string file;
  int64_t run = -1;
  bool json = false;
};

// `npuscope advise`: the advisor's findings (core/advisor.h) as text or JSON.
int runAdvise(const AdviseOptions& options);

}  // namespace npuscope::cli
