// Helpers shared by the optim tests: deterministic data, comparisons, thread setup.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace npuscope::optim::test {

// Runs every test with two intra-op threads so the chunked parallel paths are exercised
// (at::get_num_threads() starts at 1 on the build machine).
class TwoThreadsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { at::set_num_threads(2); }
};

// A deterministic value in [-1, 1) for a key (splitmix64 of the four parts).
inline float hashUniform(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^
               (c + 0x85157AF5ull) * 0x94D049BB133111EBull ^ (d + 0x1234567ull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// The shapes every parity test steps: a 1-element tensor, odd sizes, a conv weight, a matrix
// spanning two 64K-element chunks and one whose rows are longer than a chunk (split rows).
inline std::vector<std::vector<int64_t>> parityShapes() {
  return {{1}, {7}, {33, 5}, {4, 3, 3, 3}, {301, 257}, {2, 70001}};
}

inline int64_t numelOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A float tensor of `shape` with values scale * hashUniform(seed, index, ...).
inline at::Tensor makeTensor(const std::vector<int64_t>& shape, uint64_t seed, float scale = 1.0f) {
  at::Tensor t = torch::empty(shape, torch::kFloat);
  float* d = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = scale * hashUniform(seed, static_cast<uint64_t>(i), 7, 11);
  return t;
}

inline std::vector<float> toVector(const at::Tensor& t) {
  at::Tensor c = t.detach().to(torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

inline at::Tensor fromVector(const std::vector<float>& v, const std::vector<int64_t>& shape) {
  at::Tensor t = torch::empty(shape, torch::kFloat);
  std::copy(v.begin(), v.end(), t.data_ptr<float>());
  return t;
}

// Relative difference of two tensors in the max norm: max_i |a_i − b_i| / max_i |b_i| (plain
// max |a − b| when b is all zero). Per-element relative errors are meaningless for elements that
// pass through zero during training, where a difference of one float32 ulp at the tensor's scale
// is huge relative to the element; the norm-wise measure compares at the tensor's scale. 1e-6
// allows about eight ulps at that scale; any real error in an update formula is orders larger.
inline double maxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double maxDiff = 0.0;
  double maxB = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    maxDiff = std::max(maxDiff, d);
    maxB = std::max(maxB, std::abs(static_cast<double>(b[i])));
  }
  return maxB > 0.0 ? maxDiff / maxB : maxDiff;
}

inline double maxRelDiff(const at::Tensor& a, const at::Tensor& b) { return maxRelDiff(toVector(a), toVector(b)); }

// Same dtype, shape and bytes (unlike torch::equal, tells -0 from 0 and compares NaNs).
inline bool bitEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor ca = a.detach().cpu().contiguous();
  at::Tensor cb = b.detach().cpu().contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// Half an fp16 (or bf16) unit in the last place at |x|: the most rounding x to that type moves it.
inline double halfUlp(double x, bool bf16) {
  const int mantissaBits = bf16 ? 7 : 10;
  const int minExponent = bf16 ? -126 : -14;
  const double ax = std::abs(x);
  int e = ax > 0 ? static_cast<int>(std::floor(std::log2(ax))) : minExponent;
  e = std::max(e, minExponent);
  return std::ldexp(1.0, e - mantissaBits) / 2.0;
}

}  // namespace npuscope::optim::test
