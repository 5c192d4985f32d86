// opSupport against facts checked by hand in the torch_npu sources (analysis/data/PROVENANCE.md):
//   [op-plugin]  Ascend/op-plugin @ cd46cfb2, op_plugin/config/v2r0/op_plugin_functions.yaml
//   [torch_npu]  Ascend/pytorch @ 1ccf5805 (v2.0.1-5.0.0), torch_npu/csrc/aten/npu_native_functions.yaml
//   [aten]       Debian 12 python3-torch 1.13.1, torchgen/packaged/ATen/native/native_functions.yaml
// Line numbers are those files' lines at those commits.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "npuscope/analysis/op_support.h"

namespace npuscope {
namespace {

OpSupportLevel level(std::string_view name) { return opSupport(name).level; }

TEST(OpSupport, VersionIsStated) {
  EXPECT_NE(opSupportVersion().find("torch_npu v2.0.1-5.0.0"), std::string_view::npos)
      << opSupportVersion();
}

TEST(OpSupport, NativeOpsFromTheSourceLists) {
  // [op-plugin] "official": add.Tensor l.161, add_.Tensor l.167, addmm l.187, convolution l.451,
  // native_layer_norm l.1095, relu_ l.1269.
  EXPECT_EQ(level("aten::add.Tensor"), OpSupportLevel::kNative);
  EXPECT_EQ(level("aten::add_.Tensor"), OpSupportLevel::kNative);
  EXPECT_EQ(level("aten::addmm"), OpSupportLevel::kNative);
  EXPECT_EQ(level("aten::convolution"), OpSupportLevel::kNative);
  EXPECT_EQ(level("aten::native_layer_norm"), OpSupportLevel::kNative);
  EXPECT_EQ(level("aten::relu_"), OpSupportLevel::kNative);
  // [torch_npu] "supported": _local_scalar_dense l.4, copy_ l.44.
  EXPECT_EQ(level("aten::_local_scalar_dense"), OpSupportLevel::kNative);
  EXPECT_EQ(level("aten::copy_"), OpSupportLevel::kNative);
  EXPECT_EQ(opSupport("aten::add.Tensor").entry, "aten::add.Tensor");
}

TEST(OpSupport, CustomFallbackAndUnsupportedSections) {
  // [op-plugin] "custom": npu_transpose l.2067, npu_rotary_mul l.2328.
  EXPECT_EQ(level("aten::npu_transpose"), OpSupportLevel::kCustom);
  EXPECT_EQ(level("aten::npu_rotary_mul"), OpSupportLevel::kCustom);
  EXPECT_FALSE(opSupport("aten::npu_rotary_mul").ours);
  // torch_npu >= 2.1 spells its custom ops npu::...; that namespace holds nothing else.
  EXPECT_EQ(level("npu::npu_rotary_mul"), OpSupportLevel::kCustom);
  EXPECT_EQ(level("npu::add"), OpSupportLevel::kUnknown);
  // [op-plugin] "tocpu": _fft_c2c l.1855, view_as_complex l.1949.
  EXPECT_EQ(level("aten::_fft_c2c"), OpSupportLevel::kFallback);
  EXPECT_EQ(level("aten::view_as_complex"), OpSupportLevel::kFallback);
  // [op-plugin] "unsupported": cholesky l.2030, linalg_eig l.2045.
  EXPECT_EQ(level("aten::cholesky"), OpSupportLevel::kUnsupported);
  EXPECT_EQ(level("aten::linalg_eig"), OpSupportLevel::kUnsupported);
}

TEST(OpSupport, UnlistedOpsAreJudgedByHowPyTorchProvidesThem) {
  // linalg_matrix_exp: in neither torch_npu file; [aten] l.12269 dispatches it to CPU, CUDA only.
  EXPECT_EQ(level("aten::linalg_matrix_exp"), OpSupportLevel::kNoKernel);
  // linear, conv2d: in neither torch_npu file; [aten] l.2916 dispatches linear to
  // CompositeImplicitAutograd and l.1486 gives conv2d no dispatch section (the same): they run as
  // the ops they decompose into (matmul/addmm, convolution), which are judged themselves.
  EXPECT_EQ(level("aten::linear"), OpSupportLevel::kComposite);
  EXPECT_EQ(level("aten::conv2d"), OpSupportLevel::kComposite);
  // prelu: [aten] 1.13 kernel op; torch_npu 2.0.1 lists its PyTorch 2.0 name _prelu_kernel.
  EXPECT_EQ(level("aten::prelu"), OpSupportLevel::kNative);
}

TEST(OpSupport, NameWithoutOverloadTakesTheBestOverload) {
  const OpSupport add = opSupport("aten::add");  // add.Scalar, add.Tensor, add.out: all native
  EXPECT_EQ(add.level, OpSupportLevel::kNative);
  EXPECT_EQ(add.entry.substr(0, 10), "aten::add.");
  EXPECT_FALSE(add.via_functional);
  // _softmax is native ([op-plugin] l.111), _softmax.out is not listed and a CPU/CUDA kernel in
  // [aten] l.4759: the recorded name "aten::_softmax" is native.
  EXPECT_EQ(level("aten::_softmax.out"), OpSupportLevel::kNoKernel);
  EXPECT_EQ(level("aten::_softmax"), OpSupportLevel::kNative);
  // No namespace means aten; surrounding blanks are ignored.
  EXPECT_EQ(level("add.Tensor"), OpSupportLevel::kNative);
  EXPECT_EQ(level("  aten::mm "), OpSupportLevel::kNative);
  // A named overload must exist.
  EXPECT_EQ(level("aten::add.Bogus"), OpSupportLevel::kUnknown);
}

TEST(OpSupport, InPlaceNamesKeepTheirOwnEntryWhenListed) {
  // gelu is native ([op-plugin] l.665) but gelu_ is not listed and [aten] l.4374 has it as a
  // kernel op (structured_delegate gelu.out): torch_npu 2.0.1 cannot run it; no mapping to gelu.
  EXPECT_EQ(level("aten::gelu"), OpSupportLevel::kNative);
  const OpSupport gelu_ = opSupport("aten::gelu_");
  EXPECT_EQ(gelu_.level, OpSupportLevel::kNoKernel);
  EXPECT_FALSE(gelu_.via_functional);
}

TEST(OpSupport, InPlaceNamesOutsideTheListMapToTheFunctionalForm) {
  // No "mm_" / "matmul_" operator exists in any of the sources; mm ([op-plugin] l.1043) and
  // matmul.out (l.1701) are native.
  const OpSupport mm_ = opSupport("aten::mm_");
  EXPECT_EQ(mm_.level, OpSupportLevel::kNative);
  EXPECT_TRUE(mm_.via_functional);
  EXPECT_EQ(mm_.entry, "aten::mm");
  EXPECT_EQ(level("aten::matmul_.out"), OpSupportLevel::kNative);  // overload kept: matmul.out
  // Dunders are not in-place forms.
  EXPECT_EQ(level("aten::__ior__.Scalar"), OpSupportLevel::kNative);  // [op-plugin] l.6
  EXPECT_EQ(level("aten::__matmul__"), OpSupportLevel::kUnknown);
}

TEST(OpSupport, OurOwnOpsAreCustom) {
  for (const char* name : {"npuscope::fused_adam", "NpuFusedAdam.step", "NpuFusedSGD"}) {
    const OpSupport s = opSupport(name);
    EXPECT_EQ(s.level, OpSupportLevel::kCustom) << name;
    EXPECT_TRUE(s.ours) << name;
  }
}

TEST(OpSupport, UnknownNames) {
  for (const char* name : {"aten::definitely_not_an_op", "prim::Constant", "profiler::_record_function_enter",
                           "", "aten::", "aten::.Tensor", "ProfilerStep#3"}) {
    const OpSupport s = opSupport(name);
    EXPECT_EQ(s.level, OpSupportLevel::kUnknown) << name;
    EXPECT_TRUE(s.entry.empty()) << name;
  }
}

TEST(OpSupport, ListIsSortedUniqueAndUsesKnownCategories) {
  const std::vector<OpSupportEntry>& list = opSupportList();
  ASSERT_GT(list.size(), 2000u);
  std::set<std::string> levels;
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i].name.substr(0, 6), "aten::") << list[i].name;
    if (i > 0) {
      EXPECT_LT(list[i - 1].name, list[i].name);
    }
    EXPECT_NE(list[i].level, OpSupportLevel::kUnknown);
    levels.insert(opSupportLevelName(list[i].level));
    // The emulator's copy hook is judged as copy_ on purpose (TheBackendCopyHookIsJudgedAsCopy).
    if (list[i].name.rfind("aten::_copy_from", 0) == 0) continue;
    EXPECT_EQ(opSupport(list[i].name).level, list[i].level) << list[i].name;
  }
  EXPECT_EQ(levels, (std::set<std::string>{"native", "custom", "composite", "fallback", "unsupported",
                                           "no_kernel"}));
  EXPECT_STREQ(opSupportLevelName(OpSupportLevel::kAiCpu), "aicpu");
  EXPECT_STREQ(opSupportLevelName(OpSupportLevel::kUnknown), "unknown");
}

}  // namespace
}  // namespace npuscope

namespace npuscope {
namespace {

// The emulator's copy hook is judged as copy_ (torch_npu 2.0.1 lists aten::copy_ native).
TEST(OpSupport, TheBackendCopyHookIsJudgedAsCopy) {
  EXPECT_EQ(opSupport("aten::_copy_from").level, OpSupportLevel::kNative);
  EXPECT_EQ(opSupport("aten::_copy_from_and_resize").level, OpSupportLevel::kNative);
  EXPECT_EQ(std::string(opSupport("aten::_copy_from").entry).rfind("aten::copy_", 0), 0u);
}

}  // namespace
}  // namespace npuscope
