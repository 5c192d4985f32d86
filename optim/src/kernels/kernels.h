// Entry points of the element kernels (library internal). They see flat buffers as raw pointers
// plus a ChunkPlan and touch only the elements the plan covers, so padding stays as it is.
// Pointers are flat-buffer bases; chunk offsets index them directly.
//
// Coefficients arrive per param group as floats, already computed in double on the host in the
// way torch computes its scalars (e.g. lr / (1 − β1^t)), then rounded once, as torch rounds a
// Scalar when a float kernel uses it.
#pragma once

#include <array>
#include <cstdint>

#include <c10/core/ScalarType.h>

#include "chunk_plan.h"

namespace npuscope::optim::detail {

// ---- multi-tensor primitives -------------------------------------------------------------------

// dst = src * scale (dst may be null: check only, or alias src). True if any product is non-finite.
bool scaleKernel(const ChunkPlan& plan, at::ScalarType srcType, const void* src, at::ScalarType dstType, void* dst,
                 float scale);
// out = a*x + b*y. True if `check` and any result is non-finite.
bool axpbyKernel(const ChunkPlan& plan, float a, at::ScalarType xType, const void* x, float b, at::ScalarType yType,
                 const void* y, at::ScalarType outType, void* out, bool check);
// partials[stat] = sum of squares of the stat's elements, in double.
void sumSquaresKernel(const ChunkPlan& plan, at::ScalarType type, const void* src, double* partials);
// Zeroes `bytes` bytes at `data` with all intra-op threads.
void zeroBytesKernel(void* data, int64_t bytes);

// ---- optimizer steps ---------------------------------------------------------------------------

struct StepBuffers {
  const ChunkPlan* plan = nullptr;  // the layout's tensor plan
  at::ScalarType type = at::kFloat;  // dtype of param, grad and state
  void* param = nullptr;
  const void* grad = nullptr;
  at::ScalarType modelType = at::ScalarType::Undefined;  // low-precision model copy to refresh, if any
  void* model = nullptr;
  std::array<void*, 4> state{};       // optimizer-specific slots; null when unused
  const int32_t* tensorGroup = nullptr;  // param group of each tensor
};

// state: [0] momentum buffer (null without momentum in every group).
struct SgdCoeffs {
  float negLr, weightDecay, momentum, oneMinusDampening;
  bool hasMomentum, nesterov, initBuffer;  // initBuffer: the buffer is new, b = g
};
void sgdStep(const StepBuffers& b, const SgdCoeffs* groups);

// Adam and AdamW. state: [0] exp_avg, [1] exp_avg_sq, [2] max_exp_avg_sq (amsgrad).
struct AdamCoeffs {
  float decay;        // p *= decay first (AdamW: 1 − lr·wd; Adam: 1)
  float l2;           // g += l2·p (Adam's weight decay; AdamW: 0)
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2;
  float sqrtBiasCorrection2, eps, negStepSize;  // negStepSize = −lr/(1 − β1^t)
  bool amsgrad;
};
void adamStep(const StepBuffers& b, const AdamCoeffs* groups);

// state: [0] square_avg, [1] acc_delta.
struct AdadeltaCoeffs {
  float negLr, weightDecay, rho, oneMinusRho, eps;
};
void adadeltaStep(const StepBuffers& b, const AdadeltaCoeffs* groups);

// torch RMSprop. state: [0] square_avg, [1] momentum_buffer, [2] grad_avg.
struct RMSpropCoeffs {
  float negLr, weightDecay, alpha, oneMinusAlpha, eps, momentum;
  bool centered, hasMomentum;
};
void rmspropStep(const StepBuffers& b, const RMSpropCoeffs* groups);

// TensorFlow-style RMSprop. state: [0] square_avg, [1] momentum_buffer, [2] grad_avg.
struct RMSpropTFCoeffs {
  float lr, negLr, l2, negDecoupled, oneMinusAlpha, eps, momentum;  // negDecoupled: p += negDecoupled·p
  bool centered, hasMomentum, lrInMomentum;
};
void rmspropTFStep(const StepBuffers& b, const RMSpropTFCoeffs* groups);

// LAMB, both variants. state: [0] exp_avg, [1] exp_avg_sq.
struct LambCoeffs {
  float gradDivisor;  // g / gradDivisor (global-norm scaling; 1 when off)
  float l2;           // g += l2·p before the moments (NVIDIA L2 mode)
  float beta1, beta3, beta2, oneMinusBeta2;
  float biasCorrection1, biasCorrection2, eps;
  float decoupled;    // u += decoupled·p
  float negLr;
  bool trust;         // the update is scaled by a per-tensor trust ratio (two passes)
};
// Updates the moments. For tensors of groups with trust, accumulates partials[2*stat] = Σp²
// and partials[2*stat+1] = Σu² over the tensor plan; others are updated completely here.
void lambMomentsPass(const StepBuffers& b, const LambCoeffs* groups, double* partials);
// p += negLr · u · trust[tensor] for tensors of groups with trust.
void lambUpdatePass(const StepBuffers& b, const LambCoeffs* groups, const float* tensorTrust);

// AdamP. state: [0] exp_avg, [1] exp_avg_sq. `rows` is the channel plan (rows = first dimension
// for tensors with more than one dimension, the whole tensor otherwise).
struct AdamPCoeffs {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, sqrtBiasCorrection2, eps, negStepSize;
  bool nesterov;
};
// Updates the moments. For tensors with needsStats[tensor], accumulates per row of `rows`
// partials[4*stat + {0,1,2,3}] = {Σg·p, Σg², Σp², Σp·perturb}; the other tensors
// (one-dimensional: no projection) are updated completely here with decay tensorDecay[tensor].
void adampMomentsPass(const StepBuffers& b, const ChunkPlan& rows, const AdamPCoeffs* groups,
                      const uint8_t* needsStats, const float* tensorDecay, double* partials);
// For tensors with needsStats: perturb −= p·rowCoef[row]; p = p·tensorDecay[tensor] + negStepSize·perturb.
void adampUpdatePass(const StepBuffers& b, const ChunkPlan& rows, const AdamPCoeffs* groups,
                     const uint8_t* needsStats, const float* tensorDecay, const float* rowCoef);

}  // namespace npuscope::optim::detail
