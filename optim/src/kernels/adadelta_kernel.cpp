// Adadelta element loop, in torch.optim.Adadelta's op order:
//   g = g + wd·p;  v = v·ρ + ((1−ρ)·g)·g;  Δ = √(u+ε) / √(v+ε) · g;  p = p + (−lr)·Δ;
//   u = u·ρ + ((1−ρ)·Δ)·Δ.
#include "kernels/kernel_common.h"
#include "kernels/kernels.h"

namespace npuscope::optim::detail {
namespace {

template <typename P, typename M>
void adadeltaRange(P* __restrict p, const P* __restrict g, P* __restrict sq, P* __restrict acc, M* __restrict model,
                   int64_t begin, int64_t end, const AdadeltaCoeffs& c) {
  const float negLr = c.negLr;
  const float wd = c.weightDecay;
  const float rho = c.rho;
  const float oneMinusRho = c.oneMinusRho;
  const float eps = c.eps;
  for (int64_t i = begin; i < end; ++i) {
    float pi = load(p, i);
    const float gi = load(g, i) + wd * pi;
    const float si = load(sq, i) * rho + (oneMinusRho * gi) * gi;
    const float stdev = std::sqrt(si + eps);
    const float delta = std::sqrt(load(acc, i) + eps) / stdev * gi;
    pi = pi + negLr * delta;
    const float ai = load(acc, i) * rho + (oneMinusRho * delta) * delta;
    store(sq, i, si);
    store(acc, i, ai);
    store(p, i, pi);
    store(model, i, pi);
  }
}

}  // namespace

void adadeltaStep(const StepBuffers& b, const AdadeltaCoeffs* groups) {
  dispatchStep(b.type, b.modelType, [&](auto pt, auto mt) {
    using P = typename decltype(pt)::type;
    using M = typename decltype(mt)::type;
    auto* p = static_cast<P*>(b.param);
    const auto* g = static_cast<const P*>(b.grad);
    auto* sq = static_cast<P*>(b.state[0]);
    auto* acc = static_cast<P*>(b.state[1]);
    auto* model = static_cast<M*>(b.model);
    forEachChunk(*b.plan, [&](const Chunk& ch) {
      adadeltaRange(p, g, sq, acc, model, ch.begin, ch.end, groups[b.tensorGroup[ch.tensor]]);
    });
  });
}

}  // namespace npuscope::optim::detail
