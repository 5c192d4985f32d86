// npuscope: the headless command-line workbench. Each subcommand registers itself (commands.h);
// the work lives in the libraries.
#include "cli/commands.h"

int main(int argc, char** argv) {
  npuscope::cli::Commands cli(argc, argv);
  for (auto add : {npuscope::cli::addTrainCommand, npuscope::cli::addInferCommand, npuscope::cli::addReportCommand,
                   npuscope::cli::addExportCommand, npuscope::cli::addAdviseCommand, npuscope::cli::addOpsCommand,
                   npuscope::cli::addRunCommand, npuscope::cli::addImportCommand, npuscope::cli::addDumpCommand,
                   npuscope::cli::addCompareCommand, npuscope::cli::addMemoryCommand,
                   npuscope::cli::addCalibrateCommand}) {
    add(cli);
  }
  return cli.parseAndRun();
}
