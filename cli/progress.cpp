#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "cli/command.h"
#include "npuscope/workloads/trainer.h"

namespace npuscope::cli {

Progress::Progress() : tty_(isatty(fileno(stderr)) != 0) {}

void Progress::operator()(int64_t step, int64_t total, double loss, double rate) {
  const double eta = rate > 0 ? static_cast<double>(total - step) / rate : 0;
  if (tty_) {
    const int width = 30, filled = static_cast<int>(width * step / std::max<int64_t>(total, 1));
    std::fprintf(stderr, "\r[%.*s%*s] %lld/%lld loss %.4f  %.1f steps/s  ETA %.0fs", filled,
                 "##############################", width - filled, "", static_cast<long long>(step),
                 static_cast<long long>(total), loss, rate, eta);
    if (step == total) std::fprintf(stderr, "\n");
  } else if (step == total || step % std::max<int64_t>(total / 10, 1) == 0) {
    std::fprintf(stderr, "step %lld/%lld loss %.4f %.1f steps/s ETA %.0fs\n", static_cast<long long>(step),
                 static_cast<long long>(total), loss, rate, eta);
  }
}

void stopOnSignals() {
  for (int sig : {SIGINT, SIGTERM}) {
    std::signal(sig, [](int s) {
      if (workloads::stopRequested() != 0) std::_Exit(128 + s);
      workloads::requestStop(s);
    });
  }
}

int loopFailed(const Status& status) {
  const int sig = workloads::stopRequested();
  const int code = fail(status.message());
  return sig != 0 ? 128 + sig : code;
}

int recordingFailed(const std::string& error) {
  if (error.empty()) return 0;
  std::fflush(stdout);
  return fail(error);
}

}  // namespace npuscope::cli
