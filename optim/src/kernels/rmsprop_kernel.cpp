// RMSprop element loops: torch.optim.RMSprop's and the TensorFlow-style one of timm/torch_npu.
#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

// torch: g = g + wd·p;  s = s·α + ((1−α)·g)·g;  centered: a = a·α + (1−α)·g,
// avg = √(s + (−a)·a) + ε, else avg = √s + ε;  momentum: b = b·μ + g/avg, p = p + (−lr)·b;
// else p = p + ((−lr)·g)/avg.
template <typename P, typename M, bool kCentered, bool kMomentum>
void rmspropRange(P* __restrict p, const P* __restrict g, P* __restrict sq, P* __restrict buf, P* __restrict ga,
                  M* __restrict model, int64_t begin, int64_t end, const RMSpropCoeffs& c) {
  const float negLr = c.negLr;
  const float wd = c.weightDecay;
  const float alpha = c.alpha;
  const float oneMinusAlpha = c.oneMinusAlpha;
  const float eps = c.eps;
  const float mu = c.momentum;
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i);
    const float gi = load(g, i) + wd * pi;
    const float si = load(sq, i) * alpha + (oneMinusAlpha * gi) * gi;
    store(sq, i, si);
    float avg;
    if constexpr (kCentered) {
      const float ai = load(ga, i) * alpha + oneMinusAlpha * gi;
      store(ga, i, ai);
      avg = std::sqrt(si + (-ai) * ai) + eps;
    } else {
      avg = std::sqrt(si) + eps;
    }
    if constexpr (kMomentum) {
      const float bi = load(buf, i) * mu + gi / avg;
      store(buf, i, bi);
      pi = pi + negLr * bi;
    } else {
      pi = pi + (negLr * gi) / avg;
    }
    store(p, i, pi);
    store(model, i, pi);
  }
}

// TF: decoupled: p = p + (−wd)·p, else g = g + wd·p;  s = s + (1−α)·(g·g − s);
// centered: a = a + (1−α)·(g − a), avg = √((s + (−a)·a) + ε), else avg = √(s + ε);
// momentum with lr inside: b = b·μ + (lr·g)/avg, p = p − b; without: b = b·μ + g/avg,
// p = p + (−lr)·b; no momentum: p = p + ((−lr)·g)/avg.
template <typename P, typename M, bool kCentered, bool kMomentum, bool kLrInMomentum>
void rmspropTFRange(P* __restrict p, const P* __restrict g, P* __restrict sq, P* __restrict buf, P* __restrict ga,
                    M* __restrict model, int64_t begin, int64_t end, const RMSpropTFCoeffs& c) {
  const float lr = c.lr;
  const float negLr = c.negLr;
  const float l2 = c.l2;
  const float negDecoupled = c.negDecoupled;
  const float oneMinusAlpha = c.oneMinusAlpha;
  const float eps = c.eps;
  const float mu = c.momentum;
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i);
    pi = pi + negDecoupled * pi;  // exact no-op when decoupled decay is off (negDecoupled = 0)
    const float gi = load(g, i) + l2 * pi;
    const float s0 = load(sq, i);
    const float si = s0 + oneMinusAlpha * (gi * gi - s0);
    store(sq, i, si);
    float avg;
    if constexpr (kCentered) {
      const float a0 = load(ga, i);
      const float ai = a0 + oneMinusAlpha * (gi - a0);
      store(ga, i, ai);
      avg = std::sqrt((si + (-ai) * ai) + eps);
    } else {
      avg = std::sqrt(si + eps);
    }
    if constexpr (kMomentum) {
      if constexpr (kLrInMomentum) {
        const float bi = load(buf, i) * mu + (lr * gi) / avg;
        store(buf, i, bi);
        pi = pi - bi;
      } else {
        const float bi = load(buf, i) * mu + gi / avg;
        store(buf, i, bi);
        pi = pi + negLr * bi;
      }
    } else {
      pi = pi + (negLr * gi) / avg;
    }
    store(p, i, pi);
    store(model, i, pi);
  }
}

}  // namespace

void rmspropStep(const StepBuffers& b, const RMSpropCoeffs* groups) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* sq = static_cast<P*>(b.state[0]);
    auto* buf = static_cast<P*>(b.state[1]);
    auto* ga = static_cast<P*>(b.state[2]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      const RMSpropCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      dispatchBool(c.centered, [&](auto centered) {
        dispatchBool(c.hasMomentum, [&](auto momentum) {
          rmspropRange<P, M, decltype(centered)::value, decltype(momentum)::value>(p, g, sq, buf, ga, model, ch.begin,
                                                                                 ch.end, c);
        });
      });
    });
  });
}

void rmspropTFStep(const StepBuffers& b, const RMSpropTFCoeffs* groups) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* sq = static_cast<P*>(b.state[0]);
    auto* buf = static_cast<P*>(b.state[1]);
    auto* ga = static_cast<P*>(b.state[2]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      const RMSpropTFCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      dispatchBool(c.centered, [&](auto centered) {
        dispatchBool(c.hasMomentum, [&](auto momentum) {
          dispatchBool(c.lrInMomentum, [&](auto lrIn) {
            rmspropTFRange<P, M, decltype(centered)::value, decltype(momentum)::value, decltype(lrIn)::value>(
                p, g, sq, buf, ga, model, ch.begin, ch.end, c);
          });
        });
      });
    });
  });
}

}  // namespace npuscope::optim::detail
