// Multi-tensor primitives on combined buffers: scale with found-inf (in place and fp16 -> fp32),
// finite check, axpby, global and per-tensor L2 norms, clip by global norm, and thread-count
// independence of the reductions.
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "npuscope/optim/optim.h"
#include "optim_test_util.h"

namespace npuscope::optim {
namespace {

using test::makeTensor;

const auto* const kThreads = ::testing::AddGlobalTestEnvironment(new test::TwoThreadsEnvironment);

std::vector<at::Tensor> sampleTensors(uint64_t seed, float scale = 1.0f) {
  std::vector<at::Tensor> out;
  for (const auto& shape : test::parityShapes()) out.push_back(makeTensor(shape, seed + out.size(), scale));
  return out;
}

TEST(MultiTensor, ScaleInPlaceAndIntoAnotherDtype) {
  auto tensors = sampleTensors(1);
  std::vector<at::Tensor> originals;
  for (const auto& t : tensors) originals.push_back(t.clone());
  const CombinedTensor buf = CombinedTensor::combine(tensors);
  at::Tensor foundInf = torch::zeros({1});
  scaleTensors(buf, buf, 0.25, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 0.0f);
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_TRUE(test::bitEqual(tensors[i], originals[i] * 0.25f)) << i;

  // fp16 grads unscaled into an fp32 buffer of the same layout (AMP O2's unscale).
  std::vector<at::Tensor> halves;
  for (const auto& t : originals) halves.push_back(t.to(torch::kHalf));
  const CombinedTensor h = CombinedTensor::combine(halves);
  const CombinedTensor f = CombinedTensor::filled(h.layoutPtr(), torch::TensorOptions().dtype(torch::kFloat));
  scaleTensors(h, f, 1.0 / 1024, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 0.0f);
  for (size_t i = 0; i < halves.size(); ++i) {
    EXPECT_TRUE(test::bitEqual(f.view(i), halves[i].to(torch::kFloat) * (1.0f / 1024))) << i;
  }
}

TEST(MultiTensor, ScaleSetsFoundInfForInfNanAndOverflow) {
  for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::nanf("")}) {
    auto tensors = sampleTensors(2);
    const CombinedTensor buf = CombinedTensor::combine(tensors);
    tensors[4].view(-1)[12345].fill_(bad);  // inside the two-chunk tensor
    at::Tensor foundInf = torch::zeros({1});
    scaleTensors(buf, buf, 0.5, foundInf);
    EXPECT_EQ(foundInf.item<float>(), 1.0f) << bad;
    // The flag is sticky: a clean pass does not reset it.
    tensors[4].view(-1)[12345].fill_(0.0f);
    scaleTensors(buf, buf, 0.5, foundInf);
    EXPECT_EQ(foundInf.item<float>(), 1.0f);
  }
  // A finite fp16 value that overflows when scaled into fp16.
  std::vector<at::Tensor> halves = {torch::full({5}, 60000.0f, torch::kHalf)};
  const CombinedTensor h = CombinedTensor::combine(halves);
  at::Tensor foundInf = torch::zeros({1});
  scaleTensors(h, h, 4.0, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 1.0f);

  at::Tensor clean = torch::zeros({1});
  auto tensors = sampleTensors(3);
  const CombinedTensor buf = CombinedTensor::combine(tensors);
  checkFinite(buf, clean);
  EXPECT_EQ(clean.item<float>(), 0.0f);
  tensors[0].fill_(std::nanf(""));
  checkFinite(buf, clean);
  EXPECT_EQ(clean.item<float>(), 1.0f);
}

TEST(MultiTensor, Axpby) {
  auto xs = sampleTensors(4);
  auto ys = sampleTensors(5);
  std::vector<at::Tensor> expected;
  for (size_t i = 0; i < xs.size(); ++i) expected.push_back(2.0f * xs[i] + (-0.5f) * ys[i]);
  const CombinedTensor x = CombinedTensor::combine(xs);
  const CombinedTensor y = CombinedTensor::combine(ys);
  at::Tensor foundInf = torch::zeros({1});
  axpby(2.0, x, -0.5, y, y, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 0.0f);
  for (size_t i = 0; i < ys.size(); ++i) EXPECT_TRUE(test::bitEqual(ys[i], expected[i])) << i;
  xs[1].fill_(std::numeric_limits<float>::infinity());
  axpby(1.0, x, 1.0, y, y, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 1.0f);
}

