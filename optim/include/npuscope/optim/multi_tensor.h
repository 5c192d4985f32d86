// Multi-tensor primitives over combined tensors (apex's multi_tensor_scale / _l2norm / _axpby).
// Each is one pass over the real elements of the flat buffers, split into chunks that
// at::parallel_for spreads over the intra-op threads; padding is never read or written.
//
// Reductions accumulate in double, per fixed chunk, and add the chunk partials in a fixed order:
// results do not depend on the thread count, which keeps training runs reproducible.
//
// Found-inf flags follow torch's GradScaler: a one-element float32 tensor on any host-addressable
// device that an op sets to 1.0 when it meets a non-finite value and never resets.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "npuscope/optim/combined_tensor.h"

namespace npuscope::optim {

// dst = src * scale over the real elements. `dst` has src's layout and may be src itself or a
// buffer of another floating dtype (fp16 grads into fp32 master grads: AMP's unscale).
// When `foundInf` is defined it is set if any product, as stored in dst's dtype, is non-finite:
// an inf/nan input, or a product that overflows (fp16 in place scaled past 65504).
void scaleTensors(const CombinedTensor& src, const CombinedTensor& dst, double scale,
                  const at::Tensor& foundInf = {});

// Sets `foundInf` if any real element of `t` is inf or nan; writes nothing else.
void checkFinite(const CombinedTensor& t, const at::Tensor& foundInf);

// out = a * x + b * y over the real elements (apex multi_tensor_axpby). All three share a
// layout; out may alias x or y. When `foundInf` is defined it is set if any result (in out's
// dtype) is non-finite.
void axpby(double a, const CombinedTensor& x, double b, const CombinedTensor& y, const CombinedTensor& out,
           const at::Tensor& foundInf = {});

// L2 norm of all real elements of the buffers together (inf/nan if any element is).
double l2Norm(const CombinedTensor& t);
double l2Norm(const std::vector<CombinedTensor>& ts);

// L2 norm of each tensor of the buffer, in layout order.
std::vector<double> perTensorL2Norm(const CombinedTensor& t);

// torch::nn::utils::clip_grad_norm_ over the buffers: with total = l2Norm(grads) and
// coef = maxNorm / (total + 1e-6), multiplies every element by coef when coef < 1. Returns total.
// A non-finite total leaves the grads untouched (the step is going to be skipped anyway).
double clipGradNorm(const std::vector<CombinedTensor>& grads, double maxNorm);

// Reads a found-inf flag (any dtype, one element, host-addressable): true when non-zero.
bool readFoundInf(const at::Tensor& foundInf);

}  // namespace npuscope::optim
