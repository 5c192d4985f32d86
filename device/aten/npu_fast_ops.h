// Unboxed fast paths for the hottest elementwise ops (add/sub/mul/div, in place and functional).
// Same semantics as the boxed fallback, minus its generic work (boxing, schema walk, the
// structured in-place -> out detour); cases they do not cover (low precision, float-status
// tracking, mixed devices) go to the boxed fallback.
#pragma once

#include <ATen/core/Tensor.h>

namespace npuscope::npu::aten {

at::Tensor& add_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor& sub_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor& mul_inplace(at::Tensor& self, const at::Tensor& other);
at::Tensor mul(const at::Tensor& self, const at::Tensor& other);
at::Tensor& div_inplace(at::Tensor& self, const at::Tensor& other);
at::Tensor div(const at::Tensor& self, const at::Tensor& other);

}  // namespace npuscope::npu::aten
