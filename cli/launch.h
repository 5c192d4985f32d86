// `npuscope train --nproc N`: the launcher of a data-parallel job's ranks on this machine, in the
// manner of torchrun. docs/distributed.md, "C++ ranks".
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace npuscope::cli {

// What rank `rank` of a job of `nproc` adds to the launcher's command line, and its environment
// variables ("NAME=value"), given the job's store port and name.
struct RankLaunch {
  std::vector<std::string> args;
  std::vector<std::string> env;
};
using RankSetup = std::function<RankLaunch(int rank, int nproc, int port, const std::string& job)>;

// Runs this program's command line `argv` (without its --nproc and --master-port) as `nproc`
// ranks: child processes with what `setup` adds (by default --rank R --world-size N
// --master-port P --job J), on `port` (0: a free loopback port). Waits for all; when one fails
// the others get SIGTERM (their runs end "failed"); SIGINT and SIGTERM of the launcher are
// passed on. Returns the first failing rank's exit code, else 0.
int launchRanks(int argc, char** argv, int nproc, const RankSetup& setup = {}, int port = 0);

}  // namespace npuscope::cli
