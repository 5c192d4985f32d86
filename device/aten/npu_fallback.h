// The boxed fallback that runs every ATen op without an explicit npu kernel on the CPU kernels,
// over the npu tensors' own memory.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace npuscope::npu::aten {

// Runs `op` (an npu op) on the stack.
void npuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs `cpu_op` on the stack as `op` would: the arguments are those of `schema` (the npu op's,
// which must match cpu_op's argument layout), npu tensors are aliased as CPU tensors,
// low-precision math is done in fp32 and rounded back, and results become npu tensors.
void runOnCpu(const c10::OperatorHandle& cpu_op, const c10::FunctionSchema& schema, torch::jit::Stack* stack);

}  // namespace npuscope::npu::aten
