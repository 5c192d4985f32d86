#include "npuscope/store/console.h"

#include <unistd.h>

namespace npuscope {

void consoleLine(std::FILE* out, const std::string& line) {
  const bool terminal = ::isatty(::fileno(out)) != 0;
  std::fprintf(out, "%s%s\n", terminal ? "\r\033[K" : "", line.c_str());
  std::fflush(out);
}

}  // namespace npuscope
