#include "npuscope/optim/combined_tensor.h"

#include <algorithm>
#include <unordered_set>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>

#include "chunk_plan.h"
#include "kernels/kernels.h"

namespace npuscope::optim {
namespace {

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

void checkCombinable(const at::Tensor& t, const at::Tensor& first, size_t index) {
  TORCH_CHECK(t.defined(), "combine: tensor ", index, " is undefined");
  TORCH_CHECK(t.layout() == at::kStrided, "combine: tensor ", index, " is not dense");
  TORCH_CHECK(t.scalar_type() == first.scalar_type() && t.device() == first.device(), "combine: tensor ", index,
              " is ", t.scalar_type(), " on ", t.device(), ", tensor 0 is ", first.scalar_type(), " on ",
              first.device(), "; one buffer holds one dtype and device");
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "combine: tensor ", index, " has non-floating dtype ",
              t.scalar_type());
}

}  // namespace

CombinedLayout::CombinedLayout(std::vector<std::vector<int64_t>> shapes) : shapes_(std::move(shapes)) {
  for (const auto& shape : shapes_) {
    int64_t n = 1;
    for (int64_t d : shape) {
      TORCH_CHECK(d >= 0, "CombinedLayout: negative dimension");
      n *= d;
    }
    offsets_.push_back(total_);
    numels_.push_back(n);
    total_ += alignedNumel(n);
    real_ += n;
  }
  tensorPlan_ = std::make_shared<detail::ChunkPlan>(detail::buildChunkPlan(offsets_, numels_, numels_));
}

CombinedTensor CombinedTensor::combine(const std::vector<at::Tensor>& tensors, bool repoint) {
  TORCH_CHECK(!tensors.empty(), "combine: no tensors");
  std::vector<std::vector<int64_t>> shapes;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    checkCombinable(tensors[i], tensors[0], i);
    TORCH_CHECK(seen.insert(tensors[i].unsafeGetTensorImpl()).second, "combine: tensor ", i,
                " appears twice; a tensor can live at one offset only");
    shapes.emplace_back(tensors[i].sizes().vec());
  }
  auto layout = std::make_shared<const CombinedLayout>(std::move(shapes));
  CombinedTensor out = filled(layout, tensors[0].options(), 0.0);
  at::NoGradGuard noGrad;  // the copy must not make the buffer part of any graph
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor v = out.view(i);
    v.copy_(tensors[i]);
    // set_data keeps the tensor's identity (autograd meta, hooks, module registration) and swaps
    // its storage for the view: the Python `p.data = view` of torch_npu's combine.
    if (repoint) tensors[i].set_data(v);
  }
  return out;
}

CombinedTensor CombinedTensor::filled(std::shared_ptr<const CombinedLayout> layout, const at::TensorOptions& options,
                                      double fill) {
  TORCH_CHECK(layout != nullptr, "CombinedTensor::filled: no layout");
  at::Tensor flat = at::empty({layout->totalNumel()}, options.requires_grad(false));
  detail::zeroBytesKernel(flat.data_ptr(), static_cast<int64_t>(flat.nbytes()));
  CombinedTensor out(std::move(flat), std::move(layout));
  if (fill != 0.0) {
    at::NoGradGuard noGrad;
    for (size_t i = 0; i < out.size(); ++i) out.view(i).fill_(fill);
  }
  return out;
}

at::Tensor CombinedTensor::view(size_t i) const {
  const auto& shape = layout_->shape(i);
  return flat_.as_strided(shape, contiguousStrides(shape), flat_.storage_offset() + layout_->offset(i));
}

std::vector<at::Tensor> CombinedTensor::views() const {
  std::vector<at::Tensor> out;
  out.reserve(size());
  for (size_t i = 0; i < size(); ++i) out.push_back(view(i));
  return out;
}

void* CombinedTensor::data(size_t i) const {
  return static_cast<char*>(flat_.data_ptr()) + layout_->offset(i) * static_cast<int64_t>(flat_.element_size());
}

void CombinedTensor::zero() const {
  detail::zeroBytesKernel(flat_.data_ptr(), static_cast<int64_t>(flat_.nbytes()));
}

void attachGrads(const std::vector<at::Tensor>& params, const CombinedTensor& grads) {
  TORCH_CHECK(params.size() == grads.size(), "attachGrads: ", params.size(), " params for a buffer of ", grads.size(),
              " tensors");
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].sizes() == at::IntArrayRef(grads.layout().shape(i)), "attachGrads: param ", i,
                " does not match the buffer's layout");
    at::Tensor v = grads.view(i);
    const at::Tensor& old = params[i].grad();
    if (old.defined() && !old.is_same(v)) v.copy_(old);
    params[i].mutable_grad() = v;
  }
}

}  // namespace npuscope::optim
