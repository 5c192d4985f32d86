// Reference optimizers for the parity tests, written plainly from the formulas of
// docs/references.md ("Fused optimizers"), one tensor and one element at a time, sharing no
// code with the library (only its option structs, as plain data).
//
// Element arithmetic is float32 like the fused kernels; scalar coefficients are computed in double
// and rounded once, the way torch passes a Python/C++ double to a float32 op. Norms and dot
// products accumulate in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "npuscope/optim/optim.h"

namespace npuscope::optim::test {

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<float> p;
  size_t group = 0;
  std::map<std::string, std::vector<float>> state;

  bool has(const std::string& name) const { return state.count(name) != 0; }
  std::vector<float>& slot(const std::string& name, float init = 0.0f) {
    auto it = state.find(name);
    if (it == state.end()) it = state.emplace(name, std::vector<float>(p.size(), init)).first;
    return it->second;
  }
};
using RefModel = std::vector<RefTensor>;
using Grads = std::vector<std::vector<float>>;

inline double sumSquares(const std::vector<float>& x) {
  double s = 0.0;
  for (float v : x) s += static_cast<double>(v) * v;
  return s;
}

inline float f(double v) { return static_cast<float>(v); }

// sgd: g += wd·p; b = g on the first step, else μb + (1−τ)g; nesterov g += μb else g = b; p −= lr·g.
inline void refSgd(RefModel& model, const Grads& grads, int64_t /*t*/, const std::vector<NpuFusedSGDOptions>& groups) {
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const float lr = f(o.lr), wd = f(o.weightDecay), mu = f(o.momentum), keep = f(1.0 - o.dampening);
    const bool first = !r.has("momentum_buffer");
    std::vector<float>* buf = o.momentum != 0.0 ? &r.slot("momentum_buffer") : nullptr;
    for (size_t i = 0; i < r.p.size(); ++i) {
      float g = grads[k][i] + wd * r.p[i];
      if (buf != nullptr) {
        float& b = (*buf)[i];
        b = first ? g : mu * b + keep * g;
        g = o.nesterov ? g + mu * b : b;
      }
      r.p[i] = r.p[i] - lr * g;
    }
  }
}

// adam: g += wd·p; m = β1m + (1−β1)g; v = β2v + (1−β2)g²; (amsgrad: v̂ = max(v̂, v));
// p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + ε). adamw: p *= 1 − lr·wd first, no L2 term.
template <typename Options>
void refAdam(RefModel& model, const Grads& grads, int64_t t, const std::vector<Options>& groups, bool decoupled) {
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    const float b1 = f(o.beta1), b2 = f(o.beta2), c1 = f(1.0 - o.beta1), c2 = f(1.0 - o.beta2), eps = f(o.eps);
    const float stepSize = f(o.lr / bc1), sqrtBc2 = f(std::sqrt(bc2)), wd = f(o.weightDecay);
    const float decay = f(1.0 - o.lr * o.weightDecay);
    auto& m = r.slot("exp_avg");
    auto& v = r.slot("exp_avg_sq");
    std::vector<float>* vmax = o.amsgrad ? &r.slot("max_exp_avg_sq") : nullptr;
    for (size_t i = 0; i < r.p.size(); ++i) {
      float p = r.p[i];
      float g = grads[k][i];
      if (decoupled) {
        p = p * decay;
      } else if (o.weightDecay != 0.0) {
        g = g + wd * p;
      }
      m[i] = b1 * m[i] + c1 * g;
      v[i] = b2 * v[i] + c2 * g * g;
      float vh = v[i];
      if (vmax != nullptr) {
        (*vmax)[i] = std::max((*vmax)[i], v[i]);
        vh = (*vmax)[i];
      }
      r.p[i] = p - stepSize * m[i] / (std::sqrt(vh) / sqrtBc2 + eps);
    }
  }
}

struct ProjectionCounts {
  int64_t channel = 0, layer = 0, none = 0;
};

