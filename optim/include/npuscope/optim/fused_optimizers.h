// The eight fused optimizers, with torch_npu's names and defaults (torch_npu/optim/npu_fused_*.py).
// Formulas: docs/references.md, "Fused optimizers"; each class comment states its update.
// g grad, p param, t step (1-based), wd weight decay. Every step is one pass over the flat
// buffers (LAMB and AdamP: two, because their per-tensor norms need the whole tensor before the
// update), without per-parameter temporaries.
//
// Hyper-parameters are per param group and may be changed between steps through options(g) or
// setLr(). Betas are two fields (beta1, beta2).
#pragma once

#include <vector>

#include "npuscope/optim/fused_optimizer.h"

namespace npuscope::optim {

// ---------------------------------------------------------------------------------------------
// SGD, as torch.optim.SGD: g += wd*p; momentum buffer b = g on the first step, else
// b = μb + (1−dampening)g; g = g + μb (nesterov) or b; p −= lr*g.
struct NpuFusedSGDOptions {
  explicit NpuFusedSGDOptions(double lr) : lr(lr) {}  // lr has no default, as in torch
  double lr;
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;
  bool nesterov = false;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("momentum", momentum), f("dampening", dampening), f("weight_decay", weightDecay),
        f("nesterov", nesterov);
  }
};

class NpuFusedSGD : public FusedOptimizerWithOptions<NpuFusedSGDOptions> {
 public:
  NpuFusedSGD(const std::vector<at::Tensor>& params, const NpuFusedSGDOptions& options,
              FusedOptimizerConfig config = {});
  NpuFusedSGD(const std::vector<ParamGroup<NpuFusedSGDOptions>>& groups, const NpuFusedSGDOptions& defaults,
              FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedSGD"; }

 protected:
  void stepImpl(int64_t step) override;
};

// ---------------------------------------------------------------------------------------------
// Adam, as torch.optim.Adam: g += wd*p; m = β1m + (1−β1)g; v = β2v + (1−β2)g²;
// v̂ = max(v̂, v) with amsgrad; p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + ε).
struct NpuFusedAdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool amsgrad = false;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps), f("weight_decay", weightDecay),
        f("amsgrad", amsgrad);
  }
};

class NpuFusedAdam : public FusedOptimizerWithOptions<NpuFusedAdamOptions> {
 public:
  NpuFusedAdam(const std::vector<at::Tensor>& params, const NpuFusedAdamOptions& options = {},
               FusedOptimizerConfig config = {});
  NpuFusedAdam(const std::vector<ParamGroup<NpuFusedAdamOptions>>& groups, const NpuFusedAdamOptions& defaults = {},
               FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedAdam"; }

 protected:
  void stepImpl(int64_t step) override;
};

// ---------------------------------------------------------------------------------------------
// AdamW, as torch.optim.AdamW: p *= 1 − lr·wd, then Adam without the L2 term.
struct NpuFusedAdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 1e-2;
  bool amsgrad = false;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps), f("weight_decay", weightDecay),
        f("amsgrad", amsgrad);
  }
};

class NpuFusedAdamW : public FusedOptimizerWithOptions<NpuFusedAdamWOptions> {
 public:
  NpuFusedAdamW(const std::vector<at::Tensor>& params, const NpuFusedAdamWOptions& options = {},
                FusedOptimizerConfig config = {});
  NpuFusedAdamW(const std::vector<ParamGroup<NpuFusedAdamWOptions>>& groups,
                const NpuFusedAdamWOptions& defaults = {}, FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedAdamW"; }

 protected:
  void stepImpl(int64_t step) override;
};

// ---------------------------------------------------------------------------------------------
// AdamP (clovaai / timm / torch_npu): Adam moments and perturb = m / (√v/√(1−β2^t) + ε)
// (nesterov: (β1m + (1−β1)g) / denom). For parameters with more than one dimension, with
// cos(x, y) = |x·y| / (‖x‖+ε) / (‖y‖+ε): if max over rows of cos(g_row, p_row) (channel view,
// rows = first dimension) is below δ/√(row length), or else if cos(g, p) over the whole tensor
// (layer view) is below δ/√numel, the update is projected off p in that view,
// perturb −= p̂ · Σ(p̂·perturb) with p̂ = p/(‖p‖+ε) per row (or per tensor), and the weight
// decay is scaled by wdRatio. Then p *= 1 − lr·wd·ratio (when wd > 0);
// p −= lr/(1−β1^t) · perturb.
struct NpuFusedAdamPOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  double delta = 0.1;
  double wdRatio = 0.1;
  bool nesterov = false;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps), f("weight_decay", weightDecay),
        f("delta", delta), f("wd_ratio", wdRatio), f("nesterov", nesterov);
  }
};

