// What train and infer share while a loop runs: the progress line, Ctrl-C, and how a run that
// ended (or whose recording failed) becomes the exit code.
#pragma once

#include <cstdint>
#include <string>

#include "npuscope/store/status.h"

namespace npuscope::cli {

// A progress bar with rate and ETA on a terminal, a plain line every 10% otherwise.
class Progress {
 public:
  Progress();
  void operator()(int64_t step, int64_t total, double loss, double rate);

 private:
  bool tty_;
};

// Ctrl-C / SIGTERM of train and infer: the loop stops before its next step (batch) and ends the
// run "failed"; a second one ends the process at once (the next writer to open the file ends
// that run then).
void stopOnSignals();

// A loop that failed: its error line, exit code 1, or 128 + the signal that stopped it.
int loopFailed(const Status& status);

// Training (inference) went to its end but its recording failed (a full disk): after the
// summary, the error line, exit 1. 0 when `error` is empty.
int recordingFailed(const std::string& error);

}  // namespace npuscope::cli
