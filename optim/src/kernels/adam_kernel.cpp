// Adam / AdamW element loop, in torch.optim.Adam's op order:
//   p = p·decay;  g = g + l2·p;  m = m·β1 + (1−β1)·g;  v = v·β2 + ((1−β2)·g)·g;
//   v̂ = max(v̂, v);  denom = √v̂ / √bc2 + ε;  p = p + (−lr/bc1 · m) / denom.
// One read of p, g, m, v and one write of p, m, v per element: 28 bytes in fp32.
#include <algorithm>

#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

template <typename P, typename M, bool kAmsgrad>
void adamRange(P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, P* __restrict vmax,
               M* __restrict model, int64_t begin, int64_t end, const AdamCoeffs& c) {
  const float decay = c.decay;
  const float l2 = c.l2;
  const float beta1 = c.beta1;
  const float oneMinusBeta1 = c.oneMinusBeta1;
  const float beta2 = c.beta2;
  const float oneMinusBeta2 = c.oneMinusBeta2;
  const float sqrtBc2 = c.sqrtBiasCorrection2;
  const float eps = c.eps;
  const float negStepSize = c.negStepSize;
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i) * decay;
    const float gi = load(g, i) + l2 * pi;
    const float mi = load(m, i) * beta1 + oneMinusBeta1 * gi;
    const float vi = load(v, i) * beta2 + (oneMinusBeta2 * gi) * gi;
    float vd = vi;
    if constexpr (kAmsgrad) {
      vd = std::max(load(vmax, i), vi);
      store(vmax, i, vd);
    }
    const float denom = std::sqrt(vd) / sqrtBc2 + eps;
    pi = pi + (negStepSize * mi) / denom;
    store(m, i, mi);
    store(v, i, vi);
    store(p, i, pi);
    store(model, i, pi);
  }
}

}  // namespace

void adamStep(const StepBuffers& b, const AdamCoeffs* groups) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* m = static_cast<P*>(b.state[0]);
    auto* v = static_cast<P*>(b.state[1]);
    auto* vmax = static_cast<P*>(b.state[2]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      const AdamCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      if (c.amsgrad) {
        adamRange<P, M, true>(p, g, m, v, vmax, model, ch.begin, ch.end, c);
      } else {
        adamRange<P, M, false>(p, g, m, v, vmax, model, ch.begin, ch.end, c);
      }
    });
  });
}

}  // namespace npuscope::optim::detail