class NpuFusedAdamP : public FusedOptimizerWithOptions<NpuFusedAdamPOptions> {
 public:
  NpuFusedAdamP(const std::vector<at::Tensor>& params, const NpuFusedAdamPOptions& options = {},
                FusedOptimizerConfig config = {});
  NpuFusedAdamP(const std::vector<ParamGroup<NpuFusedAdamPOptions>>& groups,
                const NpuFusedAdamPOptions& defaults = {}, FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedAdamP"; }

  // Projections applied by the last step, summed over tensors (for tests and diagnostics).
  struct ProjectionCounts {
    int64_t channel = 0;
    int64_t layer = 0;
    int64_t none = 0;
  };
  const ProjectionCounts& lastProjections() const { return projections_; }

 protected:
  void stepImpl(int64_t step) override;

 private:
  std::vector<std::shared_ptr<const detail::ChunkPlan>> channelPlans_;  // per bank, built on first step
  ProjectionCounts projections_;
};

// ---------------------------------------------------------------------------------------------
// LAMB. Default: torch_npu's NpuFusedLamb (the cybertronai variant): optionally g /= ‖g‖ over
// all gradients when that exceeds 1 (useGlobalGradNorm); m = β1m + (1−β1)g;
// v = β2v + (1−β2)g² (no bias correction); r = m/(√v+ε) + wd·p; per tensor
// trust = clamp(‖p‖, 0, 10)/‖r‖ (1 if either norm is 0, or always 1 with `adam`);
// p −= lr·trust·r.
// variant = kNvidia: apex FusedLAMB: g /= ‖g‖/maxGradNorm when the global norm exceeds
// maxGradNorm (> 0); with adamWMode off, g += wd·p; m = β1m + β3g (β3 = 1−β1 with
// gradAveraging, else 1); v = β2v + (1−β2)g²; u = (m/bc1) / (√(v/bc2)+ε) (bc = 1−β^t with
// biasCorrection, else 1), + wd·p in adamWMode; trust = ‖p‖/‖u‖ (1 if either is 0) when wd ≠ 0
// or useNvLamb, else 1; p −= lr·trust·u. (apex's own default weight decay is 0.01; here the
// group's weightDecay applies.)
enum class LambVariant : int { kAscend = 0, kNvidia = 1 };

struct NpuFusedLambOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weightDecay = 0.0;
  bool adam = false;               // kAscend: trust ratio always 1
  bool useGlobalGradNorm = false;  // kAscend: divide grads by the global grad norm when it is > 1
  LambVariant variant = LambVariant::kAscend;
  bool biasCorrection = true;      // kNvidia
  bool gradAveraging = true;       // kNvidia
  bool adamWMode = true;           // kNvidia: decoupled weight decay (else L2 on the gradient)
  double maxGradNorm = 1.0;        // kNvidia: global gradient clipping threshold, 0 disables
  bool useNvLamb = false;          // kNvidia: trust ratio even when weightDecay is 0

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("beta1", beta1), f("beta2", beta2), f("eps", eps), f("weight_decay", weightDecay),
        f("adam", adam), f("use_global_grad_norm", useGlobalGradNorm), f("variant", variant),
        f("bias_correction", biasCorrection), f("grad_averaging", gradAveraging), f("adam_w_mode", adamWMode),
        f("max_grad_norm", maxGradNorm), f("use_nvlamb", useNvLamb);
  }
};

class NpuFusedLamb : public FusedOptimizerWithOptions<NpuFusedLambOptions> {
 public:
  NpuFusedLamb(const std::vector<at::Tensor>& params, const NpuFusedLambOptions& options = {},
               FusedOptimizerConfig config = {});
  NpuFusedLamb(const std::vector<ParamGroup<NpuFusedLambOptions>>& groups, const NpuFusedLambOptions& defaults = {},
               FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedLamb"; }

  // Global gradient norm measured by the last step (0 when no group needed it).
  double lastGlobalGradNorm() const { return lastGlobalGradNorm_; }

 protected:
  void stepImpl(int64_t step) override;

 private:
  double lastGlobalGradNorm_ = 0.0;
};

// ---------------------------------------------------------------------------------------------
// Adadelta, as torch.optim.Adadelta: g += wd*p; v = ρv + (1−ρ)g²;
// Δ = √(u+ε)/√(v+ε)·g; p −= lr·Δ; u = ρu + (1−ρ)Δ².
struct NpuFusedAdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weightDecay = 0.0;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("rho", rho), f("eps", eps), f("weight_decay", weightDecay);
  }
};

