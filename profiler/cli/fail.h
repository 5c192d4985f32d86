// The CLI's one way to report an error: one line on stderr, exit code 1.
#pragma once

#include <cstdio>
#include <string>

namespace npuscope::cli {

inline int fail(const std::string& message) {
  std::fprintf(stderr, "npuscope: error: %s\n", message.c_str());
  return 1;
}

}  // namespace npuscope::cli
