// How the emulated npu runs an ATen operator, read from the dispatcher's registration tables
// (`npuscope ops` prints it beside what a real torch_npu would do).
#pragma once

#include <string>

namespace npuscope::npu {

// For a qualified name ("aten::addmm"): "npu kernel", "composite: decomposes into other ops",
// "CPU kernel via its out= variant, zero-copy", "composite: runs as other npu ops" or "CPU
// kernel, zero-copy" — the dispatcher's choice for PrivateUse1, composite kernels first. An op
// that ran with an fp16/bf16 input and is not composite adds "; fp16/bf16 computed in fp32,
// rounded"; one given fp64 is "refused: no fp64 on the npu".
std::string emulatedKernelOf(const std::string& qualified_name, bool low_precision, bool fp64);

}  // namespace npuscope::npu
