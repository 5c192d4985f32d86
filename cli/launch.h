// `npuscope train --nproc N`: the launcher of a data-parallel job's ranks on this machine, in the
// manner of torchrun. docs/distributed.md, "C++ ranks".
#pragma once

#include <string>

namespace npuscope::cli {

// Runs this program's command line `argv` (without its --nproc) as `nproc` ranks: child
// processes with --rank R --world-size N --master-port P --job J added, on a free loopback port.
// Waits for all; when one fails the others get SIGTERM (their runs end "failed"); SIGINT and
// SIGTERM of the launcher are passed on. Returns the first failing rank's exit code, else 0.
int launchRanks(int argc, char** argv, int nproc);

// The trace file of rank `rank`: "run.db" -> "run.rank1.db".
std::string rankDbPath(const std::string& db, int rank);

}  // namespace npuscope::cli
