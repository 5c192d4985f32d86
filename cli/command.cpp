#include "cli/command.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "npuscope/store/version.h"

namespace npuscope::cli {

Commands::Commands(int argc, char** argv)
    : app_("npuscope: profile and debug mixed-precision training on an (emulated) Ascend NPU"), argc_(argc), argv_(argv) {
  app_.require_subcommand(1);
  app_.set_version_flag("--version", "npuscope " + std::string(npuscopeVersion()) + " (trace schema " +
                                         std::to_string(traceSchemaVersion()) + ", libtorch 1.13)");
}

int Commands::parseAndRun() {
  try {
    app_.parse(argc_, argv_);
  } catch (const CLI::ParseError& e) {
    return app_.exit(e);
  }
  for (auto& [sub, run] : handlers_) {
    if (sub->parsed()) return run();
  }
  return 0;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "npuscope: error: %s\n", message.c_str());
  return 1;
}

StatusOr<RunRow> pickRun(TraceReader& reader, int64_t run) {
  if (run < 0) return reader.latestRun();
  return reader.run(run);
}

StatusOr<int64_t> pickRunId(TraceReader& reader, int64_t run) {
  ASSIGN_OR_RETURN(RunRow row, pickRun(reader, run));
  return row.id;
}

std::string formatStat(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

std::string formatExact(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, *v);
    if (std::strtod(buf, nullptr) == *v || std::isnan(*v)) break;
  }
  return buf;
}

}  // namespace npuscope::cli
