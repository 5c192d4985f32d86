// AdamP element loops. Moments pass, in the reference op order:
//   m = m·β1 + (1−β1)·g;  v = v·β2 + ((1−β2)·g)·g;  denom = √v / √bc2 + ε;
//   perturb = m / denom  (nesterov: (β1·m + (1−β1)·g) / denom)
// with per-row sums Σg·p, Σg², Σp², Σp·perturb for the cosine test and the projection.
// Update pass: perturb −= p·coef[row] (coef = Σp·perturb / (‖p‖+ε)², i.e. p̂·Σ(p̂·perturb));
// p = p·decay + (−lr/bc1)·perturb. perturb is recomputed from the stored moments and the
// gradient rather than kept in a temporary buffer.
#include <algorithm>

#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

struct AdamPLocal {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, sqrtBc2, eps, negStepSize;
  explicit AdamPLocal(const AdamPCoeffs& c)
      : beta1(c.beta1), oneMinusBeta1(c.oneMinusBeta1), beta2(c.beta2), oneMinusBeta2(c.oneMinusBeta2),
        sqrtBc2(c.sqrtBiasCorrection2), eps(c.eps), negStepSize(c.negStepSize) {}
};

template <bool kNesterov>
inline float perturbOf(float mi, float vi, float gi, const AdamPLocal& k) {
  const float denom = std::sqrt(vi) / k.sqrtBc2 + k.eps;
  if constexpr (kNesterov) {
    return (k.beta1 * mi + k.oneMinusBeta1 * gi) / denom;
  } else {
    return mi / denom;
  }
}

// Moments and the full update, no projection (one-dimensional tensors).
template <typename P, typename M, bool kNesterov>
void adampMomentsApply(P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, M* __restrict model,
                       int64_t begin, int64_t end, const AdamPLocal k, float decay) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = load(g, i);
    const float mi = load(m, i) * k.beta1 + k.oneMinusBeta1 * gi;
    const float vi = load(v, i) * k.beta2 + (k.oneMinusBeta2 * gi) * gi;
    const float q = perturbOf<kNesterov>(mi, vi, gi, k);
    const float pi = load(p, i) * decay + k.negStepSize * q;
    store(m, i, mi);
    store(v, i, vi);
    store(p, i, pi);
    store(model, i, pi);
  }
}

// Moments and the four row sums of [begin, end).
template <typename P, bool kNesterov>
void adampMomentsStats(const P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, int64_t begin,
                       int64_t end, const AdamPLocal k, double* out) {
  double gp = 0.0, gg = 0.0, pp = 0.0, pq = 0.0;
#pragma omp simd reduction(+ : gp, gg, pp, pq)
  for (int64_t i = begin; i < end; ++i) {
    const float gi = load(g, i);
    const float pi = load(p, i);
    const float mi = load(m, i) * k.beta1 + k.oneMinusBeta1 * gi;
    const float vi = load(v, i) * k.beta2 + (k.oneMinusBeta2 * gi) * gi;
    const float q = perturbOf<kNesterov>(mi, vi, gi, k);
    store(m, i, mi);
    store(v, i, vi);
    const double gd = gi;
    const double pd = pi;
    gp += gd * pd;
    gg += gd * gd;
    pp += pd * pd;
    pq += pd * static_cast<double>(q);
  }
  out[0] = gp;
  out[1] = gg;
  out[2] = pp;
  out[3] = pq;
}

template <typename P, typename M, bool kNesterov>
void adampApply(P* __restrict p, const P* __restrict g, const P* __restrict m, const P* __restrict v,
                M* __restrict model, int64_t begin, int64_t end, const AdamPLocal k, float decay, float coef) {
  for (int64_t i = begin; i < end; ++i) {
    const float pi = load(p, i);
    const float q = perturbOf<kNesterov>(load(m, i), load(v, i), load(g, i), k) - pi * coef;
    const float pn = pi * decay + k.negStepSize * q;
    store(p, i, pn);
    store(model, i, pn);
  }
}

}  // namespace

void adampMomentsPass(const StepBuffers& b, const ChunkPlan& rows, const AdamPCoeffs* groups,
                      const uint8_t* needsStats, const float* tensorDecay, double* partials) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* m = static_cast<P*>(b.state[0]);
    auto* v = static_cast<P*>(b.state[1]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(rows, [&](const Chunk& ch) {
      const AdamPCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      const AdamPLocal k(c);
      dispatchBool(c.nesterov, [&](auto nesterov) {
        constexpr bool kNesterov = decltype(nesterov)::value;
        if (!needsStats[ch.tensor]) {
          adampMomentsApply<P, M, kNesterov>(p, g, m, v, model, ch.begin, ch.end, k, tensorDecay[ch.tensor]);
          return;
        }
        int64_t stat = ch.firstStat;
        for (int64_t rb = ch.begin; rb < ch.end; rb += ch.rowLen, ++stat) {
          adampMomentsStats<P, kNesterov>(p, g, m, v, rb, std::min(rb + ch.rowLen, ch.end), k, &partials[4 * stat]);
        }
      });
    });
  });
}

void adampUpdatePass(const StepBuffers& b, const ChunkPlan& rows, const AdamPCoeffs* groups,
                     const uint8_t* needsStats, const float* tensorDecay, const float* rowCoef) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    const auto* m = static_cast<const P*>(b.state[0]);
    const auto* v = static_cast<const P*>(b.state[1]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(rows, [&](const Chunk& ch) {
      if (!needsStats[ch.tensor]) return;
      const AdamPCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      const AdamPLocal k(c);
      const float decay = tensorDecay[ch.tensor];
      dispatchBool(c.nesterov, [&](auto nesterov) {
        constexpr bool kNesterov = decltype(nesterov)::value;
        int64_t row = ch.firstRow;
        for (int64_t rb = ch.begin; rb < ch.end; rb += ch.rowLen, ++row) {
          adampApply<P, M, kNesterov>(p, g, m, v, model, rb, std::min(rb + ch.rowLen, ch.end), k, decay,
                                      rowCoef[row]);
        }
      });
    });
  });
}

}  // namespace npuscope::optim::detail