// adamp (timm / torch_npu): Adam moments, perturb = m/denom (nesterov: (β1m + (1−β1)g)/denom);
// for ndim > 1, project perturb off p in the channel view, else the layer view, when
// max |cos(g, p)| < δ/√(row length), with cos = |g·p| / (‖g‖+ε) / (‖p‖+ε) and
// perturb −= p_n · Σ(p_n·perturb), p_n = p/(‖p‖+ε); the weight decay then uses wd·wd_ratio.
// p *= 1 − lr·wd·ratio (torch_npu: a float32 tensor op); p −= lr/(1−β1^t) · perturb.
inline void refAdamP(RefModel& model, const Grads& grads, int64_t t, const std::vector<NpuFusedAdamPOptions>& groups,
                     ProjectionCounts* counts) {
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const auto& g = grads[k];
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    const float b1 = f(o.beta1), b2 = f(o.beta2), c1 = f(1.0 - o.beta1), c2 = f(1.0 - o.beta2), eps = f(o.eps);
    const float stepSize = f(o.lr / bc1), sqrtBc2 = f(std::sqrt(bc2));
    auto& m = r.slot("exp_avg");
    auto& v = r.slot("exp_avg_sq");
    const size_t n = r.p.size();
    std::vector<float> perturb(n);
    for (size_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + c1 * g[i];
      v[i] = b2 * v[i] + c2 * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / sqrtBc2 + eps;
      perturb[i] = o.nesterov ? (b1 * m[i] + c1 * g[i]) / denom : m[i] / denom;
    }
    double wdRatio = 1.0;
    bool projected = false;
    if (r.shape.size() > 1) {
      const size_t channelRows = static_cast<size_t>(r.shape[0]);
      for (const size_t rows : {channelRows, size_t{1}}) {
        const size_t len = n / rows;
        double maxCos = 0.0;
        std::vector<double> pNorm(rows);
        for (size_t row = 0; row < rows; ++row) {
          double gp = 0.0, gg = 0.0, pp = 0.0;
          for (size_t j = row * len; j < (row + 1) * len; ++j) {
            gp += static_cast<double>(g[j]) * r.p[j];
            gg += static_cast<double>(g[j]) * g[j];
            pp += static_cast<double>(r.p[j]) * r.p[j];
          }
          pNorm[row] = std::sqrt(pp);
          maxCos = std::max(maxCos, std::abs(gp) / (std::sqrt(gg) + o.eps) / (pNorm[row] + o.eps));
        }
        if (maxCos < o.delta / std::sqrt(static_cast<double>(len))) {
          for (size_t row = 0; row < rows; ++row) {
            std::vector<float> pn(len);
            double dot = 0.0;
            for (size_t j = 0; j < len; ++j) {
              pn[j] = f(r.p[row * len + j] / (pNorm[row] + o.eps));
              dot += static_cast<double>(pn[j]) * perturb[row * len + j];
            }
            for (size_t j = 0; j < len; ++j) perturb[row * len + j] -= pn[j] * f(dot);
          }
          wdRatio = o.wdRatio;
          projected = true;
          if (counts) (rows == channelRows ? counts->channel : counts->layer) += 1;
          break;
        }
      }
    }
    if (!projected && counts) counts->none += 1;
    const float decay = o.weightDecay > 0.0 ? 1.0f - f(o.lr * o.weightDecay) * f(wdRatio) : 1.0f;
    for (size_t i = 0; i < n; ++i) r.p[i] = r.p[i] * decay - stepSize * perturb[i];
  }
}

