// torch_npu's fused operators (torch.ops.npu.*, reached as torch_npu.npu_rms_norm & co.) on the
// emulated npu. Each is one dispatcher op, so the recorder sees one op under torch_npu's name and
// the cost model one device task, as a card runs one fused kernel. Each computes its documented
// formula in fp32 (the AI Core's vector units work in fp32 on fp16/bf16 inputs) and rounds its
// results to the input dtype as the device rounds (float status included). The formula's own
// ATen calls are the kernel's inside and are not recorded.
//
// Backward recomputes the formula with autograd on and differentiates it: the gradients are
// the formula's, recorded as the ops that compute them (a card runs fused backward kernels).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aten/npu_tensor.h"

namespace npuscope::npu::aten {
namespace {

using torch::autograd::variable_list;
using Formula = std::function<variable_list(const variable_list&)>;

// ---- the formulas (fp32 in, fp32 out; differentiable: backward recomputes them) -------------

at::Tensor rotateHalf(const at::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return at::cat({halves[1].neg(), halves[0]}, -1);
}

at::Tensor rotateInterleaved(const at::Tensor& x) {
  // (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)
  auto pairs = x.unflatten(-1, {x.size(-1) / 2, 2});
  return at::stack({pairs.select(-1, 1).neg(), pairs.select(-1, 0)}, -1).flatten(-2);
}

variable_list rmsNormFormula(const at::Tensor& x, const at::Tensor& gamma, double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - gamma.dim(); d < x.dim(); ++d) dims.push_back(d);
  at::Tensor rstd = (x * x).mean(dims, /*keepdim=*/true).add(eps).rsqrt();
  return {x * rstd * gamma, rstd};
}

at::Tensor rotaryFormula(const at::Tensor& x, const at::Tensor& r1, const at::Tensor& r2, const std::string& mode) {
  return x * r1 + (mode == "interleave" ? rotateInterleaved(x) : rotateHalf(x)) * r2;
}

at::Tensor swigluFormula(const at::Tensor& x, int64_t dim) {
  auto halves = x.chunk(2, dim);
  return at::silu(halves[0]) * halves[1];
}

at::Tensor fastGeluFormula(const at::Tensor& x) {
  // torch_npu's documented form: x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))
  at::Tensor a = x.abs();
  return x / (1 + (a * -1.702).exp()) * ((x - a) * 0.851).exp();
}

// Mask convention of torch_npu: true (or 1) marks a position that is masked out.
at::Tensor scaledMaskedSoftmaxFormula(const at::Tensor& x, const at::Tensor& mask, double scale, bool triu) {
  at::Tensor masked;
  if (triu) {
    const int64_t s = x.size(-2), k = x.size(-1);
    masked = at::ones({s, k}, x.options().dtype(at::kBool)).triu(1);
  } else {
    masked = mask.to(at::kBool);
  }
  return (x * scale).masked_fill(masked, -10000.0).softmax(-1);
}

// Attention over [B, N, S, D] tensors; key/value may have fewer heads (grouped-query attention).
struct AttentionArgs {
  int64_t head_num = 0;
  std::string layout;
  double scale = 1.0;
  int64_t sparse_mode = 0;
};

at::Tensor toBnsd(const at::Tensor& t, const std::string& layout, int64_t heads_hint, bool query, int64_t head_dim) {
  if (layout == "BNSD") return t;
  if (layout == "BSND") return t.transpose(1, 2);
  if (layout == "BSH" || layout == "SBH") {
    at::Tensor bsh = layout == "SBH" ? t.transpose(0, 1) : t;
    const int64_t n = query ? heads_hint : bsh.size(2) / head_dim;
    return bsh.unflatten(2, {n, bsh.size(2) / n}).transpose(1, 2);
  }
  TORCH_CHECK(false, "npu_fusion_attention: input_layout '", layout, "' is not emulated (expected BSH, SBH, BSND or BNSD)");
}

at::Tensor fromBnsd(const at::Tensor& o, const std::string& layout) {
  if (layout == "BNSD") return o;
  if (layout == "BSND") return o.transpose(1, 2);
  at::Tensor bsh = o.transpose(1, 2).flatten(2);
  return layout == "SBH" ? bsh.transpose(0, 1) : bsh;
}

int64_t headDim(const at::Tensor& q, const AttentionArgs& a) {
  if (a.layout == "BNSD" || a.layout == "BSND") return q.size(3);
  TORCH_CHECK(a.head_num > 0 && q.size(2) % a.head_num == 0, "npu_fusion_attention: head_num ", a.head_num,
              " does not divide the query's hidden size ", q.size(2));
  return q.size(2) / a.head_num;
}

// Returns {out (query's layout), softmax_max [B,N,Sq,8], softmax_sum [B,N,Sq,8]}.
variable_list attentionFormula(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                               const at::Tensor& pse, const at::Tensor& atten_mask, const AttentionArgs& a) {
  const int64_t d = headDim(query, a);
  at::Tensor q = toBnsd(query, a.layout, a.head_num, true, d);
  at::Tensor k = toBnsd(key, a.layout, a.head_num, false, d);
  at::Tensor v = toBnsd(value, a.layout, a.head_num, false, d);
  const int64_t n = q.size(1), nk = k.size(1);
  TORCH_CHECK(nk > 0 && n % nk == 0, "npu_fusion_attention: key heads (", nk, ") must divide query heads (", n, ")");
  if (nk != n) k = k.repeat_interleave(n / nk, 1), v = v.repeat_interleave(n / nk, 1);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * a.scale;
  if (pse.defined()) scores = scores + pse;
  const int64_t sq = scores.size(-2), skv = scores.size(-1);
  if (a.sparse_mode == 2 || a.sparse_mode == 3) {
    // Causal: the mask argument is the optimised 2048x2048 one; the causal mask itself is built.
    // 2 aligns the query with the top-left corner, 3 with the bottom-right.
    const int64_t shift = a.sparse_mode == 3 ? skv - sq : 0;
    scores = scores.masked_fill(at::ones({sq, skv}, scores.options().dtype(at::kBool)).triu(1 + shift),
                                -std::numeric_limits<float>::infinity());
  } else if (atten_mask.defined()) {
    scores = scores.masked_fill(atten_mask.to(at::kBool), -std::numeric_limits<float>::infinity());
  }
  at::Tensor mx = std::get<0>(scores.max(-1, /*keepdim=*/true));
  mx = at::where(at::isinf(mx), at::zeros_like(mx), mx);  // a fully masked row gives zeros, not NaN
  at::Tensor e = (scores - mx).exp();
  at::Tensor sum = e.sum(-1, /*keepdim=*/true);
  at::Tensor p = e / at::where(sum == 0, at::ones_like(sum), sum);
  at::Tensor out = fromBnsd(at::matmul(p, v), a.layout);
  return {out, mx.expand({-1, -1, -1, 8}), sum.expand({-1, -1, -1, 8})};
}

// ---- running a formula as one npu (or CPU) kernel --------------------------------------------

// Which results are rounded back to the inputs' dtype (the others stay fp32, as torch_npu's do).
using Rounding = std::vector<bool>;

// Runs `formula` over fp32 copies of `inputs` (npu ones aliased as CPU tensors without a copy,
// low-precision ones upcast) with the op observer silent, and gives the results back on the
// inputs' device: those marked in `round_back` in `dtype` (rounded as the device rounds).
variable_list runFused(const variable_list& inputs, c10::ScalarType dtype, const Rounding& round_back,
                       const Formula& formula) {
  int device = -1;
  for (const at::Tensor& t : inputs) {
    if (t.defined() && isNpu(t)) device = deviceIndex(t);
  }
  EmulatorWork quiet(deviceThread());  // the kernel's inside: not recorded (npu::emulator_work_counter)
  variable_list results;
  if (device < 0) {
    variable_list in;
    for (const at::Tensor& t : inputs) in.push_back(t.defined() && at::isFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t);
    results = formula(in);
    for (size_t i = 0; i < results.size(); ++i) {
      if (i < round_back.size() && round_back[i]) results[i] = results[i].to(dtype);
      results[i] = results[i].contiguous();
    }
    return results;
  }
  checkDtypeSupported(dtype, "npu fused op");
  DeviceAllocationScope scope(device);
  variable_list in;
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) {
      in.emplace_back();
      continue;
    }
    TORCH_CHECK(!isNpu(t) || deviceIndex(t) == device, "npu fused op: inputs on npu:", device, " and npu:", deviceIndex(t));
    at::Tensor cpu = isNpu(t) ? aliasAsCpu(t) : t;
    if (isLowPrecision(cpu.scalar_type())) {
      cpu = upcast(cpu);
    } else if (at::isFloatingType(cpu.scalar_type())) {
      cpu = cpu.to(at::kFloat);
    }
    in.push_back(cpu);
  }
  results = formula(in);
  for (size_t i = 0; i < results.size(); ++i) {
    at::Tensor r = results[i];
    if (i < round_back.size() && round_back[i] && isLowPrecision(dtype)) {
      r = downcast(r, dtype, device);
    } else {
      r = (i < round_back.size() && round_back[i] ? r.to(dtype) : r).contiguous();
      checkFloatStatus(r, device);
    }
    results[i] = wrapAsNpu(r, device);
  }
  return results;
}

