// The npuscope command line: one file per subcommand, each with one registration function
// (commands.h) that adds the subcommand, its options and what runs when it is given; main() calls
// them in the order `npuscope --help` lists them, parses, and runs the one given. The work lives
// in the libraries: a command file parses, calls and prints.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cli {

class Commands {
 public:
  Commands(int argc, char** argv);
  CLI::App& app() { return app_; }
  // The process's own command line (the --nproc launcher starts ranks with it).
  int argc() const { return argc_; }
  char** argv() const { return argv_; }
  // `run` runs when `sub` (a subcommand, or a subcommand's subcommand) was given; what it returns
  // is the exit code.
  void onParsed(CLI::App* sub, std::function<int()> run) { handlers_.emplace_back(sub, std::move(run)); }
  // Parses the command line and runs the given subcommand; a parse error, --help or --version is
  // answered as CLI11 answers it.
  int parseAndRun();

 private:
  CLI::App app_;
  int argc_;
  char** argv_;
  std::vector<std::pair<CLI::App*, std::function<int()>>> handlers_;
};

// The CLI's one way to report an error: one line on stderr, exit code 1.
int fail(const std::string& message);
inline int fail(const Status& s) { return fail(s.message()); }

// Run `run` of the file, or its latest run when run < 0.
StatusOr<RunRow> pickRun(TraceReader& reader, int64_t run);
StatusOr<int64_t> pickRunId(TraceReader& reader, int64_t run);

// A statistic as the dump and compare tables print it: "%.6g", "-" when absent.
std::string formatStat(const std::optional<double>& v);
// The shortest text that reads back as the same double ("-" when none): what a dump file holds.
std::string formatExact(const std::optional<double>& v);

}  // namespace npuscope::cli
