// npuscope-torch: the subcommands that run torch (torch_commands.h). `npuscope` starts it with its
// own command line for them; the multi-rank launcher starts it again for each rank.
#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace npuscope::cli;
  Commands cli(argc, argv);
  for (auto add : {addTrainCommand, addInferCommand, addOpsCommand, addCalibrateCommand}) add(cli);
  return cli.parseAndRun();
}
