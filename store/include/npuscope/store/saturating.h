// Integer sums of values read from a file that may be corrupt: a duration near INT64_MAX must
// give a figure clamped at the int64 range, not signed overflow (undefined behaviour).
#pragma once

#include <cstdint>
#include <limits>

namespace npuscope {

// a + b, clamped to [INT64_MIN, INT64_MAX].
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

// a - b, clamped to [INT64_MIN, INT64_MAX].
inline int64_t saturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) {
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

// A double rounded to the nearest int64, clamped to the int64 range (a cast out of range is
// undefined behaviour); NaN gives 0.
inline int64_t saturatingRound(double x) {
  constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in a double
  if (!(x == x)) return 0;
  // Below 2^63 doubles are 1024 apart, so adding or taking 0.5 stays inside the range.
  if (x >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (x < -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x < 0 ? x - 0.5 : x + 0.5);
}

}  // namespace npuscope
