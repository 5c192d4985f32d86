// Registration table of O1 casting: which aten ops get a cast kernel at AutocastXPU, and with
// which policy (apex's O1 lists, references.md). Kernels live in autocast_kernels.cpp.
//
// Registrations are made on the first AutocastGuard, not by static initialisers: npuscope_amp is
// a static library, and a linker may drop a translation unit that nothing references.
#include <memory>
#include <mutex>

#include <torch/library.h>

#include "autocast_kernels.h"

namespace npuscope::amp {

const std::vector<CastRule>& castRules() {
  using P = CastPolicy;
  static const std::vector<CastRule> rules = {
      // fp16 (or bf16): matrix and convolution work on the Cube.
      {"aten::conv1d", P::kLowPrecision},
      {"aten::conv1d.padding", P::kLowPrecision},
      {"aten::conv2d", P::kLowPrecision},
      {"aten::conv2d.padding", P::kLowPrecision},
      {"aten::conv3d", P::kLowPrecision},
      {"aten::conv3d.padding", P::kLowPrecision},
      {"aten::conv_transpose1d", P::kLowPrecision},
      {"aten::conv_transpose2d.input", P::kLowPrecision},
      {"aten::conv_transpose3d.input", P::kLowPrecision},
      {"aten::conv_tbc", P::kLowPrecision},
      {"aten::convolution", P::kLowPrecision},
      {"aten::_convolution", P::kLowPrecision},
      {"aten::prelu", P::kLowPrecision},
      {"aten::addmm", P::kLowPrecision},
      {"aten::addmv", P::kLowPrecision},
      {"aten::addr", P::kLowPrecision},
      {"aten::matmul", P::kLowPrecision},
      {"aten::mm", P::kLowPrecision},
      {"aten::mv", P::kLowPrecision},
      {"aten::bmm", P::kLowPrecision},
      {"aten::baddbmm", P::kLowPrecision},
      {"aten::addbmm", P::kLowPrecision},
      {"aten::linear", P::kLowPrecision},
      // fp32: ranges or accumulations fp16 cannot hold.
      {"aten::acos", P::kFp32},
      {"aten::asin", P::kFp32},
      {"aten::cosh", P::kFp32},
      {"aten::erfinv", P::kFp32},
      {"aten::exp", P::kFp32},
      {"aten::expm1", P::kFp32},
      {"aten::log", P::kFp32},
      {"aten::log10", P::kFp32},
      {"aten::log2", P::kFp32},
      {"aten::log1p", P::kFp32},
      {"aten::reciprocal", P::kFp32},
      {"aten::rsqrt", P::kFp32},
      {"aten::sinh", P::kFp32},
      {"aten::tan", P::kFp32},
      {"aten::pow.Tensor_Scalar", P::kFp32},
      {"aten::pow.Tensor_Tensor", P::kFp32},
      {"aten::pow.Scalar", P::kFp32},
      {"aten::cumprod", P::kFp32},
      {"aten::cumsum", P::kFp32},
      {"aten::dist", P::kFp32},
      {"aten::norm.Scalar", P::kFp32},
      {"aten::norm.ScalarOpt_dim", P::kFp32},
      {"aten::prod", P::kFp32},
      {"aten::prod.dim_int", P::kFp32},
      {"aten::renorm", P::kFp32},
      {"aten::sum", P::kFp32},
      {"aten::sum.dim_IntList", P::kFp32},
      {"aten::std", P::kFp32},
      {"aten::std.dim", P::kFp32},
      {"aten::std.correction", P::kFp32},
      {"aten::var", P::kFp32},
      {"aten::var.dim", P::kFp32},
      {"aten::var.correction", P::kFp32},
      {"aten::softmax.int", P::kFp32},
      {"aten::log_softmax.int", P::kFp32},
      {"aten::softplus", P::kFp32},
      {"aten::gelu", P::kFp32},
      {"aten::layer_norm", P::kFp32},
      {"aten::group_norm", P::kFp32},
      {"aten::cosine_similarity", P::kFp32},
      {"aten::pdist", P::kFp32},
      {"aten::cdist", P::kFp32},
      {"aten::binary_cross_entropy_with_logits", P::kFp32},
      {"aten::cross_entropy_loss", P::kFp32},
      {"aten::nll_loss", P::kFp32},
      {"aten::nll_loss2d", P::kFp32},
      {"aten::nll_loss_nd", P::kFp32},
      {"aten::kl_div", P::kFp32},
      {"aten::l1_loss", P::kFp32},
      {"aten::smooth_l1_loss", P::kFp32},
      {"aten::huber_loss", P::kFp32},
      {"aten::mse_loss", P::kFp32},
      {"aten::margin_ranking_loss", P::kFp32},
      {"aten::multilabel_margin_loss", P::kFp32},
      {"aten::soft_margin_loss", P::kFp32},
      {"aten::triplet_margin_loss", P::kFp32},
      {"aten::multi_margin_loss", P::kFp32},
      {"aten::hinge_embedding_loss", P::kFp32},
      {"aten::poisson_nll_loss", P::kFp32},
      {"aten::cosine_embedding_loss", P::kFp32},
      // Promote to the widest floating type among the arguments.
      {"aten::add.Tensor", P::kPromote},
      {"aten::sub.Tensor", P::kPromote},
      {"aten::mul.Tensor", P::kPromote},
      {"aten::div.Tensor", P::kPromote},
      {"aten::div.Tensor_mode", P::kPromote},
      {"aten::addcdiv", P::kPromote},
      {"aten::addcmul", P::kPromote},
      {"aten::atan2", P::kPromote},
      {"aten::cross", P::kPromote},
      {"aten::linalg_cross", P::kPromote},
      {"aten::dot", P::kPromote},
      {"aten::vdot", P::kPromote},
      {"aten::bilinear", P::kPromote},
      {"aten::eq.Tensor", P::kPromote},
      {"aten::ne.Tensor", P::kPromote},
      {"aten::lt.Tensor", P::kPromote},
      {"aten::le.Tensor", P::kPromote},
      {"aten::gt.Tensor", P::kPromote},
      {"aten::ge.Tensor", P::kPromote},
      {"aten::cat", P::kPromote},
      {"aten::stack", P::kPromote},
      // Refused.
      {"aten::binary_cross_entropy", P::kRefuse},
  };
  return rules;
}

namespace detail {
namespace {

torch::CppFunction kernelFor(CastPolicy policy) {
  switch (policy) {
    case CastPolicy::kLowPrecision:
      return torch::CppFunction::makeFromBoxedFunction<&autocastKernel<CastPolicy::kLowPrecision>>();
    case CastPolicy::kFp32:
      return torch::CppFunction::makeFromBoxedFunction<&autocastKernel<CastPolicy::kFp32>>();
    case CastPolicy::kPromote:
      return torch::CppFunction::makeFromBoxedFunction<&autocastKernel<CastPolicy::kPromote>>();
    case CastPolicy::kRefuse:
      return torch::CppFunction::makeFromBoxedFunction<&autocastKernel<CastPolicy::kRefuse>>();
  }
  TORCH_INTERNAL_ASSERT(false, "unknown cast policy");
}

}  // namespace

void ensureAutocastRegistered() {
  static std::once_flag once;
  static std::unique_ptr<torch::Library> fallback;
  static std::unique_ptr<torch::Library> kernels;
  std::call_once(once, [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    TORCH_CHECK(!dispatcher.hasBackendFallbackForDispatchKey(c10::DispatchKey::AutocastXPU),
                "amp O1: the AutocastXPU dispatch key is already in use by another library; npuscope's npu "
                "autocast needs it to itself");
    fallback = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::AutocastXPU, __FILE__,
                                                __LINE__);
    fallback->fallback(torch::CppFunction::makeFallthrough());
    kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastXPU, __FILE__,
                                               __LINE__);
    for (const CastRule& rule : castRules()) {
      const std::string full = rule.op.substr(6);  // drop "aten::"
      const size_t dot = full.find('.');
      const std::string name = full.substr(0, dot);
      const std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
      TORCH_INTERNAL_ASSERT(dispatcher.findSchema({"aten::" + name, overload}).has_value(), "amp O1: ", rule.op,
                            " has no schema in this libtorch");
      kernels->impl(full.c_str(), kernelFor(rule.policy));
    }
  });
}

}  // namespace detail
}  // namespace npuscope::amp
