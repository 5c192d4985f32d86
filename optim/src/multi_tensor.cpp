#include "npuscope/optim/multi_tensor.h"

#include <cmath>

#include "chunk_plan.h"
#include "kernels/kernels.h"

namespace npuscope::optim {
namespace {

void checkSameLayout(const CombinedTensor& a, const CombinedTensor& b, const char* op) {
  TORCH_CHECK(a.defined() && b.defined(), op, ": undefined buffer");
  TORCH_CHECK(a.layoutPtr() == b.layoutPtr() ||
                  (a.layout().offsets() == b.layout().offsets() && a.layout().numels() == b.layout().numels()),
              op, ": buffers have different layouts");
}

void setFoundInf(const at::Tensor& foundInf) {
  TORCH_CHECK(foundInf.numel() == 1 && foundInf.scalar_type() == at::kFloat,
              "found_inf must be a one-element float32 tensor");
  *static_cast<float*>(foundInf.data_ptr()) = 1.0f;
}

// Sum of squares of every real element, added in a fixed order.
double sumSquares(const CombinedTensor& t) {
  const detail::ChunkPlan& plan = t.layout().tensorPlan();
  std::vector<double> partials(static_cast<size_t>(plan.numStats()), 0.0);
  detail::sumSquaresKernel(plan, t.dtype(), t.flat().data_ptr(), partials.data());
  double sum = 0.0;
  for (double p : partials) sum += p;
  return sum;
}

}  // namespace

void scaleTensors(const CombinedTensor& src, const CombinedTensor& dst, double scale, const at::Tensor& foundInf) {
  checkSameLayout(src, dst, "scaleTensors");
  const bool bad = detail::scaleKernel(src.layout().tensorPlan(), src.dtype(), src.flat().data_ptr(), dst.dtype(),
                                       dst.flat().data_ptr(), static_cast<float>(scale));
  if (bad && foundInf.defined()) setFoundInf(foundInf);
}

void checkFinite(const CombinedTensor& t, const at::Tensor& foundInf) {
  TORCH_CHECK(t.defined(), "checkFinite: undefined buffer");
  const bool bad =
      detail::scaleKernel(t.layout().tensorPlan(), t.dtype(), t.flat().data_ptr(), t.dtype(), nullptr, 1.0f);
  if (bad && foundInf.defined()) setFoundInf(foundInf);
}

void axpby(double a, const CombinedTensor& x, double b, const CombinedTensor& y, const CombinedTensor& out,
           const at::Tensor& foundInf) {
  checkSameLayout(x, y, "axpby");
  checkSameLayout(x, out, "axpby");
  const bool bad = detail::axpbyKernel(x.layout().tensorPlan(), static_cast<float>(a), x.dtype(), x.flat().data_ptr(),
                                       static_cast<float>(b), y.dtype(), y.flat().data_ptr(), out.dtype(),
                                       out.flat().data_ptr(), foundInf.defined());
  if (bad) setFoundInf(foundInf);
}

double l2Norm(const CombinedTensor& t) { return std::sqrt(sumSquares(t)); }

double l2Norm(const std::vector<CombinedTensor>& ts) {
  double sum = 0.0;
  for (const auto& t : ts) sum += sumSquares(t);
  return std::sqrt(sum);
}

std::vector<double> perTensorL2Norm(const CombinedTensor& t) {
  const detail::ChunkPlan& plan = t.layout().tensorPlan();
  std::vector<double> partials(static_cast<size_t>(plan.numStats()), 0.0);
  detail::sumSquaresKernel(plan, t.dtype(), t.flat().data_ptr(), partials.data());
  std::vector<double> rows(static_cast<size_t>(plan.numRows()), 0.0);
  detail::reduceRows(plan, partials.data(), 1, rows.data());
  for (double& r : rows) r = std::sqrt(r);
  return rows;  // the tensor plan has one row per tensor
}

double clipGradNorm(const std::vector<CombinedTensor>& grads, double maxNorm) {
  const double total = l2Norm(grads);
  const double coef = maxNorm / (total + 1e-6);
  if (std::isfinite(total) && coef < 1.0) {
    for (const auto& g : grads) scaleTensors(g, g, coef);
  }
  return total;
}

bool readFoundInf(const at::Tensor& foundInf) {
  TORCH_CHECK(foundInf.numel() == 1, "found_inf must have one element, got ", foundInf.numel());
  const void* p = foundInf.data_ptr();
  switch (foundInf.scalar_type()) {
    case at::kFloat:
      return *static_cast<const float*>(p) != 0.0f;
    case at::kDouble:
      return *static_cast<const double*>(p) != 0.0;
    case at::kBool:
      return *static_cast<const bool*>(p);
    case at::kByte:
      return *static_cast<const uint8_t*>(p) != 0;
    case at::kInt:
      return *static_cast<const int32_t*>(p) != 0;
    case at::kLong:
      return *static_cast<const int64_t*>(p) != 0;
    default:
      TORCH_CHECK(false, "found_inf: unsupported dtype ", foundInf.scalar_type());
  }
}

}  // namespace npuscope::optim
