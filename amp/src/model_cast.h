// O0/O2/O3 model casting and the rebuild of a fused optimizer over cast parameters.
#pragma once

#include <memory>

#include <ATen/core/Tensor.h>

#include "npuscope/optim/fused_optimizer.h"

namespace torch::nn {
class Module;
}

namespace npuscope::amp::detail {

// Whether `m` is a BatchNorm1d/2d/3d with affine parameters (apex keeps those fp32 in O2).
bool isAffineBatchNorm(const torch::nn::Module& m);

// True when castModel(model, dtype, keepBn) would change some parameter's dtype.
bool needsCast(torch::nn::Module& model, at::ScalarType dtype, bool keepBatchnormFp32);

// Casts floating parameters and buffers to `dtype` in place of their data (Tensor::set_data:
// parameters keep their identity), except those of affine BatchNorms when keepBatchnormFp32.
void castModel(torch::nn::Module& model, at::ScalarType dtype, bool keepBatchnormFp32);

// A new optimizer of `old`'s type with its groups and hyper-parameters over the same parameter
// tensors (as they are now), with `config`. `old` must not have stepped.
std::shared_ptr<optim::NpuFusedOptimizer> rebuildOptimizer(const optim::NpuFusedOptimizer& old,
                                                           const optim::FusedOptimizerConfig& config);

}  // namespace npuscope::amp::detail
