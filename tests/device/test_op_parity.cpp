// Op parity of the npu device against libtorch's CPU kernels, in the spirit of torch_npu's
// test/test_network_ops: every case builds its inputs on the CPU from a fixed seed, copies them to
// npu:0, runs the same code on both devices and compares the npu result (brought back with
// .cpu()) with the CPU one. Ops with gradients also run backward from the same upstream gradient
// on both devices and compare the gradients of every leaf.
//
//  * fp32: the npu runs the very CPU kernel over the same bytes (zero-copy fallback), so results
//    must be bit-identical (compared as raw bits, so -0/+0 and NaN payloads count too). A case
//    that needs a tolerance states it, with the reason, where it is declared.
//  * fp16 / bf16: the npu computes in fp32 and rounds the result to the tensor's dtype. The
//    reference is the fp32 CPU op on the same (already rounded) inputs, so the only difference is
//    rounding of results: one rounding for ops that are a single kernel, a few for composite ops
//    whose intermediates are rounded too (cross_entropy = log_softmax + nll_loss, ...).
//      fp16: rtol 2e-3 (~4 half-ulps, fp16 has 11 significant bits: 2^-11 = 4.9e-4), atol 1e-3
//      bf16: rtol 1.6e-2 (~4 half-ulps, bf16 has 8 significant bits: 2^-8 = 3.9e-3),  atol 1e-2
//    Gradients go through a chain of backward kernels, each rounded: 4x those tolerances.
//  * Every npu result must be an npu tensor; in-place and out= results must be the npu tensor
//    they wrote (same TensorImpl, same data pointer unless a resize had to grow it); views must
//    share the storage of the npu tensor they view; inputs must afterwards equal the CPU inputs
//    (which checks what in-place ops, out= arguments and batch_norm's running stats received).
//
// The tables are data: each entry names the ATen op it covers, so a failing test names the op,
// and OpParityCoverage counts the distinct ops so the suite cannot silently shrink.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cctype>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "npuscope/device/npu.h"

namespace npu = npuscope::npu;
using Tensors = std::vector<at::Tensor>;
using at::indexing::None;
using at::indexing::Slice;

namespace {

constexpr uint64_t kSeed = 20240607;
c10::Device dev() { return npu::device(0); }

struct Tol {
  double rtol = 0;
  double atol = 0;
  bool exact() const { return rtol == 0 && atol == 0; }
};

struct OpCase {
  std::string name;  // test name (unique, [A-Za-z0-9_])
  std::string op;    // the ATen op it covers, "name.overload" as in native_functions.yaml
  std::function<Tensors()> make;                     // CPU inputs, built under kSeed
  std::function<Tensors(const Tensors&)> fn;         // runs on either device
  std::vector<int> grad_args;                        // inputs that are autograd leaves
  Tol tol;                                           // fp32 only; exact by default
  std::string tol_reason;
  int alias_arg = -1;    // output 0 is this input, same memory (in-place / out= of the right size)
  int resized_arg = -1;  // output 0 is this input, which the op had to resize (out= wrong size)
  int view_of = -1;      // every output is a view of this input (shares its storage)
  double lp_scale = 1;   // low-precision tolerance multiplier (composite ops round more often)
  c10::ScalarType lp_out = c10::ScalarType::Undefined;  // low-precision result dtype if not the input's
  std::vector<int> keep_fp32;  // low precision: inputs that stay fp32 on npu (AMP-style parameters)
  // A device bug this case reproduces (see runChecked): the case still runs in full; while it
  // fails it is reported as skipped with this text, and it must stay within `bug_within`.
  std::string known_bug;
  c10::optional<Tol> bug_within;

  OpCase& grads(std::vector<int> g) { grad_args = std::move(g); return *this; }
  OpCase& tolerance(double r, double a, std::string why) { tol = {r, a}; tol_reason = std::move(why); return *this; }
  OpCase& aliases(int i) { alias_arg = i; return *this; }
  OpCase& resizes(int i) { resized_arg = i; return *this; }
  OpCase& views(int i) { view_of = i; return *this; }
  OpCase& lpScale(double s) { lp_scale = s; return *this; }
  OpCase& lpOut(c10::ScalarType s) { lp_out = s; return *this; }
  OpCase& named(std::string n) { name = std::move(n); return *this; }
  OpCase& keepFp32(std::vector<int> k) { keep_fp32 = std::move(k); return *this; }
  OpCase& knownBug(std::string what, c10::optional<Tol> within = c10::nullopt) {
    known_bug = std::move(what);
    bug_within = within;
    return *this;
  }
};

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name << " (" << c.op << ")"; }

// ---- input helpers (called inside make(), under the seed) --------------------------------------
at::Tensor R(at::IntArrayRef s) { return at::randn(s); }
at::Tensor P(at::IntArrayRef s) { return at::rand(s) + 0.5; }  // positive, away from 0
at::Tensor U(at::IntArrayRef s, double lo, double hi) { return at::rand(s) * (hi - lo) + lo; }
at::Tensor I(int64_t hi, at::IntArrayRef s) { return at::randint(hi, s, at::kLong); }
at::Tensor B(at::IntArrayRef s) { return at::rand(s).gt(0.5); }
at::Tensor L(std::vector<int64_t> v) { return at::tensor(v, at::kLong); }
// A permutation of 0..n-1 along dim 1 for each of `rows` rows (scatter without duplicates).
at::Tensor PermRows(int64_t rows, int64_t n) {
  Tensors r;
  for (int64_t i = 0; i < rows; ++i) r.push_back(at::randperm(n, at::kLong));
  return at::stack(r);
}
std::vector<int64_t> V(std::initializer_list<int64_t> v) { return v; }

c10::List<c10::optional<at::Tensor>> Idx(std::initializer_list<c10::optional<at::Tensor>> l) {
  c10::List<c10::optional<at::Tensor>> out;
  for (const auto& t : l) out.push_back(t);
  return out;
}

#define FN [](const Tensors& a) -> Tensors

// ---- the table builder -------------------------------------------------------------------------
class Table {
 public:
  OpCase& add(const std::string& op, std::function<Tensors()> make, std::function<Tensors(const Tensors&)> fn) {
    OpCase c;
    c.op = op;
    c.make = std::move(make);
    c.fn = std::move(fn);
    cases_.push_back(std::move(c));
    return cases_.back();
  }
  std::vector<OpCase> take() {
    // Test names: the case's name, else the op's; duplicates get a numeric suffix.
    std::map<std::string, int> seen;
    for (auto& c : cases_) {
      std::string n = c.name.empty() ? c.op : c.name;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      if (n.front() == '_') n = "u" + n;
      const int k = seen[n]++;
      c.name = k == 0 ? n : n + "_" + std::to_string(k + 1);
    }
    return std::move(cases_);
  }

 private:
  std::vector<OpCase> cases_;
};

