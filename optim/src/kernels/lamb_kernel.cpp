// LAMB element loops (torch_npu/cybertronai and apex FusedLAMB share them; the host picks the
// coefficients). Moments pass, in the reference op order:
//   g = g / divisor + l2·p;  m = m·β1 + β3·g;  v = v·β2 + ((1−β2)·g)·g;
//   u = (m / bc1) / (√(v / bc2) + ε) + decoupled·p
// (with bc = 1 the divisions are exact, which gives torch_npu's m / (√v + ε)), then
// p = p + ((−lr)·u)·trust, in the same pass when trust is 1, else in the update pass once the
// per-tensor norms are known. The update pass recomputes u from the stored moments instead of
// keeping a temporary buffer.
#include <algorithm>

#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

struct LambLocal {
  float gradDivisor, l2, beta1, beta3, beta2, oneMinusBeta2, bc1, bc2, eps, decoupled, negLr;
  explicit LambLocal(const LambCoeffs& c)
      : gradDivisor(c.gradDivisor), l2(c.l2), beta1(c.beta1), beta3(c.beta3), beta2(c.beta2),
        oneMinusBeta2(c.oneMinusBeta2), bc1(c.biasCorrection1), bc2(c.biasCorrection2), eps(c.eps),
        decoupled(c.decoupled), negLr(c.negLr) {}
};

inline float lambUpdate(float mi, float vi, float pi, const LambLocal& k) {
  return (mi / k.bc1) / (std::sqrt(vi / k.bc2) + k.eps) + k.decoupled * pi;
}

// Moments, and the full update (trust 1).
template <typename P, typename M>
void lambMomentsApply(P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, M* __restrict model,
                      int64_t begin, int64_t end, const LambLocal k) {
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i);
    const float gi = load(g, i) / k.gradDivisor + k.l2 * pi;
    const float mi = load(m, i) * k.beta1 + k.beta3 * gi;
    const float vi = load(v, i) * k.beta2 + (k.oneMinusBeta2 * gi) * gi;
    const float ui = lambUpdate(mi, vi, pi, k);
    pi = pi + (k.negLr * ui);
    store(m, i, mi);
    store(v, i, vi);
    store(p, i, pi);
    store(model, i, pi);
  }
}

// Moments, and Σp², Σu² of the range.
template <typename P>
void lambMomentsStats(const P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, int64_t begin,
                      int64_t end, const LambLocal k, double* pp, double* uu) {
  double accP = 0.0;
  double accU = 0.0;
#pragma omp simd reduction(+ : accP, accU)
  for (int64_t i = begin; i < end; ++i) {
    const float pi = load(p, i);
    const float gi = load(g, i) / k.gradDivisor + k.l2 * pi;
    const float mi = load(m, i) * k.beta1 + k.beta3 * gi;
    const float vi = load(v, i) * k.beta2 + (k.oneMinusBeta2 * gi) * gi;
    const float ui = lambUpdate(mi, vi, pi, k);
    store(m, i, mi);
    store(v, i, vi);
    accP += static_cast<double>(pi) * pi;
    accU += static_cast<double>(ui) * ui;
  }
  *pp = accP;
  *uu = accU;
}

template <typename P, typename M>
void lambApplyTrust(P* __restrict p, const P* __restrict m, const P* __restrict v, M* __restrict model,
                    int64_t begin, int64_t end, const LambLocal k, float trust) {
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i);
    const float ui = lambUpdate(load(m, i), load(v, i), pi, k);
    pi = pi + (k.negLr * ui) * trust;
    store(p, i, pi);
    store(model, i, pi);
  }
}

}  // namespace

void lambMomentsPass(const StepBuffers& b, const LambCoeffs* groups, double* partials) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* m = static_cast<P*>(b.state[0]);
    auto* v = static_cast<P*>(b.state[1]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      const LambCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      const LambLocal k(c);
      if (!c.trust) {
        lambMomentsApply(p, g, m, v, model, ch.begin, ch.end, k);
        return;
      }
      int64_t stat = ch.firstStat;
      for (int64_t rb = ch.begin; rb < ch.end; rb += ch.rowLen, ++stat) {
        lambMomentsStats(p, g, m, v, rb, std::min(rb + ch.rowLen, ch.end), k, &partials[2 * stat],
                         &partials[2 * stat + 1]);
      }
    });
  });
}

void lambUpdatePass(const StepBuffers& b, const LambCoeffs* groups, const float* tensorTrust) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* m = static_cast<const P*>(b.state[0]);
    const auto* v = static_cast<const P*>(b.state[1]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      const LambCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      if (!c.trust) return;
      lambApplyTrust(p, m, v, model, ch.begin, ch.end, LambLocal(c), tensorTrust[ch.tensor]);
    });
  });
}

}  // namespace npuscope::optim::detail