// ---- autograd: backward differentiates the formula --------------------------------------------

class RecomputeBackward final : public torch::autograd::Node {
 public:
  RecomputeBackward(std::string name, const variable_list& inputs, Formula differentiable)
      : name_(std::move(name)), formula_(std::move(differentiable)) {
    for (const at::Tensor& t : inputs) {
      saved_.emplace_back(t, /*is_output=*/false);
      wants_.push_back(t.defined() && t.requires_grad());
    }
  }
  std::string name() const override { return name_; }

  variable_list apply(variable_list&& grads) override {
    variable_list in, wrt;
    std::vector<size_t> wrt_index;
    for (size_t i = 0; i < saved_.size(); ++i) {
      at::Tensor t = saved_[i].unpack();
      if (t.defined()) t = t.detach();
      if (wants_[i]) t.requires_grad_(true), wrt.push_back(t), wrt_index.push_back(i);
      in.push_back(t);
    }
    variable_list outs;
    {
      at::AutoGradMode on(true);
      outs = formula_(in);
    }
    variable_list ys, gs;
    for (size_t i = 0; i < outs.size() && i < grads.size(); ++i) {
      if (grads[i].defined() && outs[i].requires_grad()) ys.push_back(outs[i]), gs.push_back(grads[i]);
    }
    variable_list result(saved_.size());
    if (ys.empty() || wrt.empty()) return result;
    variable_list got = torch::autograd::grad(ys, wrt, gs, /*retain_graph=*/false, /*create_graph=*/false,
                                              /*allow_unused=*/true);
    for (size_t j = 0; j < got.size(); ++j) result[wrt_index[j]] = got[j];
    return result;
  }

