// Saturating int64 arithmetic against 128-bit arithmetic clamped to the int64 range, over the
// edges where overflow starts, and rounding of doubles at and beyond the int64 range.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "npuscope/store/saturating.h"

namespace npuscope {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();

int64_t clamp128(__int128 v) {
  if (v > kMax) return kMax;
  if (v < kMin) return kMin;
  return static_cast<int64_t>(v);
}

TEST(Saturating, AddAndSubMatchClampedWideArithmetic) {
  const std::vector<int64_t> edges = {kMin, kMin + 1, kMin / 2, -1000, -1, 0, 1, 1000, kMax / 2, kMax - 1, kMax};
  for (int64_t a : edges) {
    for (int64_t b : edges) {
      EXPECT_EQ(saturatingAdd(a, b), clamp128(static_cast<__int128>(a) + b)) << a << " + " << b;
      EXPECT_EQ(saturatingSub(a, b), clamp128(static_cast<__int128>(a) - b)) << a << " - " << b;
    }
  }
}

// Through a volatile, so the compiler cannot fold a call on a constant (an out-of-range cast it
// folds may come out right by chance).
int64_t roundOpaque(double x) {
  volatile double v = x;
  return saturatingRound(v);
}

TEST(Saturating, RoundClampsDoublesOutsideTheRange) {
  EXPECT_EQ(roundOpaque(2.4), 2);
  EXPECT_EQ(roundOpaque(2.5), 3);
  EXPECT_EQ(roundOpaque(-2.5), -3);
  EXPECT_EQ(roundOpaque(0.0), 0);
  EXPECT_EQ(roundOpaque(9.2233720368547748e18), 9223372036854774784);  // 2^63 - 1024: the largest double below 2^63
  EXPECT_EQ(roundOpaque(9223372036854775808.0), kMax);                 // 2^63
  EXPECT_EQ(roundOpaque(1e300), kMax);
  EXPECT_EQ(roundOpaque(std::numeric_limits<double>::infinity()), kMax);
  EXPECT_EQ(roundOpaque(-9223372036854775808.0), kMin);  // -2^63 is in range
  EXPECT_EQ(roundOpaque(-1e300), kMin);
  EXPECT_EQ(roundOpaque(-std::numeric_limits<double>::infinity()), kMin);
  EXPECT_EQ(roundOpaque(std::nan("")), 0);
}

}  // namespace
}  // namespace npuscope
