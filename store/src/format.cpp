#include "npuscope/store/format.h"

#include <cstdio>
#include <cstdlib>

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

std::string formatGeneral(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

uint64_t parseBytes(const char* text, uint64_t fallback) {
  if (!text || !*text) return fallback;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || v <= 0) return fallback;
  uint64_t mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; break;
    case 'm': case 'M': mult = 1ull << 20; break;
    case 'g': case 'G': mult = 1ull << 30; break;
    case 't': case 'T': mult = 1ull << 40; break;
    default: break;
  }
  return static_cast<uint64_t>(v * static_cast<double>(mult));
}

}  // namespace npuscope
