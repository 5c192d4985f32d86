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
// With `contiguous_results`, new results (not views, not in-place / out= arguments) come back in
// the default contiguous layout, as Ascend kernels write them, instead of the CPU kernel's strides.
// `compute`, when given, runs in place of the CPU kernel (cpu_op redispatched with the CPU key) on
// the CPU stack; it may redispatch itself for the cases it does not handle.
using CpuCompute = void (*)(const c10::OperatorHandle& cpu_op, torch::jit::Stack* stack);
void runOnCpu(const c10::OperatorHandle& cpu_op, const c10::FunctionSchema& schema, torch::jit::Stack* stack,
              bool contiguous_results = false, CpuCompute compute = nullptr);

// bmm.out: libtorch's CPU kernel multiplies batch by batch through select and addmm, eight
// dispatches per batch element; this one calls the same BLAS gemm with the same arguments (the
// same result, bit for bit) without them, and hands the rest to the CPU kernel.
void npuBmmOut(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// npuFallback whose new results are contiguous (the comparisons: npu_registration.cpp).
void npuFallbackContiguous(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace npuscope::npu::aten
