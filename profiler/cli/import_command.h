// `npuscope import PATH`: a Kineto / torch.profiler trace, a torch_npu profiler folder or a
// folder of ranks into a trace file.
#pragma once

#include <string>

namespace npuscope::cli {

struct ImportOptions {
  std::string path;
  std::string db;  // default: <name of PATH>.npuscope.db in the current folder
  bool quiet = false;
};

int runImport(const ImportOptions& options);

}  // namespace npuscope::cli
