// O1 casting on npu tensors: a table test of the output dtype of every listed op, the mechanism
// (only inside the guard, only npu tensors, nesting), and fp32 gradients for fp32 leaves.
#include <ATen/core/dispatch/Dispatcher.h>

#include <functional>
#include <map>

#include "amp_test_util.h"

namespace npuscope::amp {
namespace {

using test::npu0;
using Fn = std::function<at::Tensor(at::ScalarType)>;

// Random npu tensors of a dtype; `pos` makes them positive (log, rsqrt, ...).
at::Tensor R(std::vector<int64_t> shape, at::ScalarType t, bool pos = false) {
  at::Tensor x = torch::rand(shape) * 0.8 + 0.1;
  if (!pos) x = x * 2 - 1;
  return x.to(npu0()).to(t);
}
at::Tensor L(std::vector<int64_t> shape, int64_t hi) { return torch::randint(hi, shape, torch::kLong).to(npu0()); }
at::Tensor Sign(std::vector<int64_t> shape, at::ScalarType t) {
  return (torch::randint(2, shape).to(torch::kFloat) * 2 - 1).to(npu0()).to(t);
}

// One call per listed op. `t` is the dtype of the floating inputs: fp32 for low-precision ops,
// fp16 for fp32 ops; promote ops mix t=fp16 with fp32.
std::map<std::string, Fn> invocations() {
  const auto f32 = at::kFloat;
  std::map<std::string, Fn> m;
  m["aten::conv1d"] = [](auto t) { return at::conv1d(R({2, 3, 8}, t), R({4, 3, 3}, t)); };
  m["aten::conv1d.padding"] = [](auto t) { return at::conv1d(R({2, 3, 8}, t), R({4, 3, 3}, t), {}, 1, "same"); };
  m["aten::conv2d"] = [](auto t) { return at::conv2d(R({2, 3, 6, 6}, t), R({4, 3, 3, 3}, t)); };
  m["aten::conv2d.padding"] = [](auto t) { return at::conv2d(R({2, 3, 6, 6}, t), R({4, 3, 3, 3}, t), {}, 1, "same"); };
  m["aten::conv3d"] = [](auto t) { return at::conv3d(R({1, 2, 4, 4, 4}, t), R({3, 2, 3, 3, 3}, t)); };
  m["aten::conv3d.padding"] = [](auto t) {
    return at::conv3d(R({1, 2, 4, 4, 4}, t), R({3, 2, 3, 3, 3}, t), {}, 1, "same");
  };
  m["aten::conv_transpose1d"] = [](auto t) { return at::conv_transpose1d(R({2, 3, 8}, t), R({3, 4, 3}, t)); };
  m["aten::conv_transpose2d.input"] = [](auto t) { return at::conv_transpose2d(R({2, 3, 5, 5}, t), R({3, 4, 3, 3}, t)); };
  m["aten::conv_transpose3d.input"] = [](auto t) {
    return at::conv_transpose3d(R({1, 2, 3, 3, 3}, t), R({2, 3, 2, 2, 2}, t));
  };
  m["aten::conv_tbc"] = [](auto t) { return at::conv_tbc(R({5, 2, 3}, t), R({3, 3, 4}, t), R({4}, t)); };
  m["aten::convolution"] = [](auto t) {
    return at::convolution(R({2, 3, 6, 6}, t), R({4, 3, 3, 3}, t), R({4}, t), {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1);
  };
  m["aten::_convolution"] = [](auto t) {
    return at::_convolution(R({2, 3, 6, 6}, t), R({4, 3, 3, 3}, t), R({4}, t), {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1,
                            false, false, true, true);
  };
  m["aten::prelu"] = [](auto t) { return at::prelu(R({2, 3, 4}, t), R({1}, t)); };
  m["aten::addmm"] = [](auto t) { return at::addmm(R({4}, t), R({3, 5}, t), R({5, 4}, t)); };
  m["aten::addmv"] = [](auto t) { return at::addmv(R({3}, t), R({3, 5}, t), R({5}, t)); };
  m["aten::addr"] = [](auto t) { return at::addr(R({3, 4}, t), R({3}, t), R({4}, t)); };
  m["aten::matmul"] = [](auto t) { return at::matmul(R({2, 3, 5}, t), R({5, 4}, t)); };
  m["aten::mm"] = [](auto t) { return at::mm(R({3, 5}, t), R({5, 4}, t)); };
  m["aten::mv"] = [](auto t) { return at::mv(R({3, 5}, t), R({5}, t)); };
  m["aten::bmm"] = [](auto t) { return at::bmm(R({2, 3, 5}, t), R({2, 5, 4}, t)); };
  m["aten::baddbmm"] = [](auto t) { return at::baddbmm(R({2, 3, 4}, t), R({2, 3, 5}, t), R({2, 5, 4}, t)); };
  m["aten::addbmm"] = [](auto t) { return at::addbmm(R({3, 4}, t), R({2, 3, 5}, t), R({2, 5, 4}, t)); };
  m["aten::linear"] = [](auto t) { return at::linear(R({3, 5}, t), R({4, 5}, t), R({4}, t)); };

  m["aten::acos"] = [](auto t) { return at::acos(R({8}, t)); };
  m["aten::asin"] = [](auto t) { return at::asin(R({8}, t)); };
  m["aten::cosh"] = [](auto t) { return at::cosh(R({8}, t)); };
  m["aten::erfinv"] = [](auto t) { return at::erfinv(R({8}, t)); };
  m["aten::exp"] = [](auto t) { return at::exp(R({8}, t)); };
  m["aten::expm1"] = [](auto t) { return at::expm1(R({8}, t)); };
  m["aten::log"] = [](auto t) { return at::log(R({8}, t, true)); };
  m["aten::log10"] = [](auto t) { return at::log10(R({8}, t, true)); };
  m["aten::log2"] = [](auto t) { return at::log2(R({8}, t, true)); };
  m["aten::log1p"] = [](auto t) { return at::log1p(R({8}, t, true)); };
  m["aten::reciprocal"] = [](auto t) { return at::reciprocal(R({8}, t, true)); };
  m["aten::rsqrt"] = [](auto t) { return at::rsqrt(R({8}, t, true)); };
  m["aten::sinh"] = [](auto t) { return at::sinh(R({8}, t)); };
  m["aten::tan"] = [](auto t) { return at::tan(R({8}, t)); };
  m["aten::pow.Tensor_Scalar"] = [](auto t) { return at::pow(R({8}, t), 2); };
  m["aten::pow.Tensor_Tensor"] = [](auto t) { return at::pow(R({8}, t, true), R({8}, t)); };
  m["aten::pow.Scalar"] = [](auto t) { return at::pow(2.0, R({8}, t)); };
  m["aten::cumprod"] = [](auto t) { return at::cumprod(R({3, 4}, t), 1); };
  m["aten::cumsum"] = [](auto t) { return at::cumsum(R({3, 4}, t), 1); };
  m["aten::dist"] = [](auto t) { return at::dist(R({8}, t), R({8}, t)); };
  m["aten::norm.Scalar"] = [](auto t) { return at::norm(R({3, 4}, t), 2); };
  m["aten::norm.ScalarOpt_dim"] = [](auto t) { return at::norm(R({3, 4}, t), 2, {1}, false); };
  m["aten::prod"] = [](auto t) { return at::prod(R({8}, t)); };
  m["aten::prod.dim_int"] = [](auto t) { return at::prod(R({3, 4}, t), 1); };
  m["aten::renorm"] = [](auto t) { return at::renorm(R({3, 4}, t), 2, 0, 1.0); };
  m["aten::sum"] = [](auto t) { return at::sum(R({3, 4}, t)); };
  m["aten::sum.dim_IntList"] = [](auto t) { return at::sum(R({3, 4}, t), {1}); };
  m["aten::std"] = [](auto t) { return at::std(R({3, 4}, t), true); };
  m["aten::std.dim"] = [](auto t) { return at::std(R({3, 4}, t), at::OptionalIntArrayRef({1}), true, false); };
  m["aten::std.correction"] = [](auto t) {
    return at::std(R({3, 4}, t), at::OptionalIntArrayRef({1}), c10::optional<int64_t>(1), false);
  };
  m["aten::var"] = [](auto t) { return at::var(R({3, 4}, t), true); };
  m["aten::var.dim"] = [](auto t) { return at::var(R({3, 4}, t), at::OptionalIntArrayRef({1}), true, false); };
  m["aten::var.correction"] = [](auto t) {
    return at::var(R({3, 4}, t), at::OptionalIntArrayRef({1}), c10::optional<int64_t>(1), false);
  };
  m["aten::softmax.int"] = [](auto t) { return at::softmax(R({3, 4}, t), 1); };
  m["aten::log_softmax.int"] = [](auto t) { return at::log_softmax(R({3, 4}, t), 1); };
  m["aten::softplus"] = [](auto t) { return at::softplus(R({8}, t)); };
  m["aten::gelu"] = [](auto t) { return at::gelu(R({8}, t)); };
  m["aten::layer_norm"] = [](auto t) { return at::layer_norm(R({3, 4}, t), {4}, R({4}, t), R({4}, t)); };
  m["aten::group_norm"] = [](auto t) { return at::group_norm(R({2, 4, 3}, t), 2, R({4}, t), R({4}, t)); };
  m["aten::cosine_similarity"] = [](auto t) { return at::cosine_similarity(R({3, 4}, t), R({3, 4}, t), 1); };
  m["aten::pdist"] = [](auto t) { return at::pdist(R({4, 3}, t)); };
  m["aten::cdist"] = [](auto t) { return at::cdist(R({4, 3}, t), R({5, 3}, t)); };
  m["aten::binary_cross_entropy_with_logits"] = [](auto t) {
    return at::binary_cross_entropy_with_logits(R({4, 3}, t), R({4, 3}, t, true));
  };
  m["aten::cross_entropy_loss"] = [](auto t) { return at::cross_entropy_loss(R({4, 5}, t), L({4}, 5)); };
  m["aten::nll_loss"] = [](auto t) { return at::nll_loss(R({4, 5}, t), L({4}, 5)); };
  m["aten::nll_loss2d"] = [](auto t) { return at::nll_loss2d(R({2, 5, 3, 3}, t), L({2, 3, 3}, 5)); };
  m["aten::nll_loss_nd"] = [](auto t) { return at::nll_loss_nd(R({4, 5}, t), L({4}, 5)); };
  m["aten::kl_div"] = [](auto t) { return at::kl_div(R({4, 3}, t), R({4, 3}, t, true)); };
  m["aten::l1_loss"] = [](auto t) { return at::l1_loss(R({4, 3}, t), R({4, 3}, t)); };
  m["aten::smooth_l1_loss"] = [](auto t) { return at::smooth_l1_loss(R({4, 3}, t), R({4, 3}, t)); };
  m["aten::huber_loss"] = [](auto t) { return at::huber_loss(R({4, 3}, t), R({4, 3}, t)); };
  m["aten::mse_loss"] = [](auto t) { return at::mse_loss(R({4, 3}, t), R({4, 3}, t)); };
  m["aten::margin_ranking_loss"] = [](auto t) {
    return at::margin_ranking_loss(R({4}, t), R({4}, t), Sign({4}, t));
  };
  m["aten::multilabel_margin_loss"] = [](auto t) {
    return at::multilabel_margin_loss(R({2, 4}, t), torch::tensor({{3, 0, -1, 1}, {1, 2, 3, -1}}).to(npu0()));
  };
  m["aten::soft_margin_loss"] = [](auto t) { return at::soft_margin_loss(R({4, 3}, t), Sign({4, 3}, t)); };
  m["aten::triplet_margin_loss"] = [](auto t) {
    return at::triplet_margin_loss(R({4, 3}, t), R({4, 3}, t), R({4, 3}, t));
  };
  m["aten::multi_margin_loss"] = [](auto t) { return at::multi_margin_loss(R({4, 5}, t), L({4}, 5)); };
  m["aten::hinge_embedding_loss"] = [](auto t) { return at::hinge_embedding_loss(R({4, 3}, t), Sign({4, 3}, t)); };
  m["aten::poisson_nll_loss"] = [](auto t) {
    return at::poisson_nll_loss(R({4, 3}, t), R({4, 3}, t, true), true, false, 1e-8, at::Reduction::Mean);
  };
  m["aten::cosine_embedding_loss"] = [](auto t) {
    return at::cosine_embedding_loss(R({4, 3}, t), R({4, 3}, t), Sign({4}, t));
  };

  m["aten::add.Tensor"] = [=](auto t) { return at::add(R({8}, t), R({8}, f32)); };
  m["aten::sub.Tensor"] = [=](auto t) { return at::sub(R({8}, t), R({8}, f32)); };
  m["aten::mul.Tensor"] = [=](auto t) { return at::mul(R({8}, t), R({8}, f32)); };
  m["aten::div.Tensor"] = [=](auto t) { return at::div(R({8}, t), R({8}, f32, true)); };
  m["aten::div.Tensor_mode"] = [=](auto t) { return at::div(R({8}, t), R({8}, f32, true), "floor"); };
  m["aten::addcdiv"] = [=](auto t) { return at::addcdiv(R({8}, t), R({8}, f32), R({8}, t, true)); };
  m["aten::addcmul"] = [=](auto t) { return at::addcmul(R({8}, t), R({8}, f32), R({8}, t)); };
  m["aten::atan2"] = [=](auto t) { return at::atan2(R({8}, t), R({8}, f32)); };
  m["aten::cross"] = [=](auto t) { return at::cross(R({4, 3}, t), R({4, 3}, f32), 1); };
  m["aten::linalg_cross"] = [=](auto t) { return at::linalg_cross(R({4, 3}, t), R({4, 3}, f32)); };
  m["aten::dot"] = [=](auto t) { return at::dot(R({8}, t), R({8}, f32)); };
  m["aten::vdot"] = [=](auto t) { return at::vdot(R({8}, t), R({8}, f32)); };
  m["aten::bilinear"] = [=](auto t) { return at::bilinear(R({4, 3}, t), R({4, 2}, f32), R({5, 3, 2}, f32), R({5}, t)); };
  m["aten::cat"] = [=](auto t) { return at::cat({R({2, 3}, t), R({2, 3}, f32)}); };
  m["aten::stack"] = [=](auto t) { return at::stack({R({2, 3}, t), R({2, 3}, f32)}); };
  // Comparisons return bool: the cast shows in the value. 0.1 rounded to fp16 is not 0.1 in fp32.
  auto cmp = [](std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> op) {
    return [op](at::ScalarType t) {
      at::Tensor a = torch::full({4}, 0.1f).to(npu0()).to(t);
      at::Tensor b = torch::full({4}, 0.1f).to(npu0());
      return op(a, b);
    };
  };
  m["aten::eq.Tensor"] = cmp([](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); });
  m["aten::ne.Tensor"] = cmp([](const at::Tensor& a, const at::Tensor& b) { return at::ne(a, b); });
  m["aten::lt.Tensor"] = cmp([](const at::Tensor& a, const at::Tensor& b) { return at::lt(a, b); });
  m["aten::le.Tensor"] = cmp([](const at::Tensor& a, const at::Tensor& b) { return at::le(a, b); });
  m["aten::gt.Tensor"] = cmp([](const at::Tensor& a, const at::Tensor& b) { return at::gt(a, b); });
  m["aten::ge.Tensor"] = cmp([](const at::Tensor& a, const at::Tensor& b) { return at::ge(a, b); });
  m["aten::binary_cross_entropy"] = [](auto t) {
    return at::binary_cross_entropy(R({4, 3}, t, true), R({4, 3}, t, true));
  };
  return m;
}

bool hasAutocastKernel(const std::string& op) {
  const std::string full = op.substr(6);
  const size_t dot = full.find('.');
  auto h = c10::Dispatcher::singleton().findSchema(
      {"aten::" + full.substr(0, dot), dot == std::string::npos ? "" : full.substr(dot + 1)});
  return h.has_value() && h->hasKernelForDispatchKey(c10::DispatchKey::AutocastXPU);
}

TEST(Autocast, EveryListedOpHasItsOutputDtype) {
  torch::manual_seed(1);
  const auto calls = invocations();
  AutocastGuard guard;  // fp16
  for (const CastRule& rule : castRules()) {
    SCOPED_TRACE(rule.op);
    EXPECT_TRUE(hasAutocastKernel(rule.op));
    auto it = calls.find(rule.op);
    ASSERT_NE(it, calls.end()) << "no table row for " << rule.op;
    const Fn& fn = it->second;
    switch (rule.policy) {
      case CastPolicy::kLowPrecision: EXPECT_EQ(fn(at::kFloat).scalar_type(), at::kHalf); break;
      case CastPolicy::kFp32: EXPECT_EQ(fn(at::kHalf).scalar_type(), at::kFloat); break;
      case CastPolicy::kPromote: {
        at::Tensor out = fn(at::kHalf);
        if (out.scalar_type() == at::kBool) {
          // fp16(0.1) vs fp32(0.1) compared in fp32: unequal, and fp16(0.1) < 0.1.
          const std::string op = rule.op;
          const bool expected = op == "aten::ne.Tensor" || op == "aten::lt.Tensor" || op == "aten::le.Tensor";
          EXPECT_EQ(out.all().item<bool>(), expected);
        } else {
          EXPECT_EQ(out.scalar_type(), at::kFloat);
        }
        break;
      }
      case CastPolicy::kRefuse:
        test::expectError([&] { fn(at::kFloat); }, {"binary_cross_entropy", "binary_cross_entropy_with_logits"});
        break;
    }
  }
}

TEST(Autocast, ListsCoverReferenceOps) {
  // apex's lists as references.md names them: the table must hold at least these.
  std::set<std::string> ops;
  for (const auto& r : castRules()) ops.insert(r.op);
  for (const char* op : {"aten::conv2d", "aten::linear", "aten::addmm", "aten::matmul", "aten::mm", "aten::bmm",
                         "aten::prelu", "aten::exp", "aten::softmax.int", "aten::layer_norm", "aten::group_norm",
                         "aten::cross_entropy_loss", "aten::nll_loss", "aten::mse_loss", "aten::sum", "aten::cat",
                         "aten::stack", "aten::add.Tensor", "aten::binary_cross_entropy"}) {
    EXPECT_EQ(ops.count(op), 1u) << op;
  }
}

TEST(Autocast, Bf16Selectable) {
  AutocastGuard guard(true, at::kBFloat16);
  EXPECT_EQ(at::mm(R({3, 5}, at::kFloat), R({5, 4}, at::kFloat)).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::softmax(R({3, 4}, at::kBFloat16), 1).scalar_type(), at::kFloat);
  // bf16 with fp16 promotes to fp32.
  EXPECT_EQ(at::add(R({4}, at::kBFloat16), R({4}, at::kHalf)).scalar_type(), at::kFloat);
  EXPECT_THROW(AutocastGuard(true, at::kFloat), c10::Error);
}

TEST(Autocast, OnlyInsideTheGuardOnlyNpuTensorsAndNesting) {
  at::Tensor a = R({3, 5}, at::kFloat), b = R({5, 4}, at::kFloat);
  EXPECT_FALSE(autocastEnabled());
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  {
    AutocastGuard on;
    EXPECT_TRUE(autocastEnabled());
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kHalf);
    // CPU tensors are left alone (CPU has no fp16 mm).
    EXPECT_EQ(at::mm(a.cpu(), b.cpu()).scalar_type(), at::kFloat);
    {
      AutocastGuard off(false);
      EXPECT_FALSE(autocastEnabled());
      EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
    }
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kHalf);
  }
  EXPECT_FALSE(autocastEnabled());
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  // An unlisted op passes through (fallthrough) with its own dtype.
  AutocastGuard on;
  EXPECT_EQ(at::relu(R({4}, at::kFloat)).scalar_type(), at::kFloat);
  EXPECT_EQ(at::relu(R({4}, at::kHalf)).scalar_type(), at::kHalf);
}

TEST(Autocast, BackwardGivesFp32GradsForFp32Leaves) {
  torch::manual_seed(3);
  at::Tensor w = R({4, 5}, at::kFloat).detach().requires_grad_(true);
  at::Tensor x = R({3, 5}, at::kFloat);
  at::Tensor out;
  {
    AutocastGuard on;
    out = at::linear(x, w);
    EXPECT_EQ(out.scalar_type(), at::kHalf);
    out = at::log_softmax(out, 1);
    EXPECT_EQ(out.scalar_type(), at::kFloat);
  }
  out.sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().scalar_type(), at::kFloat);
  EXPECT_EQ(w.grad().device(), npu0());
  // Reference: the same graph in fp32 with the fp16 roundings made explicit.
  at::Tensor w2 = w.detach().clone().requires_grad_(true);
  at::Tensor ref = at::log_softmax(at::linear(x.to(at::kHalf), w2.to(at::kHalf)).to(at::kFloat), 1);
  ref.sum().backward();
  EXPECT_TRUE(at::allclose(w.grad().cpu(), w2.grad().cpu(), 1e-3, 1e-3));
  EXPECT_TRUE(at::allclose(out.detach().cpu(), ref.detach().cpu()));
}

}  // namespace
}  // namespace npuscope::amp
