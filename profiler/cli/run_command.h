// `npuscope run [options] -- script.py args...`: a user's unmodified Python script on the npu
// under recording (what `nsys profile python3 train.py` is to a GPU), then that run's report.
#pragma once

#include <string>
#include <vector>

namespace npuscope::cli {

struct RunOptions {
  std::string db = "npuscope.db";
  std::string dump_config;  // acl.json to dump with ("" : ACL_DUMP_DATA=1 decides, as for train)
  bool transfer_to_npu = false;
  std::string schedule;
  bool report = true;
  std::vector<std::string> script;  // script.py and its arguments
};

// Runs the script with Debian's interpreter (NPUSCOPE_PYTHON overrides) and the npuscope
// package of this build or install (NPUSCOPE_PYTHONPATH overrides); returns the script's exit
// status (128 + signal when it was killed by one).
int runScript(const RunOptions& options);

}  // namespace npuscope::cli
