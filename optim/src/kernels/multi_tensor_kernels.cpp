// Element loops of the multi-tensor primitives.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

template <typename S, typename D>
uint32_t scaleRange(const S* __restrict src, D* __restrict dst, int64_t begin, int64_t end, float scale) {
  uint32_t bad = 0;
  for (int64_t i = begin; i < end; ++i) {
    const float v = load(src, i) * scale;
    bad |= nonFinite(roundTrip<D>(v));
    store(dst, i, v);
  }
  return bad;
}

// In place (dst aliases src): no __restrict.
template <typename S>
uint32_t scaleInPlace(S* data, int64_t begin, int64_t end, float scale) {
  uint32_t bad = 0;
  for (int64_t i = begin; i < end; ++i) {
    const float v = load(data, i) * scale;
    bad |= nonFinite(roundTrip<S>(v));
    store(data, i, v);
  }
  return bad;
}

template <typename X, typename Y, typename O>
uint32_t axpbyRange(float a, const X* x, float b, const Y* y, O* out, int64_t begin, int64_t end) {
  uint32_t bad = 0;
  for (int64_t i = begin; i < end; ++i) {
    const float v = a * load(x, i) + b * load(y, i);
    bad |= nonFinite(roundTrip<O>(v));
    store(out, i, v);
  }
  return bad;
}

template <typename T>
double sumSquaresRange(const T* __restrict x, int64_t begin, int64_t end) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = begin; i < end; ++i) {
    const double v = load(x, i);
    acc += v * v;
  }
  return acc;
}

}  // namespace

bool scaleKernel(const ChunkPlan& plan, at::ScalarType srcType, const void* src, at::ScalarType dstType, void* dst,
                 float scale) {
  std::atomic<uint32_t> found{0};
  const bool inPlace = dst == src;
  if (dst == nullptr) dstType = at::ScalarType::Undefined;
  dispatchFloating(srcType, [&](auto s) {
    using S = typename decltype(s)::type;
    dispatchOptional(dstType, [&](auto d) {
      using D = typename decltype(d)::type;
      const auto* in = static_cast<const S*>(src);
      auto* outp = static_cast<D*>(dst);
      forEachChunk(plan, [&](const Chunk& c) {
        uint32_t bad = 0;
        if constexpr (std::is_same_v<S, D>) {
          if (inPlace) {
            bad = scaleInPlace(const_cast<S*>(in), c.begin, c.end, scale);
          } else {
            bad = scaleRange(in, outp, c.begin, c.end, scale);
          }
        } else {
          bad = scaleRange(in, outp, c.begin, c.end, scale);
        }
        if (bad) found.store(1, std::memory_order_relaxed);
      });
    });
  });
  return found.load() != 0;
}

bool axpbyKernel(const ChunkPlan& plan, float a, at::ScalarType xType, const void* x, float b, at::ScalarType yType,
                 const void* y, at::ScalarType outType, void* out, bool check) {
  std::atomic<uint32_t> found{0};
  dispatchFloating(xType, [&](auto xt) {
    dispatchFloating(yType, [&](auto yt) {
      dispatchFloating(outType, [&](auto ot) {
        using X = typename decltype(xt)::type;
        using Y = typename decltype(yt)::type;
        using O = typename decltype(ot)::type;
        forEachChunk(plan, [&](const Chunk& c) {
          const uint32_t bad = axpbyRange(a, static_cast<const X*>(x), b, static_cast<const Y*>(y),
                                          static_cast<O*>(out), c.begin, c.end);
          if (bad && check) found.store(1, std::memory_order_relaxed);
        });
      });
    });
  });
  return found.load() != 0;
}

void sumSquaresKernel(const ChunkPlan& plan, at::ScalarType type, const void* src, double* partials) {
  dispatchFloating(type, [&](auto t) {
    using T = typename decltype(t)::type;
    const auto* x = static_cast<const T*>(src);
    forEachChunk(plan, [&](const Chunk& c) {
      int64_t stat = c.firstStat;
      for (int64_t rb = c.begin; rb < c.end; rb += c.rowLen, ++stat) {
        partials[stat] = sumSquaresRange(x, rb, std::min(rb + c.rowLen, c.end));
      }
    });
  });
}

void zeroBytesKernel(void* data, int64_t bytes) {
  constexpr int64_t kGrain = int64_t{1} << 20;  // 1 MiB per task at least
  auto* base = static_cast<char*>(data);
  at::parallel_for(0, bytes, kGrain, [&](int64_t begin, int64_t end) {
    std::memset(base + begin, 0, static_cast<size_t>(end - begin));
  });
}

}  // namespace npuscope::optim::detail