// lamb, torch_npu / cybertronai: optional g /= ‖g‖_global when > 1; m = β1m + (1−β1)g;
// v = β2v + (1−β2)g²; r = m/(√v+ε) + wd·p; trust = clamp(‖p‖,0,10)/‖r‖ (1 if a norm is 0,
// always 1 with `adam`); p −= lr·trust·r.
// apex FusedLAMB: g /= ‖g‖/max_grad_norm when ‖g‖ > max_grad_norm; L2 mode g += wd·p;
// m = β1m + β3g; v = β2v + (1−β2)g²; u = (m/bc1)/(√(v/bc2)+ε) (+ wd·p in AdamW mode);
// trust = ‖p‖/‖u‖ when wd ≠ 0 or use_nvlamb (1 if a norm is 0); p −= lr·trust·u.
inline void refLamb(RefModel& model, const Grads& grads, int64_t t, const std::vector<NpuFusedLambOptions>& groups) {
  double globalSq = 0.0;
  for (const auto& g : grads) globalSq += sumSquares(g);
  const double globalNorm = std::sqrt(globalSq);
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const bool nv = o.variant == LambVariant::kNvidia;
    float divisor = 1.0f;
    if (!nv && o.useGlobalGradNorm && globalNorm > 1.0) divisor = f(globalNorm);
    if (nv && o.maxGradNorm > 0.0 && globalNorm > o.maxGradNorm) divisor = f(globalNorm / o.maxGradNorm);
    const float b1 = f(o.beta1), b2 = f(o.beta2), c2 = f(1.0 - o.beta2), eps = f(o.eps), wd = f(o.weightDecay);
    const float beta3 = nv && !o.gradAveraging ? 1.0f : f(1.0 - o.beta1);
    const bool bias = nv && o.biasCorrection;
    const float bc1 = bias ? f(1.0 - std::pow(o.beta1, static_cast<double>(t))) : 1.0f;
    const float bc2 = bias ? f(1.0 - std::pow(o.beta2, static_cast<double>(t))) : 1.0f;
    auto& m = r.slot("exp_avg");
    auto& v = r.slot("exp_avg_sq");
    std::vector<float> u(r.p.size());
    for (size_t i = 0; i < r.p.size(); ++i) {
      float g = grads[k][i] / divisor;
      if (nv && !o.adamWMode) g = g + wd * r.p[i];
      m[i] = b1 * m[i] + beta3 * g;
      v[i] = b2 * v[i] + c2 * g * g;
      if (!nv) {
        u[i] = m[i] / (std::sqrt(v[i]) + eps);
        if (o.weightDecay != 0.0) u[i] += wd * r.p[i];
      } else {
        u[i] = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
        if (o.adamWMode) u[i] += wd * r.p[i];
      }
    }
    const double pNorm = std::sqrt(sumSquares(r.p));
    const double uNorm = std::sqrt(sumSquares(u));
    double trust = 1.0;
    if (!nv && !o.adam) {
      const double w = std::min(std::max(pNorm, 0.0), 10.0);
      trust = w == 0.0 || uNorm == 0.0 ? 1.0 : w / uNorm;
    }
    if (nv && (o.weightDecay != 0.0 || o.useNvLamb)) trust = pNorm != 0.0 && uNorm != 0.0 ? pNorm / uNorm : 1.0;
    for (size_t i = 0; i < r.p.size(); ++i) r.p[i] = r.p[i] - f(o.lr) * f(trust) * u[i];
  }
}

// adadelta: g += wd·p; v = ρv + (1−ρ)g²; Δ = √(u+ε)/√(v+ε)·g; p −= lr·Δ; u = ρu + (1−ρ)Δ².
inline void refAdadelta(RefModel& model, const Grads& grads, int64_t /*t*/,
                        const std::vector<NpuFusedAdadeltaOptions>& groups) {
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const float lr = f(o.lr), rho = f(o.rho), c = f(1.0 - o.rho), eps = f(o.eps), wd = f(o.weightDecay);
    auto& sq = r.slot("square_avg");
    auto& acc = r.slot("acc_delta");
    for (size_t i = 0; i < r.p.size(); ++i) {
      const float g = grads[k][i] + wd * r.p[i];
      sq[i] = rho * sq[i] + c * g * g;
      const float delta = std::sqrt(acc[i] + eps) / std::sqrt(sq[i] + eps) * g;
      r.p[i] = r.p[i] - lr * delta;
      acc[i] = rho * acc[i] + c * delta * delta;
    }
  }
}

