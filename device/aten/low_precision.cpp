#include "aten/low_precision.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace npuscope::npu::aten {
namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per task: below this one thread does it all
constexpr float kHalfMax = 65504.0f;

const bool kHasF16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");

template <typename F>
bool parallelAny(int64_t n, const F& f) {
  std::atomic<bool> any{false};
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    if (f(b, e)) any.store(true, std::memory_order_relaxed);
  });
  return any.load();
}

__attribute__((target("avx2,f16c"))) void halfToFloatF16c(const uint16_t* s, float* d, int64_t b, int64_t e) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
  }
  for (; i < e; ++i) d[i] = c10::detail::fp16_ieee_to_fp32_value(s[i]);
}

// Rounds [b, e); returns whether any value overflowed fp16.
__attribute__((target("avx2,f16c"))) bool floatToHalfF16c(const float* s, uint16_t* d, int64_t b, int64_t e,
                                                           bool saturate) {
  const __m256 maxv = _mm256_set1_ps(kHalfMax), minv = _mm256_set1_ps(-kHalfMax);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // Values that round to inf: |x| >= 65520 (halfway to the next power of two).
  const __m256 limit = _mm256_set1_ps(65520.0f);
  __m256 bad = _mm256_setzero_ps();
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 x = _mm256_loadu_ps(s + i);
    __m256 ax = _mm256_and_ps(x, absmask);
    // NaN compares unordered: NLT catches both NaN and too-large values.
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(ax, limit, _CMP_NLT_UQ));
    if (saturate) {
      __m256 ordered = _mm256_cmp_ps(x, x, _CMP_ORD_Q);
      x = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(x, minv), maxv), ordered);  // NaN -> 0
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  bool any = _mm256_movemask_ps(bad) != 0;
  for (; i < e; ++i) {
    float x = s[i];
    const bool over = !(std::fabs(x) < 65520.0f);
    any |= over;
    if (saturate && over) x = std::isnan(x) ? 0.0f : std::copysign(kHalfMax, x);
    d[i] = c10::detail::fp16_ieee_from_fp32_value(x);
  }
  return any;
}

bool floatToHalfScalar(const float* s, uint16_t* d, int64_t b, int64_t e, bool saturate) {
  bool any = false;
  for (int64_t i = b; i < e; ++i) {
    float x = s[i];
    const bool over = !(std::fabs(x) < 65520.0f);
    any |= over;
    if (saturate && over) x = std::isnan(x) ? 0.0f : std::copysign(kHalfMax, x);
    d[i] = c10::detail::fp16_ieee_from_fp32_value(x);
  }
  return any;
}

inline uint16_t roundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays a quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

void halfToFloat(const uint16_t* src, float* dst, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    if (kHasF16c) {
      halfToFloatF16c(src, dst, b, e);
    } else {
      for (int64_t i = b; i < e; ++i) dst[i] = c10::detail::fp16_ieee_to_fp32_value(src[i]);
    }
  });
}

void bfloat16ToFloat(const uint16_t* src, float* dst, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
      std::memcpy(dst + i, &u, 4);
    }
  });
}

bool floatToHalf(const float* src, uint16_t* dst, int64_t n, bool saturate) {
  return parallelAny(n, [&](int64_t b, int64_t e) {
    return kHasF16c ? floatToHalfF16c(src, dst, b, e, saturate) : floatToHalfScalar(src, dst, b, e, saturate);
  });
}

bool floatToBfloat16(const float* src, uint16_t* dst, int64_t n, bool saturate) {
  return parallelAny(n, [&](int64_t b, int64_t e) {
    bool any = false;
    for (int64_t i = b; i < e; ++i) {
      float x = src[i];
      uint16_t r = roundToBf16(x);
      const bool over = (r & 0x7f80u) == 0x7f80u;  // inf or NaN after rounding
      any |= over;
      if (saturate && over) r = std::isnan(x) ? 0 : (std::signbit(x) ? 0xff7f : 0x7f7f);  // +-bf16 max
      dst[i] = r;
    }
    return any;
  });
}

}  // namespace npuscope::npu::aten