  void release_variables() override { saved_.clear(); }

 private:
  std::string name_;
  Formula formula_;
  std::vector<torch::autograd::SavedVariable> saved_;
  std::vector<bool> wants_;
};

// Gives `outputs[0..differentiable)` a backward node that recomputes `formula` (which takes
// the inputs in their own dtypes and returns those outputs in theirs).
void attachBackward(const char* name, const variable_list& inputs, variable_list* outputs, size_t differentiable,
                    Formula formula) {
  bool needed = false;
  for (const at::Tensor& t : inputs) needed = needed || (t.defined() && t.requires_grad());
  if (!needed || !at::GradMode::is_enabled()) return;
  auto node = std::shared_ptr<RecomputeBackward>(new RecomputeBackward(name, inputs, std::move(formula)),
                                                 torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (size_t i = 0; i < differentiable && i < outputs->size(); ++i) torch::autograd::set_history((*outputs)[i], node);
}

// A formula over the inputs' own dtypes: fp32 inside, results rounded back like the kernel's.
Formula inOwnDtype(Formula fp32, Rounding round_back) {
  return [fp32 = std::move(fp32), round_back = std::move(round_back)](const variable_list& in) {
    c10::ScalarType dtype = in[0].scalar_type();
    variable_list f;
    for (const at::Tensor& t : in) f.push_back(t.defined() && at::isFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t);
    variable_list out = fp32(f);
    for (size_t i = 0; i < out.size(); ++i) {
      if (i < round_back.size() && round_back[i]) out[i] = out[i].to(dtype);
    }
    return out;
  };
}

constexpr auto kBelowAutograd = c10::after_autograd_keyset;

// ---- the operators: backend kernels (CPU and npu) and autograd kernels -------------------------

at::Tensor confusionTranspose(const at::Tensor& self, at::IntArrayRef perm, at::IntArrayRef shape, bool transpose_first) {
  // Data movement only: no fp32 round trip.
  EmulatorWork quiet(deviceThread());  // not recorded inside
  const int device = isNpu(self) ? deviceIndex(self) : -1;
  at::Tensor x = device >= 0 ? aliasAsCpu(self) : self;
  std::optional<DeviceAllocationScope> scope;
  if (device >= 0) scope.emplace(device);
  at::Tensor r = (transpose_first ? x.permute(perm).reshape(shape) : x.reshape(shape).permute(perm)).contiguous();
  return device >= 0 ? wrapAsNpu(r, device) : r;
}

std::tuple<at::Tensor, at::Tensor> rmsNorm(const at::Tensor& self, const at::Tensor& gamma, double eps) {
  auto r = runFused({self, gamma}, self.scalar_type(), {true, false},
                    [eps](const variable_list& in) { return rmsNormFormula(in[0], in[1], eps); });
  return {r[0], r[1]};
}

at::Tensor rotaryMul(const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2, c10::string_view mode) {
  TORCH_CHECK(mode == "half" || mode == "interleave", "npu_rotary_mul: rotary_mode '", std::string(mode),
              "' (expected 'half' or 'interleave')");
  std::string m(mode);
  return runFused({self, r1, r2}, self.scalar_type(), {true},
                  [m](const variable_list& in) { return variable_list{rotaryFormula(in[0], in[1], in[2], m)}; })[0];
}

at::Tensor swiglu(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.size(dim) % 2 == 0, "npu_swiglu: dimension ", dim, " of size ", self.size(dim), " is not even");
  return runFused({self}, self.scalar_type(), {true},
                  [dim](const variable_list& in) { return variable_list{swigluFormula(in[0], dim)}; })[0];
}