// rmsprop (torch): g += wd·p; s = αs + (1−α)g²; centered: a = αa + (1−α)g, avg = √(s − a²) + ε,
// else √s + ε; momentum: b = μb + g/avg, p −= lr·b; else p −= lr·g/avg.
inline void refRMSprop(RefModel& model, const Grads& grads, int64_t /*t*/,
                       const std::vector<NpuFusedRMSpropOptions>& groups) {
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const float lr = f(o.lr), alpha = f(o.alpha), c = f(1.0 - o.alpha), eps = f(o.eps), wd = f(o.weightDecay);
    const float mu = f(o.momentum);
    auto& sq = r.slot("square_avg");
    for (size_t i = 0; i < r.p.size(); ++i) {
      const float g = grads[k][i] + wd * r.p[i];
      sq[i] = alpha * sq[i] + c * g * g;
      float avg;
      if (o.centered) {
        auto& ga = r.slot("grad_avg");
        ga[i] = alpha * ga[i] + c * g;
        avg = std::sqrt(sq[i] - ga[i] * ga[i]) + eps;
      } else {
        avg = std::sqrt(sq[i]) + eps;
      }
      if (o.momentum > 0.0) {
        auto& b = r.slot("momentum_buffer");
        b[i] = mu * b[i] + g / avg;
        r.p[i] = r.p[i] - lr * b[i];
      } else {
        r.p[i] = r.p[i] - lr * g / avg;
      }
    }
  }
}

// rmsprop_tf (timm / torch_npu): decoupled decay p −= wd·p (or lr·wd·p), else g += wd·p;
// s += (1−α)(g² − s) from s0 = initialSquareAvg; centered: a += (1−α)(g − a),
// avg = √(s − a² + ε), else √(s + ε); momentum with lr inside: b = μb + lr·g/avg, p −= b;
// without: b = μb + g/avg, p −= lr·b; no momentum: p −= lr·g/avg.
inline void refRMSpropTF(RefModel& model, const Grads& grads, int64_t /*t*/,
                         const std::vector<NpuFusedRMSpropTFOptions>& groups) {
  for (size_t k = 0; k < model.size(); ++k) {
    RefTensor& r = model[k];
    const auto& o = groups[r.group];
    const float lr = f(o.lr), c = f(1.0 - o.alpha), eps = f(o.eps), wd = f(o.weightDecay), mu = f(o.momentum);
    const float decoupledWd = f(o.decoupledDecayScaledByLr ? o.lr * o.weightDecay : o.weightDecay);
    auto& sq = r.slot("square_avg", f(o.initialSquareAvg));
    for (size_t i = 0; i < r.p.size(); ++i) {
      float g = grads[k][i];
      if (o.weightDecay != 0.0) {
        if (o.decoupledDecay) {
          r.p[i] = r.p[i] - decoupledWd * r.p[i];
        } else {
          g = g + wd * r.p[i];
        }
      }
      sq[i] = sq[i] + c * (g * g - sq[i]);
      float avg;
      if (o.centered) {
        auto& ga = r.slot("grad_avg");
        ga[i] = ga[i] + c * (g - ga[i]);
        avg = std::sqrt(sq[i] - ga[i] * ga[i] + eps);
      } else {
        avg = std::sqrt(sq[i] + eps);
      }
      if (o.momentum > 0.0) {
        auto& b = r.slot("momentum_buffer");
        if (o.lrInMomentum) {
          b[i] = mu * b[i] + lr * g / avg;
          r.p[i] = r.p[i] - b[i];
        } else {
          b[i] = mu * b[i] + g / avg;
          r.p[i] = r.p[i] - lr * b[i];
        }
      } else {
        r.p[i] = r.p[i] - lr * g / avg;
      }
    }
  }
}

}  // namespace npuscope::optim::test
