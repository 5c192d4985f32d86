// Shared by the kernel translation units (library internal): fp32 loads and stores of the
// storage types, dtype dispatch, and the chunked parallel driver.
//
// Kernel loops are written to vectorise: raw __restrict pointers, coefficients copied into
// locals before the loop (a store through a float* could otherwise alias a coefficient and
// force a reload per element), no calls, and arithmetic in the order of the reference formulas,
// so results match torch's op-by-op evaluation to the last bits (the kernels are compiled without
// FMA contraction).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <ATen/Parallel.h>
#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include "chunk_plan.h"

namespace npuscope::optim::detail {

// Storage type of an absent low-precision model copy: its stores vanish at compile time.
struct NoModel {};

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const c10::Half* p, int64_t i) { return static_cast<float>(p[i]); }
inline float load(const c10::BFloat16* p, int64_t i) { return static_cast<float>(p[i]); }

inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(c10::Half* p, int64_t i, float v) { p[i] = c10::Half(v); }
inline void store(c10::BFloat16* p, int64_t i, float v) { p[i] = c10::BFloat16(v); }
inline void store(NoModel*, int64_t, float) {}

// v as it reads back after a store into T: an overflow of the narrower type shows as inf.
template <typename T>
inline float roundTrip(float v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, NoModel>) {
    return v;
  } else {
    return static_cast<float>(T(v));
  }
}

// 1 when v is inf or nan. Integer bit test, so the loops that OR it together vectorise without
// any floating-point reassociation.
inline uint32_t nonFinite(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
}

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) for a floating storage dtype.
template <typename F>
void dispatchFloating(at::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat:
      return f(Tag<float>{});
    case at::kHalf:
      return f(Tag<c10::Half>{});
    case at::kBFloat16:
      return f(Tag<c10::BFloat16>{});
    default:
      TORCH_CHECK(false, "npuscope optim: unsupported dtype ", t, " (float32, float16, bfloat16 only)");
  }
}

// Like dispatchFloating, plus Undefined -> NoModel (an absent buffer).
template <typename F>
void dispatchOptional(at::ScalarType t, F&& f) {
  if (t == at::ScalarType::Undefined) return f(Tag<NoModel>{});
  return dispatchFloating(t, std::forward<F>(f));
}

// Calls f(Tag<P>{}, Tag<M>{}) for a step: P the stepped storage type (param, grad, state), M the
// model copy refreshed after the update (NoModel without master weights).
template <typename F>
void dispatchStep(at::ScalarType param, at::ScalarType model, F&& f) {
  dispatchFloating(param, [&](auto p) {
    dispatchOptional(model, [&](auto m) {
      using P = typename decltype(p)::type;
      using M = typename decltype(m)::type;
      if constexpr (std::is_same_v<M, NoModel> || std::is_same_v<P, float>) {
        f(p, m);
      } else {
        TORCH_INTERNAL_ASSERT(false, "master weights must be float32");
      }
    });
  });
}

// Turns a runtime bool into std::integral_constant<bool, b> for f.
template <typename F>
void dispatchBool(bool b, F&& f) {
  if (b) return f(std::true_type{});
  return f(std::false_type{});
}

// Runs f(chunk) for every chunk of the plan, spread over the intra-op threads.
template <typename F>
void forEachChunk(const ChunkPlan& plan, F&& f) {
  const auto n = static_cast<int64_t>(plan.chunks.size());
  if (n == 0) return;
  at::parallel_for(0, n, plan.grain(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) f(plan.chunks[static_cast<size_t>(k)]);
  });
}

}  // namespace npuscope::optim::detail
