// The `npuscope dump list|show|export` and `npuscope compare` subcommands, and the dump flags of
// `npuscope train`. Wiring into the CLI's main():
//
//   int exit_code = 0;
//   npuscope::dumper::addDumpCommands(app, exit_code);   // before CLI11_PARSE
//   ...
//   return exit_code;                                    // set by the callbacks
//
// Each command prints one clear line on stderr and sets exit_code to 1 on failure.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "npuscope/core/status.h"

namespace npuscope::dumper {

// Registers `dump` (with list, show, export) and `compare` on `app`, with callbacks.
void addDumpCommands(CLI::App& app, int& exit_code);

// `--dump-config FILE`, `--overflow-check N` and `--dump-force` for a training subcommand.
struct DumpCliOptions {
  std::string dump_config;  // acl.json to use (as ACL_DUMP_DATA=1 with that file)
  int64_t overflow_check = 0;  // > 0: overflow check mode, the first N overflowing ops
  bool force = false;          // dump even when the free space looks too small (config's force)
};
void addTrainDumpOptions(CLI::App& train, DumpCliOptions& options);
// Configures Dumper::instance() from the flags, else from ACL_DUMP_DATA=1 and ./acl.json.
// Returns whether dumping is requested; call before training, then attach() and start().
StatusOr<bool> configureDumperFromCli(const DumpCliOptions& options);

}  // namespace npuscope::dumper
