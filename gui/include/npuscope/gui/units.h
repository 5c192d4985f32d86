// How the workbench prints times and sizes: compact, unit chosen by magnitude.
#pragma once

#include <QString>
#include <cstdint>

namespace npuscope::gui {

// 850 -> "850 ns", 12345 -> "12.3 µs", 1234567 -> "1.23 ms", 2.5e9 -> "2.50 s".
QString formatNs(int64_t ns);
// A time on the run's axis: `t - origin` in the unit that suits `resolution_ns` ("12.500 ms").
QString formatOffset(int64_t t, int64_t origin, int64_t resolution_ns);
// A ruler's tick at this scale: 1, 2 or 5 x 10^k ns, at least `min_px` pixels apart.
int64_t rulerTick(double ns_per_px, double min_px = 90);
// 1536 -> "1.5 KiB".
QString formatBytes(int64_t bytes);
// Doubles for tables: NaN / inf spelled out, 4 significant digits.
QString formatValue(double v);

}  // namespace npuscope::gui
