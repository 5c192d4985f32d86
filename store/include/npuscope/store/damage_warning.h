// For the command-line front-ends (npuscope's report, export, ops, advise and compare --perf):
// warns, as a command that read a trace file ends, of the damage its reader saw in the file
// (TraceReader::damage(): a corrupt file that still opens). What the command printed may hold
// wrong or missing names, and a person should know why; the exit code stays the command's.
#pragma once

#include <cstdio>
#include <string>

#include "npuscope/store/trace_reader.h"

namespace npuscope {

class DamageWarning {
 public:
  // Declared after the reader it watches, so that it speaks before the reader goes.
  explicit DamageWarning(const TraceReader& reader) : reader_(reader) {}
  DamageWarning(const DamageWarning&) = delete;
  DamageWarning& operator=(const DamageWarning&) = delete;
  ~DamageWarning() {
    if (reader_.damage().empty()) return;
    std::fflush(stdout);  // after the output it qualifies, also when stdout is a pipe
    for (const std::string& d : reader_.damage()) {
      std::fprintf(stderr, "npuscope: warning: %s is damaged: %s (check: sqlite3 %s 'PRAGMA integrity_check')\n",
                   reader_.path().c_str(), d.c_str(), reader_.path().c_str());
    }
  }

 private:
  const TraceReader& reader_;
};

}  // namespace npuscope
