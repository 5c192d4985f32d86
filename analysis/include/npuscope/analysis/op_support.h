// Would a real Ascend NPU run this operator natively? A lookup over torch_npu's own operator list
// for one stated release (analysis/data/torch_npu_ops_<version>.txt, embedded at build time; sources,
// licence and extraction in analysis/data/PROVENANCE.md; what it means in docs/op_coverage.md).
// Torch-free: operator names in, verdicts out. The emulator itself runs every op; this says what
// torch_npu would do with it.
//
// Names accepted (what traces record):
//   "aten::add", "aten::add.Tensor", "add.Tensor"  (no namespace means aten)
//   "npu::npu_rotary_mul"  torch_npu >= 2.1 spelling of its custom ops; judged as aten::npu_...
//   "npuscope::...", "NpuFused..."  our own ops and fused optimizers: kCustom, ours = true
// Rule, in order:
//   1. the name with its overload, exactly as listed;
//   2. a name without overload (how profilers record ops) stands for all its overloads and gets
//      the best level among them (aten::add -> add.Tensor, add.Scalar, add.out: kNative);
//   3. an in-place name ("foo_", not a dunder like "__ior__") that the list lacks entirely is
//      judged by its functional form "foo" (via_functional = true). The list names in-place
//      variants itself (add_.Tensor, relu_, ...), so this only catches names outside the PyTorch
//      2.0 catalogue; a listed in-place variant keeps its own level (gelu_ is kNoKernel although
//      gelu is kNative, as in torch_npu 2.0.1).
//   Any other namespace (prim::, profiler::, ...) and any name not found is kUnknown.
//   aten::_copy_from / _copy_from_and_resize (an out-of-tree backend's copy hook, the emulator's)
//   are judged as copy_, which torch_npu implements itself (entry names copy_'s entry).
#pragma once

#include <string_view>
#include <vector>

namespace npuscope {

// Ordered from best supported to worst; rule 2 takes the smallest.
enum class OpSupportLevel {
  kNative,       // torch_npu registers an NPU (CANN) kernel
  kCustom,       // torch_npu's own operator (npu_*), or one of ours
  kComposite,    // no NPU kernel needed: PyTorch decomposes it into other ops, judged one by one
  kAiCpu,        // runs as an AI CPU kernel (no entry of the shipped list is marked so)
  kFallback,     // torch_npu runs PyTorch's CPU kernel on the host, copying inputs and outputs
  kUnsupported,  // torch_npu registers it only to raise "unsupported"
  kNoKernel,     // an ATen op with no NPU registration: the call fails on that torch_npu release
  kUnknown,      // not in the list
};

// "native" "custom" "composite" "aicpu" "fallback" "unsupported" "no_kernel" "unknown": the
// category words of the data file.
const char* opSupportLevelName(OpSupportLevel level);

struct OpSupport {
  OpSupportLevel level = OpSupportLevel::kUnknown;
  std::string_view entry;       // the list entry that decided ("aten::add.Tensor"); empty if none
  bool via_functional = false;  // rule 3 applied
  bool ours = false;            // an npuscope op or fused optimizer, not in the list
};

OpSupport opSupport(std::string_view name);

// The release the list describes, e.g. "torch_npu v2.0.1-5.0.0 (op-plugin 5.0.0, ...)".
std::string_view opSupportVersion();

struct OpSupportEntry {
  std::string_view name;  // "aten::add.Tensor"
  OpSupportLevel level;
};
// Every entry of the list, sorted by name; the views live as long as the program.
const std::vector<OpSupportEntry>& opSupportList();

}  // namespace npuscope
