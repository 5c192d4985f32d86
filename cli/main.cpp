// npuscope: the headless command-line workbench. Each subcommand registers itself (commands.h);
// the work lives in the libraries. This executable loads no libtorch: the subcommands that run
// torch are forwarded to npuscope-torch (torch_commands.h, forward.cpp).
#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace npuscope::cli;
  Commands cli(argc, argv);
  addForwardedCommand(cli, kTrainCommand);
  addForwardedCommand(cli, kInferCommand);
  for (auto add : {addReportCommand, addExportCommand, addAdviseCommand}) add(cli);
  addForwardedCommand(cli, kOpsCommand);
  for (auto add : {addRunCommand, addImportCommand, addDumpCommand, addCompareCommand, addMemoryCommand}) add(cli);
  addForwardedCommand(cli, kCalibrateCommand);
  return cli.parseAndRun();
}