class NpuFusedAdadelta : public FusedOptimizerWithOptions<NpuFusedAdadeltaOptions> {
 public:
  NpuFusedAdadelta(const std::vector<at::Tensor>& params, const NpuFusedAdadeltaOptions& options = {},
                   FusedOptimizerConfig config = {});
  NpuFusedAdadelta(const std::vector<ParamGroup<NpuFusedAdadeltaOptions>>& groups,
                   const NpuFusedAdadeltaOptions& defaults = {}, FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedAdadelta"; }

 protected:
  void stepImpl(int64_t step) override;
};

// ---------------------------------------------------------------------------------------------
// RMSprop, as torch.optim.RMSprop: g += wd*p; s = αs + (1−α)g²; centered: a = αa + (1−α)g,
// avg = √(s − a²) + ε, else avg = √s + ε; momentum: b = μb + g/avg, p −= lr·b; else
// p −= lr·g/avg.
struct NpuFusedRMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0;
  bool centered = false;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("alpha", alpha), f("eps", eps), f("weight_decay", weightDecay), f("momentum", momentum),
        f("centered", centered);
  }
};

class NpuFusedRMSprop : public FusedOptimizerWithOptions<NpuFusedRMSpropOptions> {
 public:
  NpuFusedRMSprop(const std::vector<at::Tensor>& params, const NpuFusedRMSpropOptions& options = {},
                  FusedOptimizerConfig config = {});
  NpuFusedRMSprop(const std::vector<ParamGroup<NpuFusedRMSpropOptions>>& groups,
                  const NpuFusedRMSpropOptions& defaults = {}, FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedRMSprop"; }

 protected:
  void stepImpl(int64_t step) override;
};

// ---------------------------------------------------------------------------------------------
// RMSprop the TensorFlow way (timm's RMSpropTF, torch_npu's NpuFusedRMSpropTF): weight decay
// as L2 (g += wd·p) or decoupled (p −= wd·p; timm's newer p *= 1 − lr·wd with
// decoupledDecayScaledByLr); s += (1−α)(g² − s); centered: a += (1−α)(g − a),
// avg = √(s − a² + ε), else avg = √(s + ε) (ε inside the root); momentum with lrInMomentum:
// b = μb + lr·g/avg, p −= b; momentum without: b = μb + g/avg, p −= lr·b; no momentum:
// p −= lr·g/avg.
// Initial square average: 1, like timm and current torch_npu (TensorFlow initialises to 1, so
// the first steps are not huge); older Ascend apex used 0, selectable with initialSquareAvg = 0.
struct NpuFusedRMSpropTFOptions {
  double lr = 1e-2;
  double alpha = 0.9;
  double eps = 1e-10;
  double weightDecay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  bool decoupledDecay = false;
  bool lrInMomentum = true;
  double initialSquareAvg = 1.0;
  bool decoupledDecayScaledByLr = false;

  void validate() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr), f("alpha", alpha), f("eps", eps), f("weight_decay", weightDecay), f("momentum", momentum),
        f("centered", centered), f("decoupled_decay", decoupledDecay), f("lr_in_momentum", lrInMomentum),
        f("initial_square_avg", initialSquareAvg), f("decoupled_decay_scaled_by_lr", decoupledDecayScaledByLr);
  }
};

class NpuFusedRMSpropTF : public FusedOptimizerWithOptions<NpuFusedRMSpropTFOptions> {
 public:
  NpuFusedRMSpropTF(const std::vector<at::Tensor>& params, const NpuFusedRMSpropTFOptions& options = {},
                    FusedOptimizerConfig config = {});
  NpuFusedRMSpropTF(const std::vector<ParamGroup<NpuFusedRMSpropTFOptions>>& groups,
                    const NpuFusedRMSpropTFOptions& defaults = {}, FusedOptimizerConfig config = {});
  const char* name() const override { return "NpuFusedRMSpropTF"; }

 protected:
  void stepImpl(int64_t step) override;
};

}  // namespace npuscope::optim

namespace npuscope::optim {

// Options of one param group by their state-dict names (see groupOptionValues()).
using OptionValues = std::vector<std::pair<std::string, double>>;

// The fused optimizer `name` — torch_npu's class name ("NpuFusedAdam") or the CLI's short name
// ("adam") — over `groups`; group g starts from the class's defaults and takes options[g] by
// name. NpuFusedSGD has no default lr: each group must give one. Unknown names, unknown
// options and invalid values throw c10::Error naming them.
std::shared_ptr<NpuFusedOptimizer> makeFusedOptimizer(const std::string& name,
                                                      const std::vector<std::vector<at::Tensor>>& groups,
                                                      const std::vector<OptionValues>& options,
                                                      FusedOptimizerConfig config = {});
// The eight class names, in the order of the CLI's short names.
const std::vector<std::string>& fusedOptimizerNames();

}  // namespace npuscope::optim
