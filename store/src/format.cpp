#include "npuscope/store/format.h"

#include <cstdio>

namespace npuscope {

std::string formatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024.0 && unit < 3) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f %s", v, kUnits[unit]);
  return buf;
}

std::string formatDuration(int64_t ns) {
  const double v = static_cast<double>(ns);
  const double a = v < 0 ? -v : v;
  char buf[32];
  if (a >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.3fs", v / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.3fms", v / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3fus", v / 1e3);
  }
  return buf;
}

std::string formatFixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

}  // namespace npuscope