at::Tensor fastGelu(const at::Tensor& self) {
  return runFused({self}, self.scalar_type(), {true},
                  [](const variable_list& in) { return variable_list{fastGeluFormula(in[0])}; })[0];
}

at::Tensor scaledMaskedSoftmax(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& scale, bool triu) {
  const double s = scale.toDouble();
  return runFused({x, mask}, x.scalar_type(), {true}, [s, triu](const variable_list& in) {
    return variable_list{scaledMaskedSoftmaxFormula(in[0], in[1], s, triu)};
  })[0];
}

AttentionArgs attentionArgs(int64_t head_num, c10::string_view layout, double scale, double keep_prob,
                            int64_t pre_tokens, int64_t next_tokens, const c10::OptionalIntArrayRef& prefix,
                            const c10::OptionalIntArrayRef& seq_q, const c10::OptionalIntArrayRef& seq_kv, int64_t sparse_mode) {
  TORCH_CHECK(keep_prob == 1.0, "npu_fusion_attention: keep_prob ", keep_prob, " (dropout) is not emulated (expected 1.0)");
  TORCH_CHECK(!prefix.has_value() && !seq_q.has_value() && !seq_kv.has_value(),
              "npu_fusion_attention: prefix / actual_seq_qlen / actual_seq_kvlen (TND variable-length packing) are not emulated");
  TORCH_CHECK(sparse_mode == 0 || sparse_mode == 1 || sparse_mode == 2 || sparse_mode == 3,
              "npu_fusion_attention: sparse_mode ", sparse_mode, " is not emulated (expected 0, 1, 2 or 3)");
  TORCH_CHECK(layout == "BSH" || layout == "SBH" || layout == "BSND" || layout == "BNSD", "npu_fusion_attention: input_layout '",
              std::string(layout), "' is not emulated (expected BSH, SBH, BSND or BNSD)");
  constexpr int64_t kAll = 2147483647;
  TORCH_CHECK(sparse_mode >= 2 || (pre_tokens >= kAll && next_tokens >= kAll) ||
                  (pre_tokens >= kAll && next_tokens == 0),
              "npu_fusion_attention: a band of pre_tockens/next_tockens is not emulated (use atten_mask or sparse_mode 2/3)");
  AttentionArgs a;
  a.head_num = head_num;
  a.layout = std::string(layout);
  a.scale = scale;
  // next_tockens == 0 with every pre-token is the causal band.
  a.sparse_mode = sparse_mode >= 2 ? sparse_mode : (next_tokens == 0 && pre_tokens >= kAll ? 2 : sparse_mode);
  return a;
}

using AttentionResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t>;

