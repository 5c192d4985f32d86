// Combined ("flattened") tensors: many tensors of one dtype and device living in a single flat
// buffer, torch_npu's `npu_combine_tensors`. Every multi-tensor op and fused optimizer step works
// on the flat buffer in one pass instead of one launch per tensor.
//
// Layout contract (Ascend alignment): tensor i occupies alignedNumel(numel_i) =
// ceil(numel_i / 16) * 16 + 32 elements starting at offset_i = sum of the earlier occupancies, so
// every offset is a multiple of 16 elements. The elements past numel_i are padding: they start
// at zero, no library op reads or writes them, so padding never enters a norm or an overflow
// check, whatever a user writes there.
//
// Device contract: the flat buffer lives on the tensors' device. Kernels touch it through
// data_ptr(), so the device's memory must be host-addressable (CPU, and the emulated NPU, whose
// tensors live in host memory).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace npuscope::optim {

namespace detail {
struct ChunkPlan;
}  // namespace detail

// Where each tensor sits in a flat buffer. Immutable and shared by every buffer with this layout
// (a bank's params, grads, fp32 masters and optimizer state).
class CombinedLayout {
 public:
  // Elements a tensor of `numel` elements occupies, padding included.
  static constexpr int64_t alignedNumel(int64_t numel) { return (numel + 15) / 16 * 16 + 32; }

  explicit CombinedLayout(std::vector<std::vector<int64_t>> shapes);

  size_t size() const { return shapes_.size(); }
  const std::vector<int64_t>& shape(size_t i) const { return shapes_.at(i); }
  int64_t offset(size_t i) const { return offsets_.at(i); }
  int64_t numel(size_t i) const { return numels_.at(i); }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::vector<int64_t>& numels() const { return numels_; }
  // Elements of the flat buffer, padding included.
  int64_t totalNumel() const { return total_; }
  // Elements that belong to a tensor (no padding).
  int64_t realNumel() const { return real_; }

  // Work partition of the real elements, one row per tensor (library internal).
  const detail::ChunkPlan& tensorPlan() const { return *tensorPlan_; }

 private:
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> numels_;
  int64_t total_ = 0;
  int64_t real_ = 0;
  std::shared_ptr<const detail::ChunkPlan> tensorPlan_;
};

// A flat buffer plus its layout. Cheap to copy: copies share the buffer.
class CombinedTensor {
 public:
  CombinedTensor() = default;

  // Copies `tensors` (all of one dtype and device, dense) into a fresh flat buffer, in order.
  // With `repoint`, each tensor is re-pointed (Tensor::set_data, which keeps its autograd
  // identity) to its view of the buffer, so module parameters alias it afterwards.
  // A tensor must not appear twice.
  static CombinedTensor combine(const std::vector<at::Tensor>& tensors, bool repoint = true);

  // A buffer with `layout` whose real elements are `fill` and whose padding is zero.
  static CombinedTensor filled(std::shared_ptr<const CombinedLayout> layout, const at::TensorOptions& options,
                               double fill = 0.0);

  bool defined() const { return flat_.defined(); }
  const at::Tensor& flat() const { return flat_; }
  const CombinedLayout& layout() const { return *layout_; }
  const std::shared_ptr<const CombinedLayout>& layoutPtr() const { return layout_; }
  size_t size() const { return layout_ ? layout_->size() : 0; }
  at::ScalarType dtype() const { return flat_.scalar_type(); }
  at::Device device() const { return flat_.device(); }

  // Tensor i as a contiguous view that aliases the buffer.
  at::Tensor view(size_t i) const;
  std::vector<at::Tensor> views() const;
  // Address of tensor i's first element.
  void* data(size_t i) const;

  // Zeroes the whole flat buffer (padding included) in one parallel pass.
  void zero() const;

 private:
  CombinedTensor(at::Tensor flat, std::shared_ptr<const CombinedLayout> layout)
      : flat_(std::move(flat)), layout_(std::move(layout)) {}

  at::Tensor flat_;
  std::shared_ptr<const CombinedLayout> layout_;
};

// Gives every tensor of `params` a .grad that is its view of `grads` (same layout as the params'
// buffer). An existing grad's values are copied in first; parameters without one get zeros.
// Autograd then accumulates into the buffer in place.
void attachGrads(const std::vector<at::Tensor>& params, const CombinedTensor& grads);

}  // namespace npuscope::optim