// ================================================================================================
// fp32 cases
// ================================================================================================
// Ops with a CompositeImplicitAutograd kernel besides their CPU kernel (native_layer_norm,
// native_group_norm, silu_backward, mish_backward) would run a decomposition on PrivateUse1; the
// device routes them to its fallback explicitly, and the cases below hold it to bit-identity.
std::vector<OpCase> fp32Cases() {
  Table t;
  const auto R45 = [] { return Tensors{R({4, 5})}; };
  const auto P45 = [] { return Tensors{P({4, 5})}; };
  const auto R45x2 = [] { return Tensors{R({4, 5}), R({4, 5})}; };

  // ---- elementwise unary ------------------------------------------------------------------------
  t.add("neg", R45, FN { return {at::neg(a[0])}; }).grads({0});
  t.add("abs", R45, FN { return {at::abs(a[0])}; }).grads({0});
  t.add("exp", R45, FN { return {at::exp(a[0])}; }).grads({0});
  t.add("log", P45, FN { return {at::log(a[0])}; }).grads({0});
  t.add("sqrt", P45, FN { return {at::sqrt(a[0])}; }).grads({0});
  t.add("rsqrt", P45, FN { return {at::rsqrt(a[0])}; }).grads({0});
  t.add("sin", R45, FN { return {at::sin(a[0])}; }).grads({0});
  t.add("cos", R45, FN { return {at::cos(a[0])}; }).grads({0});
  t.add("reciprocal", P45, FN { return {at::reciprocal(a[0])}; }).grads({0});
  t.add("floor", [] { return Tensors{R({4, 5}) * 3}; }, FN { return {at::floor(a[0])}; });
  t.add("ceil", [] { return Tensors{R({4, 5}) * 3}; }, FN { return {at::ceil(a[0])}; });
  t.add("round", [] { return Tensors{R({4, 5}) * 3}; }, FN { return {at::round(a[0])}; });
  t.add("trunc", [] { return Tensors{R({4, 5}) * 3}; }, FN { return {at::trunc(a[0])}; });
  t.add("sign", [] { return Tensors{at::cat({R({8}), at::zeros({2})})}; }, FN { return {at::sign(a[0])}; });
  t.add("expm1", R45, FN { return {at::expm1(a[0])}; }).grads({0});
  t.add("log1p", P45, FN { return {at::log1p(a[0])}; }).grads({0});
  t.add("erf", R45, FN { return {at::erf(a[0])}; }).grads({0});
  t.add("erfinv", [] { return Tensors{U({4, 5}, -0.9, 0.9)}; }, FN { return {at::erfinv(a[0])}; }).grads({0});
  t.add("square", R45, FN { return {at::square(a[0])}; }).grads({0});
  t.add("frac", [] { return Tensors{R({4, 5}) * 3}; }, FN { return {at::frac(a[0])}; }).grads({0});
  t.add("exp2", R45, FN { return {at::exp2(a[0])}; }).grads({0});
  t.add("log2", P45, FN { return {at::log2(a[0])}; }).grads({0});
  t.add("atan", R45, FN { return {at::atan(a[0])}; }).grads({0});
  t.add("asin", [] { return Tensors{U({4, 5}, -0.9, 0.9)}; }, FN { return {at::asin(a[0])}; }).grads({0});
  t.add("sinh", R45, FN { return {at::sinh(a[0])}; }).grads({0});

  // ---- elementwise binary, scalars, comparisons, where, clamp, pow ------------------------------
  t.add("add.Tensor", R45x2, FN { return {at::add(a[0], a[1], 2.5)}; }).grads({0, 1});
  t.add("add.Tensor", [] { return Tensors{R({3, 4, 5}), R({5})}; }, FN { return {a[0] + a[1]}; })
      .grads({0, 1}).named("add_broadcast");
  t.add("add.Scalar", R45, FN { return {at::add(a[0], 1.25)}; }).grads({0});
  t.add("add.Tensor", [] { return Tensors{I(100, {4, 5}), I(100, {4, 5})}; }, FN { return {a[0] + a[1]}; })
      .named("add_int64");
  t.add("sub.Tensor", R45x2, FN { return {at::sub(a[0], a[1], 0.5)}; }).grads({0, 1});
  t.add("mul.Tensor", R45x2, FN { return {at::mul(a[0], a[1])}; }).grads({0, 1});
  t.add("mul.Tensor", [] { return Tensors{I(10, {4, 5}), R({4, 5})}; }, FN { return {a[0] * a[1]}; })
      .named("mul_int_times_float_promotes");
  t.add("mul.Scalar", R45, FN { return {at::mul(a[0], -3.5)}; }).grads({0});
  t.add("div.Tensor", [] { return Tensors{R({4, 5}), P({4, 5})}; }, FN { return {at::div(a[0], a[1])}; })
      .grads({0, 1});
  t.add("div.Tensor_mode", [] { return Tensors{R({4, 5}) * 5, P({4, 5})}; },
        FN { return {at::div(a[0], a[1], "floor"), at::div(a[0], a[1], "trunc")}; });
  t.add("div.Scalar", R45, FN { return {at::div(a[0], 7.0)}; }).grads({0});
  t.add("remainder.Tensor", [] { return Tensors{R({4, 5}) * 5, P({4, 5})}; },
        FN { return {at::remainder(a[0], a[1])}; });
  t.add("fmod.Tensor", [] { return Tensors{R({4, 5}) * 5, P({4, 5})}; }, FN { return {at::fmod(a[0], a[1])}; });
  t.add("maximum", R45x2, FN { return {at::maximum(a[0], a[1])}; }).grads({0, 1});
  t.add("minimum", R45x2, FN { return {at::minimum(a[0], a[1])}; }).grads({0, 1});
  t.add("atan2", R45x2, FN { return {at::atan2(a[0], a[1])}; }).grads({0, 1});
  t.add("pow.Tensor_Tensor", [] { return Tensors{P({4, 5}), R({4, 5})}; }, FN { return {at::pow(a[0], a[1])}; })
      .grads({0, 1});
  t.add("pow.Tensor_Scalar", R45, FN { return {at::pow(a[0], 3)}; }).grads({0});
  t.add("pow.Scalar", R45, FN { return {at::pow(2.5, a[0])}; }).grads({0});
  t.add("rsub.Scalar", R45, FN { return {at::rsub(a[0], 1.5)}; }).grads({0});
  t.add("lerp.Scalar", R45x2, FN { return {at::lerp(a[0], a[1], 0.3)}; }).grads({0, 1});
  t.add("addcmul", [] { return Tensors{R({4, 5}), R({4, 5}), R({4, 5})}; },
        FN { return {at::addcmul(a[0], a[1], a[2], 0.5)}; }).grads({0, 1, 2});
  t.add("addcdiv", [] { return Tensors{R({4, 5}), R({4, 5}), P({4, 5})}; },
        FN { return {at::addcdiv(a[0], a[1], a[2], 0.5)}; }).grads({0, 1, 2});
  t.add("where.self", [] { return Tensors{B({4, 5}), R({4, 5}), R({4, 5})}; },
        FN { return {at::where(a[0], a[1], a[2])}; }).grads({1, 2});
  t.add("clamp", R45, FN { return {at::clamp(a[0], -0.5, 0.7)}; }).grads({0});
  t.add("clamp.Tensor", [] { return Tensors{R({4, 5}), R({4, 5}) - 1, R({4, 5}) + 1}; },
        FN { return {at::clamp(a[0], a[1], a[2])}; }).grads({0});
  t.add("clamp_min", R45, FN { return {at::clamp_min(a[0], 0.1)}; }).grads({0});
  t.add("eq.Tensor", [] { return Tensors{at::round(R({4, 5})), at::round(R({4, 5}))}; },
        FN { return {at::eq(a[0], a[1])}; });
  t.add("ne.Scalar", [] { return Tensors{at::round(R({4, 5}))}; }, FN { return {at::ne(a[0], 0)}; });
  t.add("lt.Tensor", R45x2, FN { return {at::lt(a[0], a[1])}; });
  t.add("le.Scalar", R45, FN { return {at::le(a[0], 0.25)}; });
  t.add("gt.Tensor", R45x2, FN { return {at::gt(a[0], a[1])}; });
  t.add("ge.Tensor", [] { return Tensors{R({4, 5}), R({5})}; }, FN { return {at::ge(a[0], a[1])}; });
  t.add("logical_and", [] { return Tensors{B({4, 5}), B({4, 5})}; }, FN { return {at::logical_and(a[0], a[1])}; });
  t.add("logical_not", [] { return Tensors{B({4, 5})}; }, FN { return {at::logical_not(a[0])}; });
  t.add("bitwise_and.Tensor", [] { return Tensors{I(1 << 20, {4, 5}), I(1 << 20, {4, 5})}; },
        FN { return {at::bitwise_and(a[0], a[1])}; });
  const auto withNonFinite = [] {
    at::Tensor x = R({12});
    x[1] = NAN;
    x[4] = INFINITY;
    x[7] = -INFINITY;
    return Tensors{x};
  };
  t.add("isnan", withNonFinite, FN { return {at::isnan(a[0])}; });
  t.add("isinf", withNonFinite, FN { return {at::isinf(a[0])}; });
  t.add("nan_to_num", withNonFinite, FN { return {at::nan_to_num(a[0], 0.0, 100.0, -100.0)}; });
  t.add("sigmoid", R45, FN { return {at::sigmoid(a[0])}; }).grads({0});
  t.add("tanh", R45, FN { return {at::tanh(a[0])}; }).grads({0});

  // ---- reductions -------------------------------------------------------------------------------
  const auto R67 = [] { return Tensors{R({6, 7})}; };
  t.add("sum", R67, FN { return {at::sum(a[0])}; }).grads({0});
  t.add("sum.dim_IntList", [] { return Tensors{R({3, 4, 5})}; }, FN { return {at::sum(a[0], std::vector<int64_t>{0, 2}, true)}; })
      .grads({0});
  t.add("sum", [] { return Tensors{I(1000, {6, 7})}; }, FN { return {at::sum(a[0])}; }).named("sum_int64");
  t.add("mean.dim", [] { return Tensors{R({3, 4, 5})}; }, FN { return {at::mean(a[0], {1})}; }).grads({0});
  t.add("mean", R67, FN { return {at::mean(a[0])}; }).grads({0});
  t.add("max", R67, FN { return {at::max(a[0])}; }).grads({0});
  t.add("max.dim", R67, FN {
    auto r = at::max(a[0], 1, true);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("min.dim", R67, FN {
    auto r = at::min(a[0], 0);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("amax", R67, FN { return {at::amax(a[0], {1})}; }).grads({0});
  t.add("amin", R67, FN { return {at::amin(a[0], {0})}; }).grads({0});
  t.add("argmax", R67, FN { return {at::argmax(a[0], 1), at::argmax(a[0])}; });
  t.add("argmin", R67, FN { return {at::argmin(a[0], 0)}; });
  t.add("prod.dim_int", [] { return Tensors{U({6, 7}, 0.5, 1.5)}; }, FN { return {at::prod(a[0], 1)}; })
      .grads({0});
  t.add("prod", [] { return Tensors{U({6, 7}, 0.8, 1.2)}; }, FN { return {at::prod(a[0])}; }).grads({0});
  t.add("std.dim", R67, FN { return {at::std(a[0], at::IntArrayRef{1}, true, false)}; }).grads({0});
  t.add("var.dim", R67, FN { return {at::var(a[0], at::IntArrayRef{0}, false, true)}; }).grads({0});
  t.add("var_mean.dim", R67, FN {
    auto r = at::var_mean(a[0], at::IntArrayRef{1}, true, false);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("norm.ScalarOpt_dim", R67, FN { return {at::norm(a[0], 2, at::IntArrayRef{1}, false)}; }).grads({0});
  t.add("norm.Scalar", R67, FN { return {at::norm(a[0], 1)}; }).grads({0});
  t.add("linalg_vector_norm", R67, FN { return {at::linalg_vector_norm(a[0], 3)}; }).grads({0});
  t.add("logsumexp", R67, FN { return {at::logsumexp(a[0], {1}, false)}; }).grads({0});
  t.add("cumsum", R67, FN { return {at::cumsum(a[0], 1)}; }).grads({0});
  t.add("cumprod", [] { return Tensors{U({6, 7}, 0.5, 1.5)}; }, FN { return {at::cumprod(a[0], 0)}; })
      .grads({0});
  t.add("all.dim", [] { return Tensors{B({6, 7})}; }, FN { return {at::all(a[0], 1)}; });
  t.add("any", [] { return Tensors{B({6, 7})}; }, FN { return {at::any(a[0])}; });
  t.add("count_nonzero.dim_IntList", [] { return Tensors{at::relu(R({6, 7}))}; },
        FN { return {at::count_nonzero(a[0], std::vector<int64_t>{1})}; });
  t.add("topk", [] { return Tensors{R({5, 9})}; }, FN {
    auto r = at::topk(a[0], 3, 1);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("sort", [] { return Tensors{R({5, 9})}; }, FN {
    auto r = at::sort(a[0], 1, true);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("kthvalue", [] { return Tensors{R({5, 9})}; }, FN {
    auto r = at::kthvalue(a[0], 4, 1);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("median.dim", [] { return Tensors{R({5, 9})}; }, FN {
    auto r = at::median(a[0], 1);
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});

  // ---- matmul family ----------------------------------------------------------------------------
  t.add("mm", [] { return Tensors{R({6, 8}), R({8, 5})}; }, FN { return {at::mm(a[0], a[1])}; }).grads({0, 1});
  t.add("bmm", [] { return Tensors{R({3, 6, 8}), R({3, 8, 5})}; }, FN { return {at::bmm(a[0], a[1])}; })
      .grads({0, 1});
  t.add("addmm", [] { return Tensors{R({5}), R({6, 8}), R({8, 5})}; },
        FN { return {at::addmm(a[0], a[1], a[2], 0.5, 2.0)}; }).grads({0, 1, 2});
  t.add("matmul", [] { return Tensors{R({2, 3, 6, 8}), R({8, 5})}; }, FN { return {at::matmul(a[0], a[1])}; })
      .grads({0, 1});
  t.add("linear", [] { return Tensors{R({4, 3, 8}), R({5, 8}), R({5})}; },
        FN { return {at::linear(a[0], a[1], a[2])}; }).grads({0, 1, 2});
  t.add("mv", [] { return Tensors{R({6, 8}), R({8})}; }, FN { return {at::mv(a[0], a[1])}; }).grads({0, 1});
  t.add("addmv", [] { return Tensors{R({6}), R({6, 8}), R({8})}; },
        FN { return {at::addmv(a[0], a[1], a[2], 1.0, 0.5)}; }).grads({0, 1, 2});
  t.add("dot", [] { return Tensors{R({16}), R({16})}; }, FN { return {at::dot(a[0], a[1])}; }).grads({0, 1});
  t.add("baddbmm", [] { return Tensors{R({3, 6, 5}), R({3, 6, 8}), R({3, 8, 5})}; },
        FN { return {at::baddbmm(a[0], a[1], a[2], 0.5, 1.5)}; }).grads({0, 1, 2});
  t.add("einsum", [] { return Tensors{R({3, 6, 8}), R({3, 8, 5})}; },
        FN { return {at::einsum("bij,bjk->bik", {a[0], a[1]})}; }).grads({0, 1});
  t.add("addr", [] { return Tensors{R({6, 5}), R({6}), R({5})}; },
        FN { return {at::addr(a[0], a[1], a[2], 0.5, 2.0)}; }).grads({0, 1, 2});
  t.add("outer", [] { return Tensors{R({6}), R({5})}; }, FN { return {at::outer(a[0], a[1])}; }).grads({0, 1});

  // ---- convolution ------------------------------------------------------------------------------
  t.add("conv1d", [] { return Tensors{R({2, 3, 16}), R({4, 3, 5}), R({4})}; },
        FN { return {at::conv1d(a[0], a[1], a[2], 2, 1)}; }).grads({0, 1, 2});
  t.add("conv2d", [] { return Tensors{R({2, 3, 10, 9}), R({6, 3, 3, 3}), R({6})}; },
        FN { return {at::conv2d(a[0], a[1], a[2], 1, 1)}; }).grads({0, 1, 2});
  t.add("conv2d", [] { return Tensors{R({2, 4, 11, 11}), R({6, 2, 3, 3}), R({6})}; },
        FN { return {at::conv2d(a[0], a[1], a[2], {2, 1}, {1, 2}, {2, 1}, 2)}; })
      .grads({0, 1, 2}).named("conv2d_strided_dilated_groups");
  t.add("conv2d", [] { return Tensors{R({2, 3, 8, 8}), R({4, 3, 1, 1})}; },
        FN { return {at::conv2d(a[0], a[1])}; }).grads({0, 1}).named("conv2d_1x1_no_bias");
  t.add("conv_transpose2d.input", [] { return Tensors{R({2, 4, 5, 5}), R({4, 3, 3, 3}), R({3})}; },
        FN { return {at::conv_transpose2d(a[0], a[1], a[2], 2, 1, 1)}; }).grads({0, 1, 2});
  t.add("conv_transpose1d", [] { return Tensors{R({2, 4, 7}), R({4, 2, 3}), R({2})}; },
        FN { return {at::conv_transpose1d(a[0], a[1], a[2], 2)}; }).grads({0, 1, 2});
  t.add("conv3d", [] { return Tensors{R({1, 2, 5, 6, 6}), R({3, 2, 3, 3, 3}), R({3})}; },
        FN { return {at::conv3d(a[0], a[1], a[2], 1, 1)}; }).grads({0, 1, 2});

  // ---- pooling, resampling, padding -------------------------------------------------------------
  const auto img = [] { return Tensors{R({2, 3, 9, 8})}; };
  t.add("max_pool2d", img, FN { return {at::max_pool2d(a[0], {2, 2})}; }).grads({0});
  t.add("max_pool2d_with_indices", img, FN {
    auto r = at::max_pool2d_with_indices(a[0], {3, 3}, {2, 2}, {1, 1});
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("avg_pool2d", img, FN { return {at::avg_pool2d(a[0], {3, 2}, {2, 2}, {1, 0}, false, false)}; })
      .grads({0});
  t.add("adaptive_avg_pool2d", img, FN { return {at::adaptive_avg_pool2d(a[0], {3, 5})}; }).grads({0});
  t.add("adaptive_max_pool2d", img, FN {
    auto r = at::adaptive_max_pool2d(a[0], {4, 3});
    return {std::get<0>(r), std::get<1>(r)};
  }).grads({0});
  t.add("max_pool1d", [] { return Tensors{R({2, 3, 17})}; }, FN { return {at::max_pool1d(a[0], {3}, {2})}; })
      .grads({0});
  t.add("avg_pool1d", [] { return Tensors{R({2, 3, 17})}; }, FN { return {at::avg_pool1d(a[0], {4}, {3})}; })
      .grads({0});
  t.add("upsample_nearest2d", img, FN { return {at::upsample_nearest2d(a[0], at::IntArrayRef(V({18, 12})))}; })
      .grads({0});
  t.add("upsample_bilinear2d", img,
        FN { return {at::upsample_bilinear2d(a[0], at::IntArrayRef(V({13, 11})), false)}; }).grads({0});
  t.add("channel_shuffle", [] { return Tensors{R({2, 6, 3, 4})}; }, FN { return {at::channel_shuffle(a[0], 3)}; });  // no derivative in 1.13
  t.add("pixel_shuffle", [] { return Tensors{R({2, 8, 3, 4})}; }, FN { return {at::pixel_shuffle(a[0], 2)}; })
      .grads({0});
  t.add("constant_pad_nd", img, FN { return {at::constant_pad_nd(a[0], {1, 2, 0, 1}, 0.5)}; }).grads({0});
  t.add("reflection_pad2d", img, FN { return {at::reflection_pad2d(a[0], {1, 1, 2, 0})}; }).grads({0});

  // ---- normalisation ----------------------------------------------------------------------------
  const auto bnInputs = [] { return Tensors{R({4, 3, 5, 5}), P({3}), R({3}), R({3}), P({3})}; };
  t.add("batch_norm", bnInputs, FN { return {at::batch_norm(a[0], a[1], a[2], a[3], a[4], true, 0.1, 1e-5, false)}; })
      .grads({0, 1, 2}).named("batch_norm_train");
  t.add("batch_norm", bnInputs, FN { return {at::batch_norm(a[0], a[1], a[2], a[3], a[4], false, 0.1, 1e-5, false)}; })
      .grads({0, 1, 2}).named("batch_norm_eval");
  t.add("layer_norm", [] { return Tensors{R({4, 6, 8}), P({8}), R({8})}; },
        FN { return {at::layer_norm(a[0], {8}, a[1], a[2], 1e-5)}; }).grads({0, 1, 2});
  t.add("group_norm", [] { return Tensors{R({3, 6, 4, 4}), P({6}), R({6})}; },
        FN { return {at::group_norm(a[0], 3, a[1], a[2], 1e-5)}; }).grads({0, 1, 2});
  t.add("instance_norm", [] { return Tensors{R({3, 4, 5, 5}), P({4}), R({4})}; },
        FN { return {at::instance_norm(a[0], a[1], a[2], {}, {}, true, 0.1, 1e-5, false)}; }).grads({0, 1, 2});

  // ---- activations ------------------------------------------------------------------------------
  const auto act = [] { return Tensors{R({4, 6}) * 3}; };
  t.add("relu", act, FN { return {at::relu(a[0])}; }).grads({0});
  t.add("gelu", act, FN { return {at::gelu(a[0])}; }).grads({0});
  t.add("gelu", act, FN { return {at::gelu(a[0], "tanh")}; }).grads({0}).named("gelu_tanh");
  t.add("silu", act, FN { return {at::silu(a[0])}; })
      .grads({0});
  t.add("softmax.int", act, FN { return {at::softmax(a[0], 1)}; }).grads({0});
  t.add("log_softmax.int", act, FN { return {at::log_softmax(a[0], 0)}; }).grads({0});
  t.add("leaky_relu", act, FN { return {at::leaky_relu(a[0], 0.1)}; }).grads({0});
  t.add("hardtanh", act, FN { return {at::hardtanh(a[0], -1.5, 2.0)}; }).grads({0});
  t.add("elu", act, FN { return {at::elu(a[0], 1.2)}; }).grads({0});
  t.add("softplus", act, FN { return {at::softplus(a[0], 2.0, 5.0)}; }).grads({0});
  t.add("mish", act, FN { return {at::mish(a[0])}; })
      .grads({0});
  t.add("hardswish", act, FN { return {at::hardswish(a[0])}; }).grads({0});
  t.add("hardsigmoid", act, FN { return {at::hardsigmoid(a[0])}; }).grads({0});
  t.add("relu6", act, FN { return {at::relu6(a[0])}; }).grads({0});
  t.add("prelu", [] { return Tensors{R({4, 3, 5}), P({3}) * 0.2}; }, FN { return {at::prelu(a[0], a[1])}; })
      .grads({0, 1});
  t.add("glu", act, FN { return {at::glu(a[0], 1)}; }).grads({0});
  t.add("threshold", act, FN { return {at::threshold(a[0], 0.5, -2.0)}; }).grads({0});
  t.add("selu", act, FN { return {at::selu(a[0])}; }).grads({0});
  t.add("celu", act, FN { return {at::celu(a[0], 0.7)}; }).grads({0});
  t.add("log_sigmoid", act, FN { return {at::log_sigmoid(a[0])}; }).grads({0});
  t.add("hardshrink", act, FN { return {at::hardshrink(a[0], 0.8)}; }).grads({0});
  t.add("softshrink", act, FN { return {at::softshrink(a[0], 0.8)}; }).grads({0});

  // ---- losses -----------------------------------------------------------------------------------
  const auto cls = [] { return Tensors{R({8, 5}), I(5, {8})}; };
  t.add("cross_entropy_loss", cls, FN { return {at::cross_entropy_loss(a[0], a[1])}; }).grads({0});
  t.add("cross_entropy_loss", [] { return Tensors{R({8, 5}), L({0, 4, 2, 2, -100, 1, 3, 0}), P({5})}; },
        FN { return {at::cross_entropy_loss(a[0], a[1], a[2], at::Reduction::Mean, -100, 0.1)}; })
      .grads({0}).named("cross_entropy_weight_ignore_smoothing");
  t.add("cross_entropy_loss", [] { return Tensors{R({8, 5}), at::softmax(R({8, 5}), 1)}; },
        FN { return {at::cross_entropy_loss(a[0], a[1])}; }).grads({0}).named("cross_entropy_soft_targets");
  t.add("nll_loss", [] { return Tensors{at::log_softmax(R({8, 5}), 1), I(5, {8}), P({5})}; },
        FN { return {at::nll_loss(a[0], a[1], a[2], at::Reduction::Sum)}; }).grads({0});
  t.add("nll_loss2d", [] { return Tensors{at::log_softmax(R({2, 4, 3, 3}), 1), I(4, {2, 3, 3})}; },
        FN { return {at::nll_loss2d(a[0], a[1])}; }).grads({0});
  t.add("mse_loss", R45x2, FN { return {at::mse_loss(a[0], a[1])}; }).grads({0, 1});
  t.add("l1_loss", R45x2, FN { return {at::l1_loss(a[0], a[1], at::Reduction::Sum)}; }).grads({0, 1});
  t.add("smooth_l1_loss", R45x2, FN { return {at::smooth_l1_loss(a[0], a[1], at::Reduction::Mean, 0.5)}; })
      .grads({0, 1});
  t.add("huber_loss", R45x2, FN { return {at::huber_loss(a[0], a[1], at::Reduction::None, 0.7)}; })
      .grads({0, 1});
  t.add("binary_cross_entropy_with_logits", [] { return Tensors{R({4, 5}), at::rand({4, 5}), P({5})}; },
        FN { return {at::binary_cross_entropy_with_logits(a[0], a[1], {}, a[2])}; }).grads({0, 1});
  t.add("binary_cross_entropy", [] { return Tensors{U({4, 5}, 0.05, 0.95), at::rand({4, 5})}; },
        FN { return {at::binary_cross_entropy(a[0], a[1])}; }).grads({0});
  t.add("kl_div", [] { return Tensors{at::log_softmax(R({4, 5}), 1), at::softmax(R({4, 5}), 1)}; },
        FN { return {at::kl_div(a[0], a[1], at::Reduction::Mean)}; }).grads({0, 1});
  t.add("margin_ranking_loss", [] { return Tensors{R({8}), R({8}), at::sign(R({8}))}; },
        FN { return {at::margin_ranking_loss(a[0], a[1], a[2], 0.3)}; }).grads({0, 1});
  t.add("soft_margin_loss", [] { return Tensors{R({8}), at::sign(R({8}))}; },
        FN { return {at::soft_margin_loss(a[0], a[1])}; }).grads({0});
  t.add("multi_margin_loss", cls, FN { return {at::multi_margin_loss(a[0], a[1])}; }).grads({0});
  t.add("hinge_embedding_loss", [] { return Tensors{R({8}), at::sign(R({8}))}; },
        FN { return {at::hinge_embedding_loss(a[0], a[1], 0.5)}; }).grads({0});
  t.add("poisson_nll_loss", [] { return Tensors{R({8}), at::rand({8}) * 4}; },
        FN { return {at::poisson_nll_loss(a[0], a[1], true, false, 1e-8, at::Reduction::Mean)}; }).grads({0});
  t.add("cosine_similarity", [] { return Tensors{R({4, 6}), R({4, 6})}; },
        FN { return {at::cosine_similarity(a[0], a[1], 1)}; }).grads({0, 1});
  t.add("pairwise_distance", [] { return Tensors{R({4, 6}), R({4, 6})}; },
        FN { return {at::pairwise_distance(a[0], a[1])}; }).grads({0, 1});

  // ---- indexing (index tensors live on the device of the data) ---------------------------------
  t.add("index_select", [] { return Tensors{R({5, 6}), L({4, 0, 0, 2})}; },
        FN { return {at::index_select(a[0], 0, a[1])}; }).grads({0});
  t.add("gather", [] { return Tensors{R({4, 6}), I(6, {4, 3})}; }, FN { return {at::gather(a[0], 1, a[1])}; })
      .grads({0});
  t.add("scatter.src", [] { return Tensors{R({4, 6}), PermRows(4, 6).narrow(1, 0, 4).contiguous(), R({4, 4})}; },
        FN { return {at::scatter(a[0], 1, a[1], a[2])}; }).grads({0, 2});
  t.add("scatter.value", [] { return Tensors{R({4, 6}), I(6, {4, 2})}; },
        FN { return {at::scatter(a[0], 1, a[1], -7.5)}; });
  t.add("scatter_add", [] { return Tensors{R({4, 6}), I(6, {4, 5}), R({4, 5})}; },
        FN { return {at::scatter_add(a[0], 1, a[1], a[2])}; }).grads({0, 2});
  t.add("scatter_reduce.two", [] { return Tensors{R({4, 6}), I(6, {4, 5}), R({4, 5})}; },
        FN { return {at::scatter_reduce(a[0], 1, a[1], a[2], "amax", true)}; });
  t.add("index.Tensor", [] { return Tensors{R({5, 6}), L({3, 0, 4, 3})}; }, FN { return {a[0].index({a[1]})}; })
      .grads({0});
  t.add("index.Tensor", [] { return Tensors{R({5, 6, 3}), L({3, 0, 4}), L({5, 1, 1})}; },
        FN { return {a[0].index({a[1], Slice(), 2}), a[0].index({a[1], a[2]})}; })
      .grads({0}).named("index_two_tensors_and_slices");
  t.add("index.Tensor", [] { return Tensors{R({5, 6}), B({5, 6})}; }, FN { return {a[0].index({a[1]})}; })
      .grads({0}).named("index_boolean_mask");
  t.add("masked_fill.Scalar", [] { return Tensors{R({5, 6}), B({5, 6})}; },
        FN { return {at::masked_fill(a[0], a[1], 3.25)}; }).grads({0});
  t.add("masked_select", [] { return Tensors{R({5, 6}), B({6})}; }, FN { return {at::masked_select(a[0], a[1])}; })
      .grads({0});
  t.add("index_put_", [] { return Tensors{R({5, 6}), L({4, 1, 2}), R({3, 6})}; }, FN {
    at::Tensor x = a[0].clone();  // clone: in-place on a non-leaf keeps autograd working
    at::index_put_(x, Idx({a[1]}), a[2], false);
    return {x};
  }).grads({0, 2});
  t.add("index_put_", [] { return Tensors{R({5, 6}), L({4, 1, 4, 1, 1}), L({0, 2, 0, 2, 5}), R({5})}; }, FN {
    at::Tensor x = a[0].clone();
    at::index_put_(x, Idx({a[1], a[2]}), a[3], true);
    return {x};
  }).grads({0, 3}).named("index_put_accumulate_duplicates");
  t.add("nonzero", [] { return Tensors{at::relu(R({5, 6}))}; }, FN { return {at::nonzero(a[0])}; });
  t.add("take", [] { return Tensors{R({5, 6}), I(30, {7})}; }, FN { return {at::take(a[0], a[1])}; }).grads({0});
  t.add("embedding", [] { return Tensors{R({10, 4}), I(10, {3, 5})}; },
        FN { return {at::embedding(a[0], a[1])}; }).grads({0});
  t.add("index_add", [] { return Tensors{R({5, 6}), L({4, 0, 4}), R({3, 6})}; },
        FN { return {at::index_add(a[0], 0, a[1], a[2], 0.5)}; }).grads({0, 2});
  t.add("index_fill.int_Scalar", [] { return Tensors{R({5, 6}), L({1, 3})}; },
        FN { return {at::index_fill(a[0], 1, a[1], -1.0)}; }).grads({0});
  t.add("one_hot", [] { return Tensors{I(6, {7})}; }, FN { return {at::one_hot(a[0], 6)}; });
  t.add("bucketize.Tensor", [] { return Tensors{R({5, 6}), at::linspace(-2, 2, 9)}; },
        FN { return {at::bucketize(a[0], a[1])}; });
  t.add("_unique2", [] { return Tensors{I(8, {20})}; }, FN {
    auto r = at::_unique2(a[0], true, true, true);
    return {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
  });

  // ---- views and shape ops (views must share the npu input's storage) --------------------------
  const auto R345 = [] { return Tensors{R({3, 4, 5})}; };
  t.add("view", R345, FN { return {a[0].view({4, 15})}; }).grads({0}).views(0);
  t.add("reshape", R345, FN { return {a[0].reshape({-1, 5})}; }).grads({0}).views(0);
  t.add("reshape", R345, FN { return {a[0].transpose(0, 2).reshape({-1})}; })
      .grads({0}).named("reshape_copies_non_contiguous");
  t.add("transpose.int", R345, FN { return {a[0].transpose(0, 2)}; }).grads({0}).views(0);
  t.add("permute", R345, FN { return {a[0].permute({2, 0, 1})}; }).grads({0}).views(0);
  t.add("slice.Tensor", R345, FN { return {a[0].slice(2, 1, 5, 2)}; }).grads({0}).views(0);
  t.add("select.int", R345, FN { return {a[0].select(1, 2)}; }).grads({0}).views(0);
  t.add("expand", [] { return Tensors{R({3, 1, 5})}; }, FN { return {a[0].expand({3, 4, 5})}; })
      .grads({0}).views(0);
  t.add("unfold", [] { return Tensors{R({3, 10})}; }, FN { return {a[0].unfold(1, 4, 3)}; }).grads({0}).views(0);
  t.add("narrow", R345, FN { return {a[0].narrow(1, 1, 2)}; }).grads({0}).views(0);
  t.add("squeeze.dim", [] { return Tensors{R({3, 1, 5})}; }, FN { return {a[0].squeeze(1)}; })
      .grads({0}).views(0);
  t.add("unsqueeze", R345, FN { return {a[0].unsqueeze(-1)}; }).grads({0}).views(0);
  t.add("chunk", R345, FN { return at::chunk(a[0], 3, 1); }).grads({0}).views(0);
  t.add("split.Tensor", R345, FN { return at::split(a[0], 2, 2); }).grads({0}).views(0);
  t.add("split_with_sizes", R345, FN { return at::split_with_sizes(a[0], {1, 3}, 1); }).grads({0}).views(0);
  t.add("unbind.int", R345, FN { return at::unbind(a[0], 0); }).grads({0}).views(0);
  t.add("t", [] { return Tensors{R({4, 6})}; }, FN { return {a[0].t()}; }).grads({0}).views(0);
  t.add("flatten.using_ints", R345, FN { return {a[0].flatten(1)}; }).grads({0}).views(0);
  t.add("movedim.int", R345, FN { return {at::movedim(a[0], 0, 2)}; }).grads({0}).views(0);
  t.add("diagonal", R345, FN { return {at::diagonal(a[0], 1, 1, 2)}; }).grads({0}).views(0);
  t.add("as_strided", [] { return Tensors{R({20})}; }, FN { return {a[0].as_strided({3, 4}, {2, 3}, 1)}; })
      .grads({0}).views(0);
  t.add("contiguous", R345, FN { return {a[0].permute({1, 2, 0}).contiguous()}; }).grads({0});
  t.add("clone", R345, FN { return {a[0].clone(at::MemoryFormat::Preserve)}; }).grads({0});
  t.add("flip", R345, FN { return {at::flip(a[0], {0, 2})}; }).grads({0});
  t.add("roll", R345, FN { return {at::roll(a[0], {2, -1}, {2, 0})}; }).grads({0});
  t.add("repeat", [] { return Tensors{R({2, 3})}; }, FN { return {a[0].repeat({2, 1, 3})}; }).grads({0});
  t.add("tril", [] { return Tensors{R({5, 6})}; }, FN { return {at::tril(a[0], 1)}; }).grads({0});
  t.add("triu", [] { return Tensors{R({5, 6})}; }, FN { return {at::triu(a[0], -1)}; }).grads({0});
  t.add("cat", [] { return Tensors{R({2, 5}), R({3, 5}), R({1, 5})}; }, FN { return {at::cat({a[0], a[1], a[2]})}; })
      .grads({0, 1, 2});
  t.add("cat", [] { return Tensors{R({4, 2}), R({4, 3})}; }, FN { return {at::cat({a[0], a[1]}, 1)}; })
      .grads({0, 1}).named("cat_dim1");
  t.add("stack", [] { return Tensors{R({4, 5}), R({4, 5})}; }, FN { return {at::stack({a[0], a[1]}, 1)}; })
      .grads({0, 1});

  // ---- creation and conversion on the device of the input ----------------------------------------
  t.add("zeros_like", R45, FN { return {at::zeros_like(a[0])}; });
  t.add("ones_like", R45, FN { return {at::ones_like(a[0])}; });
  t.add("full_like", R45, FN { return {at::full_like(a[0], 2.75)}; });
  t.add("arange.start_step", R45, FN { return {at::arange(1.5, 9.0, 0.75, a[0].options())}; });
  t.add("linspace", R45, FN { return {at::linspace(-1, 3, 11, a[0].options())}; });
  t.add("eye.m", R45, FN { return {at::eye(4, 6, a[0].options())}; });
  t.add("_to_copy", R45, FN { return {(a[0] * 100).to(at::kInt), a[0].to(at::kHalf), a[0].to(at::kBFloat16)}; })
      .named("to_dtype");

  // ---- random ops draw from the same generator as on the CPU ------------------------------------
  t.add("dropout", [] { return Tensors{R({6, 8})}; }, FN {
    at::manual_seed(99);
    return {at::dropout(a[0], 0.4, true)};
  }).grads({0});
  t.add("uniform_", R45, FN {
    at::manual_seed(7);
    return {at::empty_like(a[0]).uniform_(-2, 3)};
  });

  // ---- in-place variants (output 0 must be the npu input, same memory) -----------------------
  t.add("add_.Tensor", R45x2, FN { return {a[0].add_(a[1], 0.5)}; }).aliases(0);
  t.add("sub_.Tensor", R45x2, FN { return {a[0].sub_(a[1])}; }).aliases(0);
  t.add("mul_.Scalar", R45, FN { return {a[0].mul_(1.5)}; }).aliases(0);
  t.add("mul_.Tensor", [] { return Tensors{R({4, 5}), R({5})}; }, FN { return {a[0].mul_(a[1])}; }).aliases(0);
  t.add("div_.Tensor", [] { return Tensors{R({4, 5}), P({4, 5})}; }, FN { return {a[0].div_(a[1])}; }).aliases(0);
  t.add("clamp_", R45, FN { return {a[0].clamp_(-0.3, 0.4)}; }).aliases(0);
  t.add("relu_", R45, FN { return {a[0].relu_()}; }).aliases(0);
  t.add("zero_", R45, FN { return {a[0].zero_()}; }).aliases(0);
  t.add("fill_.Scalar", R45, FN { return {a[0].fill_(-4.5)}; }).aliases(0);
  t.add("exp_", R45, FN { return {a[0].exp_()}; }).aliases(0);
  t.add("sigmoid_", R45, FN { return {a[0].sigmoid_()}; }).aliases(0);
  t.add("neg_", R45, FN { return {a[0].neg_()}; }).aliases(0);
  t.add("sqrt_", P45, FN { return {a[0].sqrt_()}; }).aliases(0);
  t.add("pow_.Scalar", R45, FN { return {a[0].pow_(2)}; }).aliases(0);
  t.add("copy_", [] { return Tensors{R({4, 5}), R({5})}; }, FN { return {a[0].copy_(a[1])}; }).aliases(0);
  t.add("copy_", [] { return Tensors{R({4, 5}), I(9, {4, 5})}; }, FN { return {a[0].copy_(a[1])}; })
      .aliases(0).named("copy_int_into_float");
  t.add("masked_fill_.Scalar", [] { return Tensors{R({4, 5}), B({4, 5})}; },
        FN { return {a[0].masked_fill_(a[1], 9.0)}; }).aliases(0);
  t.add("index_fill_.int_Scalar", [] { return Tensors{R({4, 5}), L({0, 3})}; },
        FN { return {a[0].index_fill_(0, a[1], 1.5)}; }).aliases(0);
  t.add("addcmul_", [] { return Tensors{R({4, 5}), R({4, 5}), R({4, 5})}; },
        FN { return {a[0].addcmul_(a[1], a[2], 2.0)}; }).aliases(0);
  t.add("lerp_.Scalar", R45x2, FN { return {a[0].lerp_(a[1], 0.25)}; }).aliases(0);
  t.add("scatter_.src", [] { return Tensors{R({4, 6}), PermRows(4, 6), R({4, 6})}; },
        FN { return {a[0].scatter_(1, a[1], a[2])}; }).aliases(0);
  t.add("index_add_", [] { return Tensors{R({5, 6}), L({1, 1, 3}), R({3, 6})}; },
        FN { return {a[0].index_add_(0, a[1], a[2])}; }).aliases(0);
  t.add("mul_.Tensor", R45x2, FN {
    at::Tensor x = a[0] * 1;  // a non-leaf, so autograd records the in-place op
    x.mul_(a[1]);
    return {x};
  }).grads({0, 1}).named("mul__autograd");
  t.add("relu_", R45, FN {
    at::Tensor x = a[0] + 0.5;
    x.relu_();
    return {x};
  }).grads({0}).named("relu__autograd");

  // ---- out= variants -------------------------------------------------------------------------
  const auto out45 = [] { return Tensors{R({4, 5}), R({4, 5}), at::empty({4, 5})}; };
  t.add("add.out", out45, FN { at::Tensor o = a[2]; return {at::add_out(o, a[0], a[1], 2)}; }).aliases(2);
  t.add("mul.out", out45, FN { at::Tensor o = a[2]; return {at::mul_out(o, a[0], a[1])}; }).aliases(2);
  t.add("exp.out", out45, FN { at::Tensor o = a[2]; return {at::exp_out(o, a[0])}; }).aliases(2);
  t.add("clamp.out", out45, FN { at::Tensor o = a[2]; return {at::clamp_out(o, a[0], -0.2, 0.2)}; }).aliases(2);
  t.add("mm.out", [] { return Tensors{R({4, 6}), R({6, 5}), at::empty({4, 5})}; },
        FN { at::Tensor o = a[2]; return {at::mm_out(o, a[0], a[1])}; }).aliases(2);
  t.add("bmm.out", [] { return Tensors{R({2, 4, 6}), R({2, 6, 5}), at::empty({2, 4, 5})}; },
        FN { at::Tensor o = a[2]; return {at::bmm_out(o, a[0], a[1])}; }).aliases(2);
  t.add("addmm.out", [] { return Tensors{R({5}), R({4, 6}), R({6, 5}), at::empty({4, 5})}; },
        FN { at::Tensor o = a[3]; return {at::addmm_out(o, a[0], a[1], a[2])}; }).aliases(3);
  t.add("sum.IntList_out", [] { return Tensors{R({4, 5}), at::empty({4})}; },
        FN { at::Tensor o = a[1]; return {at::sum_out(o, a[0], {1})}; }).aliases(1);
  t.add("index_select.out", [] { return Tensors{R({5, 6}), L({4, 1}), at::empty({2, 6})}; },
        FN { at::Tensor o = a[2]; return {at::index_select_out(o, a[0], 0, a[1])}; }).aliases(2);
  t.add("cat.out", [] { return Tensors{R({2, 5}), R({3, 5}), at::empty({5, 5})}; },
        FN { at::Tensor o = a[2]; return {at::cat_out(o, {a[0], a[1]})}; }).aliases(2);
  // Wrong-size outputs: the op resizes them (growing reallocates, so only identity is checked).
  t.add("add.out", [] { return Tensors{R({4, 5}), R({4, 5}), at::empty({0})}; },
        FN { at::Tensor o = a[2]; return {at::add_out(o, a[0], a[1])}; }).resizes(2).named("add_out_grows_empty_out");
  t.add("add.out", [] { return Tensors{R({4, 5}), R({4, 5}), at::empty({3})}; },
        FN { at::Tensor o = a[2]; return {at::add_out(o, a[0], a[1])}; }).resizes(2).named("add_out_grows_small_out");
  t.add("mm.out", [] { return Tensors{R({4, 6}), R({6, 5}), at::empty({2, 2})}; },
        FN { at::Tensor o = a[2]; return {at::mm_out(o, a[0], a[1])}; }).resizes(2).named("mm_out_grows_wrong_shape");
  t.add("mm.out", [] { return Tensors{R({4, 6}), R({6, 5}), at::empty({7, 9})}; },
        FN { at::Tensor o = a[2]; return {at::mm_out(o, a[0], a[1])}; }).resizes(2).named("mm_out_shrinks_wrong_shape");
  t.add("sum.IntList_out", [] { return Tensors{R({4, 5}), at::empty({2, 3, 4})}; },
        FN { at::Tensor o = a[1]; return {at::sum_out(o, a[0], {0})}; }).resizes(1).named("sum_out_resized");
  t.add("nonzero.out", [] { return Tensors{at::relu(R({5, 6})), at::empty({1, 2}, at::kLong)}; },
        FN { at::Tensor o = a[1]; return {at::nonzero_out(o, a[0])}; }).resizes(1);

  return t.take();
}

// ================================================================================================
// fp16 / bf16 cases: npu low-precision result vs the fp32 CPU op on the same rounded inputs.
// lpScale: composite ops whose intermediates are rounded as well (stated per case).
// ================================================================================================
std::vector<OpCase> lowPrecisionCases() {
  Table t;
  const auto R2 = [] { return Tensors{R({8, 16}), R({8, 16})}; };
  t.add("mm", [] { return Tensors{R({16, 32}), R({32, 8})}; }, FN { return {at::mm(a[0], a[1])}; }).grads({0, 1});
  t.add("bmm", [] { return Tensors{R({3, 8, 16}), R({3, 16, 8})}; }, FN { return {at::bmm(a[0], a[1])}; })
      .grads({0, 1});
  t.add("addmm", [] { return Tensors{R({8}), R({16, 32}), R({32, 8})}; },
        FN { return {at::addmm(a[0], a[1], a[2])}; }).grads({0, 1, 2});
  // matmul/linear decompose (view + mm / addmm): still a single rounding of the product.
  t.add("matmul", [] { return Tensors{R({2, 6, 16}), R({16, 8})}; }, FN { return {at::matmul(a[0], a[1])}; })
      .grads({0, 1});
  t.add("linear", [] { return Tensors{R({6, 16}), R({8, 16}), R({8})}; },
        FN { return {at::linear(a[0], a[1], a[2])}; }).grads({0, 1, 2});
  t.add("einsum", [] { return Tensors{R({3, 8, 16}), R({3, 16, 8})}; },
        FN { return {at::einsum("bij,bjk->bik", {a[0], a[1]})}; });
  t.add("conv2d", [] { return Tensors{R({2, 3, 10, 10}), R({8, 3, 3, 3}), R({8})}; },
        FN { return {at::conv2d(a[0], a[1], a[2], 1, 1)}; }).grads({0, 1, 2});
  t.add("conv1d", [] { return Tensors{R({2, 3, 16}), R({4, 3, 5}), R({4})}; },
        FN { return {at::conv1d(a[0], a[1], a[2])}; });
  t.add("conv_transpose2d.input", [] { return Tensors{R({2, 4, 5, 5}), R({4, 3, 3, 3}), R({3})}; },
        FN { return {at::conv_transpose2d(a[0], a[1], a[2], 2)}; });
  t.add("softmax.int", [] { return Tensors{R({8, 16}) * 3}; }, FN { return {at::softmax(a[0], 1)}; }).grads({0});
  t.add("softmax.int", [] { return Tensors{R({8, 16}) * 3}; }, FN { return {at::softmax(a[0], 1, at::kFloat)}; })
      .lpOut(at::kFloat).named("softmax_to_fp32");
  t.add("log_softmax.int", [] { return Tensors{R({8, 16}) * 3}; }, FN { return {at::log_softmax(a[0], 1)}; })
      .grads({0});
  t.add("layer_norm", [] { return Tensors{R({4, 6, 16}), P({16}), R({16})}; },
        FN { return {at::layer_norm(a[0], {16}, a[1], a[2])}; }).grads({0, 1, 2});
  t.add("group_norm", [] { return Tensors{R({3, 6, 4, 4}), P({6}), R({6})}; },
        FN { return {at::group_norm(a[0], 3, a[1], a[2])}; });
  t.add("batch_norm", [] { return Tensors{R({4, 3, 5, 5}), P({3}), R({3}), R({3}), P({3})}; },
        FN { return {at::batch_norm(a[0], a[1], a[2], a[3], a[4], true, 0.1, 1e-5, false)}; })
      .named("batch_norm_train");
  // AMP / apex O2 style: fp16 activations, fp32 affine parameters and running stats.
  t.add("batch_norm", [] { return Tensors{R({4, 3, 5, 5}), P({3}), R({3}), R({3}), P({3})}; },
        FN { return {at::batch_norm(a[0], a[1], a[2], a[3], a[4], true, 0.1, 1e-5, false)}; })
      .keepFp32({1, 2, 3, 4}).grads({0, 1, 2}).named("batch_norm_train_fp32_params");
  t.add("relu", [] { return Tensors{R({8, 16})}; }, FN { return {at::relu(a[0])}; }).grads({0});
  t.add("gelu", [] { return Tensors{R({8, 16})}; }, FN { return {at::gelu(a[0])}; }).grads({0});
  t.add("silu", [] { return Tensors{R({8, 16})}; }, FN { return {at::silu(a[0])}; });
  t.add("sigmoid", [] { return Tensors{R({8, 16})}; }, FN { return {at::sigmoid(a[0])}; });
  t.add("tanh", [] { return Tensors{R({8, 16})}; }, FN { return {at::tanh(a[0])}; });
  t.add("leaky_relu", [] { return Tensors{R({8, 16})}; }, FN { return {at::leaky_relu(a[0], 0.1)}; });
  t.add("hardtanh", [] { return Tensors{R({8, 16})}; }, FN { return {at::hardtanh(a[0])}; });
  t.add("sum", [] { return Tensors{R({8, 16})}; }, FN { return {at::sum(a[0]), at::sum(a[0], {1})}; })
      .grads({0});
  t.add("mean.dim", [] { return Tensors{R({8, 16})}; }, FN { return {at::mean(a[0], {0})}; });
  t.add("var.dim", [] { return Tensors{R({8, 16})}; }, FN { return {at::var(a[0], at::IntArrayRef{1}, true)}; });
  t.add("max.dim", [] { return Tensors{R({8, 16})}; }, FN {
    auto r = at::max(a[0], 1);
    return {std::get<0>(r), std::get<1>(r)};
  });
  t.add("argmax", [] { return Tensors{R({8, 16})}; }, FN { return {at::argmax(a[0], 1)}; });
  t.add("cumsum", [] { return Tensors{R({8, 16})}; }, FN { return {at::cumsum(a[0], 1)}; });
  t.add("logsumexp", [] { return Tensors{R({8, 16})}; }, FN { return {at::logsumexp(a[0], {1})}; });
  t.add("norm.ScalarOpt_dim", [] { return Tensors{R({8, 16})}; },
        FN { return {at::norm(a[0], 2, at::IntArrayRef{1})}; });
  // cross_entropy = log_softmax (rounded) + nll_loss: two roundings of values up to ~|5|.
  t.add("cross_entropy_loss", [] { return Tensors{R({16, 10}) * 2, I(10, {16})}; },
        FN { return {at::cross_entropy_loss(a[0], a[1])}; }).grads({0}).lpScale(2);
  // mse_loss decomposes into sub, pow and mean, each rounded.
  t.add("mse_loss", R2, FN { return {at::mse_loss(a[0], a[1])}; }).grads({0}).lpScale(2);
  t.add("add.Tensor", R2, FN { return {at::add(a[0], a[1])}; }).grads({0, 1});
  t.add("mul.Tensor", R2, FN { return {at::mul(a[0], a[1])}; });
  t.add("div.Tensor", [] { return Tensors{R({8, 16}), P({8, 16})}; }, FN { return {at::div(a[0], a[1])}; });
  t.add("exp", [] { return Tensors{R({8, 16})}; }, FN { return {at::exp(a[0])}; });
  t.add("where.self", [] { return Tensors{B({8, 16}), R({8, 16}), R({8, 16})}; },
        FN { return {at::where(a[0], a[1], a[2])}; });
  t.add("clamp", [] { return Tensors{R({8, 16})}; }, FN { return {at::clamp(a[0], -0.5, 0.5)}; });
  t.add("gt.Tensor", R2, FN { return {at::gt(a[0], a[1])}; });
  t.add("max_pool2d", [] { return Tensors{R({2, 3, 8, 8})}; }, FN { return {at::max_pool2d(a[0], {2, 2})}; })
      .grads({0});
  t.add("avg_pool2d", [] { return Tensors{R({2, 3, 8, 8})}; }, FN { return {at::avg_pool2d(a[0], {2, 2})}; });
  t.add("adaptive_avg_pool2d", [] { return Tensors{R({2, 3, 8, 8})}; },
        FN { return {at::adaptive_avg_pool2d(a[0], {3, 3})}; });
  t.add("embedding", [] { return Tensors{R({10, 8}), I(10, {4, 3})}; }, FN { return {at::embedding(a[0], a[1])}; })
      .grads({0});
  t.add("index_select", [] { return Tensors{R({6, 8}), L({5, 0, 2})}; },
        FN { return {at::index_select(a[0], 0, a[1])}; });
  t.add("cat", [] { return Tensors{R({2, 8}), R({3, 8})}; }, FN { return {at::cat({a[0], a[1]})}; });
  t.add("add_.Tensor", R2, FN { return {a[0].add_(a[1])}; }).aliases(0);
  t.add("transpose.int", [] { return Tensors{R({4, 6})}; }, FN { return {a[0].transpose(0, 1)}; }).views(0);
  return t.take();
}

// ================================================================================================
// the harness
// ================================================================================================
bool bitEqual(const at::Tensor& x, const at::Tensor& y) {
  if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) return false;
  if (!at::isFloatingType(x.scalar_type())) return at::equal(x, y);
  const auto raw = x.element_size() == 4 ? at::kInt : x.element_size() == 2 ? at::kShort : at::kLong;
  return at::equal(x.contiguous().view(raw), y.contiguous().view(raw));
}

std::string diffSummary(const at::Tensor& n, const at::Tensor& c) {
  std::ostringstream os;
  if (n.sizes() == c.sizes() && at::isFloatingType(c.scalar_type()) && c.numel() > 0) {
    at::Tensor d = (n.to(at::kFloat) - c.to(at::kFloat)).abs();
    d = at::where(at::isnan(d), at::full_like(d, INFINITY), d);
    os << " max|diff|=" << d.max().item<float>() << " at flat index " << d.argmax().item<int64_t>();
  }
  return os.str();
}

// Compares one npu tensor with its CPU counterpart.
void expectMatches(const at::Tensor& npu_t, const at::Tensor& cpu_t, Tol tol, const std::string& what,
                   bool check_strides = true) {
  if (!cpu_t.defined()) {
    EXPECT_FALSE(npu_t.defined()) << what << ": the CPU result is undefined but the npu one is not";
    return;
  }
  ASSERT_TRUE(npu_t.defined()) << what << ": undefined on npu";
  EXPECT_EQ(npu_t.device().type(), c10::DeviceType::PrivateUse1) << what << " is not an npu tensor";
  ASSERT_EQ(npu_t.scalar_type(), cpu_t.scalar_type()) << what;
  ASSERT_EQ(npu_t.sizes(), cpu_t.sizes()) << what;
  if (check_strides) {
    EXPECT_EQ(npu_t.strides(), cpu_t.strides()) << what;
  }
  const at::Tensor n = npu_t.detach().cpu();
  const at::Tensor c = cpu_t.detach();
  if (tol.exact()) {
    EXPECT_TRUE(bitEqual(n, c)) << what << " differs from the CPU (bitwise)" << diffSummary(n, c);
  } else {
    EXPECT_TRUE(at::allclose(n.to(at::kFloat), c.to(at::kFloat), tol.rtol, tol.atol, /*equal_nan=*/true))
        << what << " differs beyond rtol " << tol.rtol << " atol " << tol.atol << diffSummary(n, c);
  }
}

std::vector<at::Tensor> gradOutputs(const Tensors& outs, Tensors* upstream) {
  Tensors sel;
  for (const auto& o : outs) {
    if (o.defined() && o.requires_grad() && at::isFloatingType(o.scalar_type())) {
      sel.push_back(o);
      upstream->push_back(at::randn(o.sizes()));
    }
  }
  return sel;
}

struct Inputs {
  Tensors cpu, npu;
  Tensors original;                   // CPU copies of the npu inputs before the op
  std::vector<const void*> npu_data;  // data pointers before the op
};

Inputs makeInputs(const OpCase& c, c10::ScalarType lp) {
  at::manual_seed(kSeed);
  Inputs in;
  in.cpu = c.make();
  for (auto& x : in.cpu) {
    at::Tensor n;
    const bool keep = std::find(c.keep_fp32.begin(), c.keep_fp32.end(), &x - in.cpu.data()) != c.keep_fp32.end();
    if (lp != c10::ScalarType::Undefined && at::isFloatingType(x.scalar_type()) && !keep) {
      const at::Tensor rounded = x.to(lp);
      n = rounded.to(dev());
      x = rounded.to(at::kFloat);  // the reference sees exactly the values the npu gets
    } else {
      n = x.to(dev());
    }
    in.npu.push_back(n);
    in.npu_data.push_back(n.data_ptr());
    in.original.push_back(n.cpu());
  }
  for (int i : c.grad_args) {
    in.cpu[i] = in.cpu[i].detach().requires_grad_();
    in.npu[i] = in.npu[i].detach().requires_grad_();
  }
  return in;
}

// Runs the case on both devices; lp is Undefined for fp32 cases, else the npu dtype.
void runCase(const OpCase& c, c10::ScalarType lp, const Tol* override_tol = nullptr) {
  SCOPED_TRACE("op " + c.op);
  const bool low = lp != c10::ScalarType::Undefined;
  Tol tol = override_tol ? *override_tol : c.tol;
  Tol grad_tol = tol;
  if (low) {
    tol = lp == at::kHalf ? Tol{2e-3 * c.lp_scale, 1e-3 * c.lp_scale} : Tol{1.6e-2 * c.lp_scale, 1e-2 * c.lp_scale};
    grad_tol = {tol.rtol * 4, tol.atol * 4};
  }
  Inputs in = makeInputs(c, lp);

  Tensors cpu_out = c.fn(in.cpu);
  Tensors npu_out;
  try {
    npu_out = c.fn(in.npu);
  } catch (const c10::Error& e) {
    FAIL() << c.op << " throws on npu: " << e.what_without_backtrace();
  }
  ASSERT_EQ(npu_out.size(), cpu_out.size());

  for (size_t j = 0; j < cpu_out.size(); ++j) {
    const std::string what = c.op + " output " + std::to_string(j);
    if (low) {
      ASSERT_TRUE(npu_out[j].defined()) << what;
      EXPECT_EQ(npu_out[j].device().type(), c10::DeviceType::PrivateUse1) << what;
      const bool floating = at::isFloatingType(cpu_out[j].scalar_type());
      const auto want = !floating ? cpu_out[j].scalar_type()
                        : c.lp_out != c10::ScalarType::Undefined ? c.lp_out : lp;
      EXPECT_EQ(npu_out[j].scalar_type(), want) << what;
      ASSERT_EQ(npu_out[j].sizes(), cpu_out[j].sizes()) << what;
      // The reference is fp32: compare values, in fp32.
      if (floating) {
        expectMatches(npu_out[j].to(at::kFloat), cpu_out[j], tol, what, false);
      } else {
        expectMatches(npu_out[j], cpu_out[j], {}, what, false);
      }
    } else {
      expectMatches(npu_out[j], cpu_out[j], tol, what);
    }
  }

  // In-place / out=: output 0 is the npu tensor the op wrote.
  if (c.alias_arg >= 0 || c.resized_arg >= 0) {
    const int i = c.alias_arg >= 0 ? c.alias_arg : c.resized_arg;
    EXPECT_TRUE(npu_out[0].is_same(in.npu[i])) << c.op << ": result is not the npu tensor it wrote";
    if (c.alias_arg >= 0) {
      EXPECT_EQ(npu_out[0].data_ptr(), in.npu_data[i]) << c.op << ": wrote to new memory";
    }
    EXPECT_EQ(in.npu[i].device().type(), c10::DeviceType::PrivateUse1);
  }
  // Views: share the npu input's storage.
  if (c.view_of >= 0) {
    for (size_t j = 0; j < npu_out.size(); ++j) {
      EXPECT_TRUE(npu_out[j].is_alias_of(in.npu[c.view_of])) << c.op << " output " << j << " is not a view";
      EXPECT_TRUE(cpu_out[j].is_alias_of(in.cpu[c.view_of])) << "(the CPU op is not a view either)";
    }
  }
  // Inputs afterwards: in-place writes, out= arguments, running stats.
  for (size_t i = 0; i < in.cpu.size(); ++i) {
    std::string what = c.op + " input " + std::to_string(i) + " after the op";
    const at::Tensor before = in.original[i];
    if (before.sizes() == in.npu[i].sizes() && bitEqual(in.npu[i].detach().cpu(), before) &&
        !bitEqual(in.cpu[i].detach().to(before.scalar_type()), before)) {
      what += " (the op changed it on the CPU but left the npu tensor unchanged)";
    }
    if (low) {
      if (at::isFloatingType(in.npu[i].scalar_type())) {
        expectMatches(in.npu[i].to(at::kFloat), in.cpu[i], tol, what, false);
      }
    } else {
      expectMatches(in.npu[i], in.cpu[i], {}, what);
    }
  }

  if (c.grad_args.empty()) return;
  Tensors up_cpu, up_npu;
  at::manual_seed(kSeed + 1);
  Tensors sel_cpu = gradOutputs(cpu_out, &up_cpu);
  Tensors sel_npu;
  for (size_t j = 0; j < npu_out.size(); ++j) {
    const auto& o = npu_out[j];
    if (o.defined() && o.requires_grad() && at::isFloatingType(o.scalar_type())) sel_npu.push_back(o);
  }
  ASSERT_EQ(sel_npu.size(), sel_cpu.size()) << c.op << ": outputs requiring grad differ";
  ASSERT_FALSE(sel_cpu.empty());
  for (auto& g : up_cpu) {
    if (low) {
      const at::Tensor r = g.to(lp);
      up_npu.push_back(r.to(dev()));
      g = r.to(at::kFloat);
    } else {
      up_npu.push_back(g.to(dev()));
    }
  }
  for (size_t j = 0; j < sel_npu.size(); ++j) {
    if (low && sel_npu[j].scalar_type() != lp) up_npu[j] = up_npu[j].to(sel_npu[j].scalar_type());
  }
  torch::autograd::backward(sel_cpu, up_cpu);
  try {
    torch::autograd::backward(sel_npu, up_npu);
  } catch (const c10::Error& e) {
    FAIL() << c.op << " backward throws on npu: " << e.what_without_backtrace();
  }
  for (int i : c.grad_args) {
    const std::string what = c.op + " grad of input " + std::to_string(i);
    const at::Tensor gc = in.cpu[i].grad();
    const at::Tensor gn = in.npu[i].grad();
    ASSERT_EQ(gn.defined(), gc.defined()) << what;
    if (!gc.defined()) continue;
    if (low) {
      EXPECT_EQ(gn.scalar_type(), in.npu[i].scalar_type()) << what;
      expectMatches(gn.to(at::kFloat), gc, grad_tol, what, false);
    } else {
      expectMatches(gn, gc, grad_tol, what);
    }
  }
}

// Runs a case; a case marked knownBug() that still fails is reported as skipped (GTEST_SKIP)
// with the bug and its first mismatch, after checking it stays within the bug's tolerance.
void runChecked(const OpCase& c, c10::ScalarType lp) {
  if (c.known_bug.empty()) {
    runCase(c, lp);
    return;
  }
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    runCase(c, lp);
  }
  if (failures.size() == 0) {
    std::cout << "[ STALE    ] " << c.name << ": the KNOWN DEVICE BUG no longer reproduces; remove knownBug()\n";
    return;
  }
  if (c.bug_within) runCase(c, lp, &*c.bug_within);
  GTEST_SKIP() << "KNOWN DEVICE BUG: " << c.known_bug << "\n  first mismatch: " << failures.GetTestPartResult(0).message();
}

std::string opBase(const std::string& op) { return op.substr(0, op.find('.')); }

const std::vector<OpCase>& fp32Table() {
  static const std::vector<OpCase> t = fp32Cases();
  return t;
}
const std::vector<OpCase>& lowPrecisionTable() {
  static const std::vector<OpCase> t = lowPrecisionCases();
  return t;
}

struct LpParam {
  OpCase c;
  c10::ScalarType dtype;
};
void PrintTo(const LpParam& p, std::ostream* os) { *os << p.c.name << " " << c10::toString(p.dtype); }

std::vector<LpParam> lowPrecisionParams() {
  std::vector<LpParam> out;
  for (const auto& c : lowPrecisionTable()) {
    out.push_back({c, at::kHalf});
    out.push_back({c, at::kBFloat16});
  }
  return out;
}

// ---- the tables as tests ----------------------------------------------------------------------
class OpParity : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpParity, Fp32MatchesCpu) { runChecked(GetParam(), c10::ScalarType::Undefined); }

INSTANTIATE_TEST_SUITE_P(Fp32, OpParity, ::testing::ValuesIn(fp32Table()),
                         [](const ::testing::TestParamInfo<OpCase>& i) { return i.param.name; });

class LowPrecisionParity : public ::testing::TestWithParam<LpParam> {};

TEST_P(LowPrecisionParity, MatchesFp32ReferenceWithinFormatTolerance) { runChecked(GetParam().c, GetParam().dtype); }

INSTANTIATE_TEST_SUITE_P(LowPrecision, LowPrecisionParity, ::testing::ValuesIn(lowPrecisionParams()),
                         [](const ::testing::TestParamInfo<LpParam>& i) {
                           return i.param.c.name + (i.param.dtype == at::kHalf ? "_fp16" : "_bf16");
                         });

// ---- coverage: the suite cannot silently shrink ------------------------------------------------
TEST(OpParityCoverage, AtLeast80DistinctAtenOpsAnd20LowPrecisionOps) {
  std::set<std::string> ops, bases, lp_bases;
  for (const auto& c : fp32Table()) {
    ops.insert(c.op);
    bases.insert(opBase(c.op));
  }
  for (const auto& c : lowPrecisionTable()) {
    ops.insert(c.op);
    bases.insert(opBase(c.op));
    lp_bases.insert(opBase(c.op));
  }
  // Every name is a real ATen operator (name.overload as registered with the dispatcher).
  for (const auto& op : ops) {
    const auto dot = op.find('.');
    const std::string name = "aten::" + op.substr(0, dot);
    const std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
    EXPECT_TRUE(c10::Dispatcher::singleton().findSchema({name, overload}).has_value())
        << op << " is not an ATen operator";
  }
  std::cout << "[ coverage ] " << bases.size() << " distinct ATen ops (" << ops.size() << " overloads) in "
            << fp32Table().size() << " fp32 cases; " << lp_bases.size() << " ops in "
            << lowPrecisionTable().size() << " x 2 fp16/bf16 cases\n";
  EXPECT_GE(bases.size(), 80u);
  EXPECT_GE(lp_bases.size(), 20u);
  for (const char* must : {"mm", "conv2d", "softmax", "layer_norm", "relu", "gelu", "sum", "cross_entropy_loss"}) {
    EXPECT_TRUE(lp_bases.count(must)) << must << " must have fp16/bf16 cases";
  }
}

// ---- aliasing of in-place / out= results and write-through of views -----------------------------
TEST(NpuAliasing, InPlaceResultsAreTheTensorTheyWrote) {
  at::manual_seed(kSeed);
  at::Tensor c = at::randn({6, 7});
  at::Tensor x = c.to(dev());
  void* p = x.data_ptr();
  const at::Tensor& r1 = x.add_(1.0);
  const at::Tensor& r2 = x.mul_(x);
  const at::Tensor& r3 = x.clamp_(0.5, 3.0);
  const at::Tensor& r4 = x.relu_();
  const at::Tensor& r5 = x.sub_(at::ones({7}).to(dev()));
  for (const at::Tensor* r : {&r1, &r2, &r3, &r4, &r5}) {
    EXPECT_TRUE(r->is_same(x));
    EXPECT_EQ(r->data_ptr(), p);
    EXPECT_EQ(r->device(), dev());
  }
  c.add_(1.0).mul_(c).clamp_(0.5, 3.0).relu_().sub_(at::ones({7}));
  EXPECT_TRUE(bitEqual(x.cpu(), c));
  x.zero_();
  EXPECT_EQ(x.data_ptr(), p);
  EXPECT_EQ(x.abs().sum().item<float>(), 0.0f);
  x.fill_(2.5);
  EXPECT_EQ(x.data_ptr(), p);
  EXPECT_TRUE(bitEqual(x.cpu(), at::full({6, 7}, 2.5f)));
}

TEST(NpuAliasing, OutVariantsWriteTheirOutOrResizeIt) {
  at::manual_seed(kSeed);
  at::Tensor a = at::randn({4, 6}), b = at::randn({6, 5});
  at::Tensor an = a.to(dev()), bn = b.to(dev());

  // Right size: written in place.
  at::Tensor out = at::empty({4, 5}, at::TensorOptions().device(dev()));
  void* p = out.data_ptr();
  at::Tensor& r = at::mm_out(out, an, bn);
  EXPECT_TRUE(r.is_same(out));
  EXPECT_EQ(out.data_ptr(), p);
  EXPECT_TRUE(bitEqual(out.cpu(), at::mm(a, b)));

  // Too small: resized (and reallocated) on the npu; the result is still `out`.
  at::Tensor small = at::empty({3}, at::TensorOptions().device(dev()));
  at::Tensor& rs = at::add_out(small, an, an, 0.5);
  EXPECT_TRUE(rs.is_same(small));
  EXPECT_EQ(small.device(), dev());
  EXPECT_EQ(small.sizes(), a.sizes());
  EXPECT_TRUE(bitEqual(small.cpu(), at::add(a, a, 0.5)));

  // Too large: shrunk in place, same memory.
  at::Tensor big = at::empty({10, 10}, at::TensorOptions().device(dev()));
  void* pb = big.data_ptr();
  at::mm_out(big, an, bn);
  EXPECT_EQ(big.sizes(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(big.data_ptr(), pb);
  EXPECT_TRUE(bitEqual(big.cpu(), at::mm(a, b)));

  // A non-contiguous out of the right size is written through its strides.
  at::Tensor base = at::zeros({5, 4}, at::TensorOptions().device(dev()));
  at::Tensor tout = base.t();
  at::mm_out(tout, an, bn.narrow(1, 0, 5));
  at::Tensor expect = at::zeros({5, 4});
  at::Tensor expect_t = expect.t();
  at::mm_out(expect_t, a, b);
  EXPECT_TRUE(bitEqual(base.cpu(), expect));
}

TEST(NpuAliasing, ViewsWrittenInPlaceWriteThroughToTheirBase) {
  at::manual_seed(kSeed);
  const at::Tensor c0 = at::randn({4, 12});
  at::Tensor c = c0.clone();
  at::Tensor x = c0.to(dev());
  auto both = [&](const std::function<void(at::Tensor&)>& f) {
    f(c);
    f(x);
    EXPECT_TRUE(bitEqual(x.cpu(), c)) << diffSummary(x.cpu(), c);
  };
  both([](at::Tensor& t) { t.unfold(1, 3, 3).add_(1.0); });
  both([](at::Tensor& t) { t.unfold(1, 4, 4).select(2, 1).mul_(-2); });
  both([](at::Tensor& t) { t.narrow(1, 2, 5).mul_(2); });
  both([](at::Tensor& t) { t.select(0, 3).fill_(7); });
  both([](at::Tensor& t) { t.t().slice(0, 1, 12, 3).add_(t.t().slice(0, 0, 12, 3)); });
  both([](at::Tensor& t) { t.view({8, 6}).diagonal().zero_(); });
  both([](at::Tensor& t) { at::chunk(t, 3, 1)[1].clamp_(-0.1, 0.1); });
  both([](at::Tensor& t) { t.as_strided({2, 3}, {13, 2}, 1).sub_(5); });
  both([](at::Tensor& t) { t.index({Slice(1, 3), Slice(None, None, 2)}).relu_(); });
  both([](at::Tensor& t) { t.view({2, 2, 12})[1].exp_(); });
  // Through out= into a view.
  both([](at::Tensor& t) {
    at::Tensor o = t.narrow(0, 0, 2);
    at::mul_out(o, t.narrow(0, 2, 2), t.narrow(0, 2, 2));
  });
  // Views keep aliasing the base's memory.
  at::Tensor u = x.unfold(1, 2, 2);
  EXPECT_EQ(u.data_ptr(), x.data_ptr());
  EXPECT_EQ(x.narrow(1, 3, 2).data_ptr(), static_cast<float*>(x.data_ptr()) + 3);
  EXPECT_EQ(u.device(), dev());

  // A view made before the base is written sees the write, and vice versa.
  at::Tensor v = x.narrow(0, 1, 2);
  x.fill_(1.0);
  EXPECT_EQ(v.sum().item<float>(), 24.0f);
  v.mul_(3.0);
  EXPECT_EQ(x.sum().item<float>(), 24.0f + 72.0f);
}

TEST(NpuAliasing, InPlaceOnLowPrecisionViewsWritesThrough) {
  for (auto dt : {at::kHalf, at::kBFloat16}) {
    at::manual_seed(kSeed);
    at::Tensor c = at::randn({4, 8}).to(dt);
    at::Tensor x = c.to(dev());
    x.narrow(1, 1, 4).mul_(2);
    x.unfold(1, 2, 2).select(2, 0).add_(1);
    // Reference: the same ops in fp32 rounded to dt (one rounding per op, as the device does).
    at::Tensor ref = c.to(at::kFloat);
    ref.narrow(1, 1, 4).copy_((ref.narrow(1, 1, 4) * 2).to(dt).to(at::kFloat));
    auto s = ref.unfold(1, 2, 2).select(2, 0);
    s.copy_((s + 1).to(dt).to(at::kFloat));
    EXPECT_EQ(x.scalar_type(), dt);
    EXPECT_TRUE(bitEqual(x.cpu(), ref.to(dt))) << c10::toString(dt) << diffSummary(x.cpu(), ref.to(dt));
  }
}

// Past libtorch's small-size loops (inner x rows x cols >= 400) its CPU bmm calls BLAS once per
// batch element, through select and addmm; the npu's bmm.out kernel makes the same gemm calls
// without those dispatches. Every layout the gemm accepts as it is (row- or column-major operands,
// leading dimensions wider than the matrix, one row or column, a broadcast batch) must give the
// CPU's result bit for bit, and layouts it does not take (a strided result, small sizes) the CPU
// kernel's own, as must the gradients, whose bmm calls see transposed operands.
TEST(NpuBmm, EveryLayoutGivesTheCpuKernelsResultBitForBit) {
  at::manual_seed(kSeed);
  struct Shape { int64_t b, n, k, p; };
  int cases = 0;
  for (const Shape s : {Shape{4, 12, 16, 10}, Shape{3, 1, 40, 12}, Shape{3, 12, 40, 1}, Shape{2, 25, 1, 25},
                        Shape{2, 32, 32, 32}, Shape{4, 3, 5, 4}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const bool wide : {false, true}) {
          // Operands transposed (column-major matrices), or cut from wider rows (leading dimension
          // larger than the matrix).
          at::Tensor a = ta ? at::randn({s.b, s.k, s.n}).transpose(1, 2) : at::randn({s.b, s.n, s.k});
          at::Tensor b = tb ? at::randn({s.b, s.p, s.k}).transpose(1, 2) : at::randn({s.b, s.k, s.p});
          if (wide) a = ta ? at::randn({s.b, s.k, s.n + 3}).narrow(2, 0, s.n).transpose(1, 2)
                           : at::randn({s.b, s.n, s.k + 3}).narrow(2, 0, s.k);
          const at::Tensor ref = at::bmm(a, b);
          const at::Tensor got = at::bmm(a.to(dev()), b.to(dev()));
          EXPECT_EQ(got.device(), dev());
          EXPECT_TRUE(bitEqual(got.cpu(), ref)) << s.b << "x" << s.n << "x" << s.k << "x" << s.p << " ta " << ta
                                                << " tb " << tb << " wide " << wide << diffSummary(got.cpu(), ref);
          at::Tensor out = at::empty({s.b, s.n, s.p}).to(dev());
          at::Tensor& written = at::bmm_out(out, a.to(dev()), b.to(dev()));
          EXPECT_TRUE(written.is_same(out));
          EXPECT_TRUE(bitEqual(out.cpu(), ref));
          // A result with strides of its own: the CPU kernel's path (its gemm is arranged for
          // that result, so the reference is the CPU's bmm into the same layout).
          at::Tensor strided_ref = at::empty({s.b, s.p, s.n}).transpose(1, 2);
          at::bmm_out(strided_ref, a, b);
          at::Tensor strided = at::empty({s.b, s.p, s.n}).to(dev()).transpose(1, 2);
          at::bmm_out(strided, a.to(dev()), b.to(dev()));
          EXPECT_TRUE(bitEqual(strided.cpu(), strided_ref));
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 48);
  // A batch broadcast from one matrix (batch stride 0).
  const at::Tensor one = at::randn({1, 32, 16}).expand({4, 32, 16}), w = at::randn({4, 16, 32});
  EXPECT_TRUE(bitEqual(at::bmm(one.to(dev()), w.to(dev())).cpu(), at::bmm(one, w)));
  // Gradients: backward multiplies by the transposed other operand.
  at::Tensor x = at::randn({4, 24, 16}).requires_grad_(), y = at::randn({4, 16, 20}).requires_grad_();
  at::Tensor xn = x.detach().to(dev()).requires_grad_(), yn = y.detach().to(dev()).requires_grad_();
  at::bmm(x, y).pow(2).sum().backward();
  at::bmm(xn, yn).pow(2).sum().backward();
  EXPECT_TRUE(bitEqual(xn.grad().cpu(), x.grad()));
  EXPECT_TRUE(bitEqual(yn.grad().cpu(), y.grad()));
}

}  // namespace