AttentionResult fusionAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t head_num,
                                c10::string_view layout, const c10::optional<at::Tensor>& pse,
                                const c10::optional<at::Tensor>& padding_mask, const c10::optional<at::Tensor>& atten_mask,
                                double scale, double keep_prob, int64_t pre_tokens, int64_t next_tokens, int64_t inner_precise,
                                at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef seq_q, at::OptionalIntArrayRef seq_kv,
                                int64_t sparse_mode, bool gen_mask_parallel, bool sync) {
  (void)padding_mask, (void)inner_precise, (void)gen_mask_parallel, (void)sync;
  const AttentionArgs a =
      attentionArgs(head_num, layout, scale, keep_prob, pre_tokens, next_tokens, prefix, seq_q, seq_kv, sparse_mode);
  auto r = runFused({q, k, v, pse.value_or(at::Tensor()), atten_mask.value_or(at::Tensor())}, q.scalar_type(),
                    {true, false, false}, [a](const variable_list& in) {
                      return attentionFormula(in[0], in[1], in[2], in[3], in[4], a);
                    });
  at::Tensor softmax_out = at::empty({0}, q.options());
  return {r[0], r[1], r[2], softmax_out, 0, 0, 0};
}

// Autograd kernels: the backend kernel below autograd, then a recomputing backward node.

c10::OperatorHandle opNamed(const char* name) { return c10::Dispatcher::singleton().findSchemaOrThrow(name, ""); }

std::tuple<at::Tensor, at::Tensor> rmsNormAutograd(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& gamma,
                                                   double eps) {
  static auto op = opNamed("npu::npu_rms_norm").typed<decltype(rmsNorm)>();
  variable_list out(2);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    std::tie(out[0], out[1]) = op.redispatch(ks & kBelowAutograd, self, gamma, eps);
  }
  attachBackward("NpuRmsNormBackward", {self, gamma}, &out, 2,
                 inOwnDtype([eps](const variable_list& in) { return rmsNormFormula(in[0], in[1], eps); }, {true, false}));
  return {out[0], out[1]};
}

at::Tensor rotaryMulAutograd(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2,
                             c10::string_view mode) {
  static auto op = opNamed("npu::npu_rotary_mul").typed<decltype(rotaryMul)>();
  variable_list out(1);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out[0] = op.redispatch(ks & kBelowAutograd, self, r1, r2, mode);
  }
  std::string m(mode);
  attachBackward("NpuRotaryMulBackward", {self, r1, r2}, &out, 1,
                 inOwnDtype([m](const variable_list& in) { return variable_list{rotaryFormula(in[0], in[1], in[2], m)}; },
                            {true}));
  return out[0];
}

at::Tensor swigluAutograd(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim) {
  static auto op = opNamed("npu::npu_swiglu").typed<decltype(swiglu)>();
  variable_list out(1);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out[0] = op.redispatch(ks & kBelowAutograd, self, dim);
  }
  attachBackward("NpuSwigluBackward", {self}, &out, 1,
                 inOwnDtype([dim](const variable_list& in) { return variable_list{swigluFormula(in[0], dim)}; }, {true}));
  return out[0];
}

at::Tensor fastGeluAutograd(c10::DispatchKeySet ks, const at::Tensor& self) {
  static auto op = opNamed("npu::fast_gelu").typed<decltype(fastGelu)>();
  variable_list out(1);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out[0] = op.redispatch(ks & kBelowAutograd, self);
  }
  attachBackward("FastGeluBackward", {self}, &out, 1,
                 inOwnDtype([](const variable_list& in) { return variable_list{fastGeluFormula(in[0])}; }, {true}));
  return out[0];
}

at::Tensor scaledMaskedSoftmaxAutograd(c10::DispatchKeySet ks, const at::Tensor& x, const at::Tensor& mask,
                                       const at::Scalar& scale, bool triu) {
  static auto op = opNamed("npu::npu_scaled_masked_softmax").typed<decltype(scaledMaskedSoftmax)>();
  variable_list out(1);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out[0] = op.redispatch(ks & kBelowAutograd, x, mask, scale, triu);
  }
  const double s = scale.toDouble();
  attachBackward("NpuScaledMaskedSoftmaxBackward", {x, mask}, &out, 1, inOwnDtype([s, triu](const variable_list& in) {
                   return variable_list{scaledMaskedSoftmaxFormula(in[0], in[1], s, triu)};
                 }, {true}));
  return out[0];
}

