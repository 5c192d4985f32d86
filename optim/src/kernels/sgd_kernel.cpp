// SGD element loop: torch.optim.SGD's op order (d_p = g + wd·p; buf = μ·buf + (1−τ)·d_p;
// p = p + (−lr)·d_p).
#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

template <typename P, typename M, bool kMomentum, bool kNesterov, bool kInit>
void sgdRange(P* __restrict p, const P* __restrict g, P* __restrict buf, M* __restrict model, int64_t begin,
              int64_t end, const SgdCoeffs& c) {
  const float negLr = c.negLr;
  const float wd = c.weightDecay;
  const float mu = c.momentum;
  const float oneMinusDampening = c.oneMinusDampening;
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i);
    float d = load(g, i) + wd * pi;
    if constexpr (kMomentum) {
      const float bi = kInit ? d : load(buf, i) * mu + oneMinusDampening * d;
      store(buf, i, bi);
      d = kNesterov ? d + mu * bi : bi;
    }
    pi = pi + negLr * d;
    store(p, i, pi);
    store(model, i, pi);
  }
}

}  // namespace

void sgdStep(const StepBuffers& b, const SgdCoeffs* groups) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* buf = static_cast<P*>(b.state[0]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      const SgdCoeffs& c = groups[b.tensorGroup[ch.tensor]];
      if (!c.hasMomentum) {
        sgdRange<P, M, false, false, false>(p, g, buf, model, ch.begin, ch.end, c);
        return;
      }
      dispatchBool(c.nesterov, [&](auto nesterov) {
        dispatchBool(c.initBuffer, [&](auto init) {
          sgdRange<P, M, true, decltype(nesterov)::value, decltype(init)::value>(p, g, buf, model, ch.begin, ch.end,
                                                                               c);
        });
      });
    });
  });
}

}  // namespace npuscope::optim::detail
