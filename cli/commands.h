// The registration function of each subcommand, in the order `npuscope --help` lists them. Each
// lives in the file of its name (train_command.cpp, ...).
#pragma once

#include "cli/command.h"

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

}  // namespace npuscope::cli