AttentionResult fusionAttentionAutograd(c10::DispatchKeySet ks, const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, int64_t head_num, c10::string_view layout,
                                        const c10::optional<at::Tensor>& pse, const c10::optional<at::Tensor>& padding_mask,
                                        const c10::optional<at::Tensor>& atten_mask, double scale, double keep_prob,
                                        int64_t pre_tokens, int64_t next_tokens, int64_t inner_precise,
                                        at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef seq_q,
                                        at::OptionalIntArrayRef seq_kv, int64_t sparse_mode, bool gen_mask_parallel,
                                        bool sync) {
  static auto op = opNamed("npu::npu_fusion_attention").typed<decltype(fusionAttention)>();
  AttentionResult r;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    r = op.redispatch(ks & kBelowAutograd, q, k, v, head_num, layout, pse, padding_mask, atten_mask, scale, keep_prob,
                      pre_tokens, next_tokens, inner_precise, prefix, seq_q, seq_kv, sparse_mode, gen_mask_parallel, sync);
  }
  const AttentionArgs a =
      attentionArgs(head_num, layout, scale, keep_prob, pre_tokens, next_tokens, prefix, seq_q, seq_kv, sparse_mode);
  variable_list out{std::get<0>(r)};
  attachBackward("NpuFusionAttentionBackward", {q, k, v, pse.value_or(at::Tensor()), atten_mask.value_or(at::Tensor())},
                 &out, 1, inOwnDtype([a](const variable_list& in) {
                   return variable_list{attentionFormula(in[0], in[1], in[2], in[3], in[4], a)[0]};
                 }, {true}));
  std::get<0>(r) = out[0];
  return r;
}

at::Tensor confusionTransposeAutograd(c10::DispatchKeySet ks, const at::Tensor& self, at::IntArrayRef perm,
                                      at::IntArrayRef shape, bool transpose_first) {
  static auto op = opNamed("npu::npu_confusion_transpose").typed<decltype(confusionTranspose)>();
  variable_list out(1);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out[0] = op.redispatch(ks & kBelowAutograd, self, perm, shape, transpose_first);
  }
  std::vector<int64_t> p(perm.begin(), perm.end()), s(shape.begin(), shape.end());
  attachBackward("NpuConfusionTransposeBackward", {self}, &out, 1, [p, s, transpose_first](const variable_list& in) {
    return variable_list{transpose_first ? in[0].permute(p).reshape(s) : in[0].reshape(s).permute(p)};
  });
  return out[0];
}

}  // namespace

TORCH_LIBRARY(npu, m) {
  m.def("npu_confusion_transpose(Tensor self, int[] perm, int[] shape, bool transpose_first) -> Tensor");
  m.def("npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)");
  m.def("npu_rotary_mul(Tensor self, Tensor r1, Tensor r2, str rotary_mode='half') -> Tensor");
  m.def("npu_swiglu(Tensor self, int dim=-1) -> Tensor");
  m.def("fast_gelu(Tensor self) -> Tensor");
  m.def("npu_scaled_masked_softmax(Tensor x, Tensor mask, Scalar scale=1, bool fixed_triu_mask=False) -> Tensor");
  m.def("npu_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, "
        "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., "
        "int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, "
        "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
        "bool sync=False) -> (Tensor, Tensor, Tensor, Tensor, int, int, int)");
}

// The same kernels for CPU tensors (the reference a test compares with) and npu ones.
#define NPUSCOPE_FUSED_KERNELS(m)                                            \
  m.impl("npu_confusion_transpose", TORCH_FN(confusionTranspose));         \
  m.impl("npu_rms_norm", TORCH_FN(rmsNorm));                               \
  m.impl("npu_rotary_mul", TORCH_FN(rotaryMul));                           \
  m.impl("npu_swiglu", TORCH_FN(swiglu));                                  \
  m.impl("fast_gelu", TORCH_FN(fastGelu));                                 \
  m.impl("npu_scaled_masked_softmax", TORCH_FN(scaledMaskedSoftmax));      \
  m.impl("npu_fusion_attention", TORCH_FN(fusionAttention))

TORCH_LIBRARY_IMPL(npu, CPU, m) { NPUSCOPE_FUSED_KERNELS(m); }
TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) { NPUSCOPE_FUSED_KERNELS(m); }
#undef NPUSCOPE_FUSED_KERNELS

TORCH_LIBRARY_IMPL(npu, Autograd, m) {
  m.impl("npu_confusion_transpose", TORCH_FN(confusionTransposeAutograd));
  m.impl("npu_rms_norm", TORCH_FN(rmsNormAutograd));
  m.impl("npu_rotary_mul", TORCH_FN(rotaryMulAutograd));
  m.impl("npu_swiglu", TORCH_FN(swigluAutograd));
  m.impl("fast_gelu", TORCH_FN(fastGeluAutograd));
  m.impl("npu_scaled_masked_softmax", TORCH_FN(scaledMaskedSoftmaxAutograd));
  m.impl("npu_fusion_attention", TORCH_FN(fusionAttentionAutograd));
}

}  // namespace npuscope::npu::aten
