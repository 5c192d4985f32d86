// O1 casting ("patch_ops") for npu tensors: torch.autocast semantics with apex's op lists.
//
// Mechanism. libtorch 1.13 has no AutocastPrivateUse1 key, and AutocastCPU/AutocastCUDA carry
// aten's own kernels. AutocastXPU is a functionality key above the Autograd keys that aten leaves
// empty, so npuscope registers its cast kernels there (autocast_registration.cpp), plus a
// fallthrough fallback so every other op skips the key. c10 keeps the autocast keys in the
// default thread-local *excluded* set; an AutocastGuard takes AutocastXPU out of the excluded set
// and puts it into the included set for its lifetime, so every op called on that thread reaches
// the key. A kernel there excludes the key again, casts its npu tensor arguments and redispatches
// below it. Because the casts are ordinary autograd ops recorded above Autograd, backward
// converts the gradients back: fp32 leaf parameters receive fp32 gradients.
//
// Policies (apex O1 lists, references.md):
//   kLowPrecision  floating npu arguments -> the guard's dtype (fp16 default, bf16 selectable):
//                  conv*, linear, addmm, addmv, addr, matmul, mm, mv, bmm, baddbmm, addbmm, prelu
//   kFp32          fp16/bf16 npu arguments -> fp32: exp/log family, pow, reciprocal, rsqrt,
//                  cumsum, cumprod, norm, prod, sum, std, var, softmax/log_softmax (softmin is
//                  softmax), softplus, gelu, layer/group norm, cosine_similarity, every loss
//                  (cross_entropy_loss and nll_loss included); normalize follows from norm
//   kPromote       floating npu arguments -> the widest floating dtype among them (fp16 with
//                  fp32 -> fp32, fp16 with bf16 -> fp32): add, sub, mul, div, addcdiv, addcmul,
//                  atan2, cross, dot, comparisons, cat, stack
//   kRefuse        binary_cross_entropy: refused (use binary_cross_entropy_with_logits)
// Only npu tensors are cast (CPU tensors pass unchanged: CPU lacks fp16 kernels); fp64 and
// integer tensors are never cast. In-place and out= variants are not cast, as in torch.
//
// The guard is per thread and nests; the autograd engine carries the thread's dispatch-key state
// into backward, so call backward() outside the guard (amp::forward and scale_loss do).
#pragma once

#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

namespace npuscope::amp {

enum class CastPolicy { kLowPrecision, kFp32, kPromote, kRefuse };
const char* castPolicyName(CastPolicy policy);

struct CastRule {
  std::string op;  // "aten::name.overload" ("aten::mm" for the default overload)
  CastPolicy policy;
};

// Every op that has a cast kernel, in registration order (the table tests walk it).
const std::vector<CastRule>& castRules();

// Enables (or, with enabled=false, disables) O1 casting on this thread for its lifetime.
// `dtype` must be kHalf or kBFloat16; anything else throws c10::Error naming it.
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled = true, c10::ScalarType dtype = c10::kHalf);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prevIncluded_;
  bool prevExcluded_;
  c10::ScalarType prevDtype_;
};

// Whether O1 casting is on for this thread, and its low-precision dtype.
bool autocastEnabled();
c10::ScalarType autocastDtype();

}  // namespace npuscope::amp
