#include "npuscope/gui/units.h"

#include <cmath>
#include <algorithm>
#include <cstdlib>

namespace npuscope::gui {

QString formatNs(int64_t ns) {
  const double a = std::fabs(static_cast<double>(ns));
  const double v = static_cast<double>(ns);
  if (a < 1e3) return QString("%1 ns").arg(ns);
  if (a < 1e6) return QString("%1 \u00b5s").arg(v / 1e3, 0, 'f', a < 1e4 ? 2 : 1);
  if (a < 1e9) return QString("%1 ms").arg(v / 1e6, 0, 'f', a < 1e7 ? 3 : 2);
  return QString("%1 s").arg(v / 1e9, 0, 'f', a < 1e10 ? 3 : 2);
}

QString formatOffset(int64_t t, int64_t origin, int64_t resolution_ns) {
  // The unit is the largest one the resolution reaches; decimals just enough to show it.
  const double d = static_cast<double>(t - origin);
  const double r = static_cast<double>(std::max<int64_t>(1, std::llabs(resolution_ns)));
  double unit = 1;
  const char* name = "ns";
  if (r >= 1e9) unit = 1e9, name = "s";
  else if (r >= 1e6) unit = 1e6, name = "ms";
  else if (r >= 1e3) unit = 1e3, name = "\u00b5s";
  int decimals = 0;
  while (decimals < 6 && std::fmod(r / unit * std::pow(10.0, decimals), 1.0) > 1e-6) ++decimals;
  return QString("%1 %2").arg(d / unit, 0, 'f', decimals).arg(QString::fromUtf8(name));
}

int64_t rulerTick(double ns_per_px, double min_px) {
  const double raw = min_px * ns_per_px;
  double tick = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (tick * m >= raw) {
      tick *= m;
      break;
    }
  }
  return std::max<int64_t>(1, static_cast<int64_t>(tick));
}

QString formatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (std::llabs(bytes) < 1024) return QString("%1 B").arg(bytes);
  if (std::fabs(b) < 1024.0 * 1024) return QString("%1 KiB").arg(b / 1024, 0, 'f', 1);
  if (std::fabs(b) < 1024.0 * 1024 * 1024) return QString("%1 MiB").arg(b / (1024.0 * 1024), 0, 'f', 1);
  return QString("%1 GiB").arg(b / (1024.0 * 1024 * 1024), 0, 'f', 2);
}

QString formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return QString::number(v, 'g', 5);
}

}  // namespace npuscope::gui
