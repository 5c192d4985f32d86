// The registration function of each subcommand, in the order `npuscope --help` lists them. Each
// lives in the file of its name (train_command.cpp, ...). The torch ones (torch_commands.h) are
// registered in npuscope-torch (torch_main.cpp); npuscope registers a forwarder for each.
#pragma once

#include "cli/command.h"
#include "cli/torch_commands.h"

namespace npuscope::cli {

void addTrainCommand(Commands& cli);
void addInferCommand(Commands& cli);
void addReportCommand(Commands& cli);
void addExportCommand(Commands& cli);
void addAdviseCommand(Commands& cli);
void addOpsCommand(Commands& cli);
void addRunCommand(Commands& cli);
void addImportCommand(Commands& cli);
void addDumpCommand(Commands& cli);
void addCompareCommand(Commands& cli);
void addMemoryCommand(Commands& cli);
void addCalibrateCommand(Commands& cli);

// npuscope's stand-in for a torch subcommand: it lists `command` in --help and, when given, runs
// npuscope-torch with this process's command line (its options, --help and errors are that
// executable's).
void addForwardedCommand(Commands& cli, const TorchCommand& command);

}  // namespace npuscope::cli