TEST(MultiTensor, GlobalAndPerTensorL2NormMatchADoubleReference) {
  auto tensors = sampleTensors(6, 3.0f);
  const CombinedTensor buf = CombinedTensor::combine(tensors);
  double total = 0.0;
  const std::vector<double> perTensor = perTensorL2Norm(buf);
  ASSERT_EQ(perTensor.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    double sq = 0.0;
    for (float v : test::toVector(tensors[i])) sq += static_cast<double>(v) * v;
    total += sq;
    EXPECT_NEAR(perTensor[i], std::sqrt(sq), 1e-12 * std::sqrt(sq) + 1e-300) << "tensor " << i;
  }
  EXPECT_NEAR(l2Norm(buf), std::sqrt(total), 1e-12 * std::sqrt(total));
  // Several buffers at once, e.g. one per dtype.
  std::vector<at::Tensor> more = {makeTensor({9}, 77)};
  const CombinedTensor other = CombinedTensor::combine(more);
  const double otherSq = more[0].to(torch::kDouble).pow(2).sum().item<double>();
  EXPECT_NEAR(l2Norm({buf, other}), std::sqrt(total + otherSq), 1e-12 * std::sqrt(total));
}

// Partial sums are per fixed chunk and added in a fixed order: the norm is bit-identical whatever
// the number of threads.
TEST(MultiTensor, NormDoesNotDependOnTheThreadCount) {
  std::vector<at::Tensor> tensors = {makeTensor({1000003}, 8), makeTensor({3, 300001}, 9)};
  const CombinedTensor buf = CombinedTensor::combine(tensors);
  at::set_num_threads(1);
  const double one = l2Norm(buf);
  const auto oneEach = perTensorL2Norm(buf);
  at::set_num_threads(2);
  const double two = l2Norm(buf);
  const auto twoEach = perTensorL2Norm(buf);
  EXPECT_EQ(one, two);
  EXPECT_EQ(oneEach, twoEach);
}

TEST(MultiTensor, ClipGradNormMatchesTorch) {
  for (const double maxNorm : {0.5, 1e6}) {
    auto grads = sampleTensors(10, 0.2f);
    std::vector<at::Tensor> params;
    for (const auto& g : grads) {
      params.push_back(torch::zeros_like(g).requires_grad_(true));
      params.back().mutable_grad() = g.clone();
    }
    const double torchNorm = torch::nn::utils::clip_grad_norm_(params, maxNorm);
    const CombinedTensor buf = CombinedTensor::combine(grads);
    const double norm = clipGradNorm({buf}, maxNorm);
    EXPECT_NEAR(norm, torchNorm, 1e-6 * torchNorm);
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_LE(test::maxRelDiff(grads[i], params[i].grad()), 1e-6) << "tensor " << i << " maxNorm " << maxNorm;
    }
    if (maxNorm > 1e5) {
      for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(test::bitEqual(grads[i], params[i].grad()));
    } else {
      EXPECT_NEAR(l2Norm(buf), maxNorm, 1e-5);
    }
  }
}

TEST(MultiTensor, ReadFoundInfAcceptsCommonDtypes) {
  EXPECT_FALSE(readFoundInf(torch::zeros({1})));
  EXPECT_TRUE(readFoundInf(torch::ones({1})));
  EXPECT_TRUE(readFoundInf(torch::ones({1}, torch::kBool)));
  EXPECT_FALSE(readFoundInf(torch::zeros({}, torch::kLong)));
  EXPECT_THROW(readFoundInf(torch::zeros({2})), c10::Error);
}

}  // namespace
}  // namespace npuscope::optim
