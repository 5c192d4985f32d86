// Combined tensors: Ascend-aligned layout, parameters and grads as views of the flat buffers,
// autograd accumulating into them, zero_grad in one pass, padding that stays zero and that no
// norm or overflow check sees.
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "npuscope/optim/optim.h"
#include "optim_test_util.h"

namespace npuscope::optim {
namespace {

using test::makeTensor;

const auto* const kThreads = ::testing::AddGlobalTestEnvironment(new test::TwoThreadsEnvironment);

// The padding elements of a buffer (everything no tensor owns).
std::vector<float> paddingOf(const CombinedTensor& t) {
  std::vector<float> out;
  at::Tensor flat = t.flat().to(torch::kFloat);
  const float* d = flat.data_ptr<float>();
  const auto& layout = t.layout();
  for (size_t i = 0; i < layout.size(); ++i) {
    const int64_t end = i + 1 < layout.size() ? layout.offset(i + 1) : layout.totalNumel();
    for (int64_t k = layout.offset(i) + layout.numel(i); k < end; ++k) out.push_back(d[k]);
  }
  return out;
}

bool allZero(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}

TEST(CombinedLayout, AscendAlignmentAndOffsets) {
  EXPECT_EQ(CombinedLayout::alignedNumel(0), 32);
  EXPECT_EQ(CombinedLayout::alignedNumel(1), 48);
  EXPECT_EQ(CombinedLayout::alignedNumel(15), 48);
  EXPECT_EQ(CombinedLayout::alignedNumel(16), 48);
  EXPECT_EQ(CombinedLayout::alignedNumel(17), 64);
  EXPECT_EQ(CombinedLayout::alignedNumel(1000), 1040);

  const CombinedLayout layout({{1}, {17}, {4, 4}, {}, {3, 0}, {5, 7}});
  const std::vector<int64_t> expectedOffsets = {0, 48, 112, 160, 208, 240};
  EXPECT_EQ(layout.offsets(), expectedOffsets);
  const std::vector<int64_t> expectedNumels = {1, 17, 16, 1, 0, 35};
  EXPECT_EQ(layout.numels(), expectedNumels);
  EXPECT_EQ(layout.totalNumel(), 240 + 80);
  EXPECT_EQ(layout.realNumel(), 70);
  for (size_t i = 0; i < layout.size(); ++i) EXPECT_EQ(layout.offset(i) % 16, 0) << "tensor " << i;
}

TEST(CombinedTensor, ParametersBecomeViewsThatAliasTheBuffer) {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> originals;
  for (const auto& shape : test::parityShapes()) {
    originals.push_back(makeTensor(shape, originals.size() + 1));
    params.push_back(originals.back().clone().requires_grad_(true));
  }
  const at::TensorImpl* firstImpl = params[0].unsafeGetTensorImpl();
  const CombinedTensor combined = CombinedTensor::combine(params);

  ASSERT_EQ(combined.size(), params.size());
  EXPECT_EQ(combined.flat().numel(), combined.layout().totalNumel());
  const auto* base = static_cast<const char*>(combined.flat().data_ptr());
  for (size_t i = 0; i < params.size(); ++i) {
    // Same tensor object (identity kept), now living at its aligned offset, values unchanged.
    EXPECT_EQ(params[i].data_ptr(), base + combined.layout().offset(i) * 4) << "tensor " << i;
    EXPECT_TRUE(params[i].is_contiguous());
    EXPECT_TRUE(params[i].requires_grad());
    EXPECT_TRUE(params[i].is_leaf());
    EXPECT_TRUE(test::bitEqual(params[i], originals[i])) << "tensor " << i;
    EXPECT_EQ(combined.view(i).data_ptr(), params[i].data_ptr());
  }
  EXPECT_EQ(params[0].unsafeGetTensorImpl(), firstImpl);

  // Writes through a parameter show in the buffer and the other way round.
  {
    torch::NoGradGuard noGrad;
    params[2].fill_(3.5f);
  }
  EXPECT_EQ(combined.flat()[combined.layout().offset(2) + 7].item<float>(), 3.5f);
  combined.flat()[combined.layout().offset(1) + 6].fill_(-2.0f);
  EXPECT_EQ(params[1][6].item<float>(), -2.0f);
  EXPECT_TRUE(allZero(paddingOf(combined)));
}

TEST(CombinedTensor, RefusesDuplicatesAndMixedDtypes) {
  at::Tensor a = torch::ones({3});
  EXPECT_THROW(CombinedTensor::combine({a, a}), c10::Error);
  EXPECT_THROW(CombinedTensor::combine({torch::ones({3}), torch::ones({3}, torch::kHalf)}), c10::Error);
}

TEST(CombinedTensor, FilledSetsRealElementsOnly) {
  auto layout = std::make_shared<const CombinedLayout>(std::vector<std::vector<int64_t>>{{3}, {2, 9}});
  const CombinedTensor t = CombinedTensor::filled(layout, torch::TensorOptions().dtype(torch::kFloat), 1.5);
  EXPECT_TRUE(allZero(paddingOf(t)));
  EXPECT_TRUE(torch::all(t.view(1) == 1.5f).item<bool>());
  t.zero();
  EXPECT_EQ(torch::count_nonzero(t.flat()).item<int64_t>(), 0);
}

// A small model whose parameters the optimizer combines: backward must accumulate into the flat
// grad buffer in place, and zeroGrad must clear it in one pass while grads stay views.
TEST(CombinedTensor, AutogradAccumulatesIntoTheFlatGradBuffer) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(5, 7), torch::nn::Tanh(), torch::nn::Linear(7, 3));
  auto params = model->parameters();
  NpuFusedSGD opt(params, NpuFusedSGDOptions(0.1));
  ASSERT_EQ(opt.banks().size(), 1u);
  const ParamBank& bank = opt.banks()[0];

  const at::Tensor x = makeTensor({4, 5}, 42);
  model->forward(x).pow(2).sum().backward();
  // Reference gradients from an uncombined copy of the model.
  torch::nn::Sequential copy(torch::nn::Linear(5, 7), torch::nn::Tanh(), torch::nn::Linear(7, 3));
  {
    torch::NoGradGuard noGrad;
    for (size_t i = 0; i < params.size(); ++i) copy->parameters()[i].copy_(params[i]);
  }
  copy->forward(x).pow(2).sum().backward();

  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].grad().data_ptr(), bank.grads.data(i)) << "grad " << i << " left the buffer";
    EXPECT_TRUE(torch::allclose(bank.grads.view(i), copy->parameters()[i].grad())) << "grad " << i;
  }
  EXPECT_GT(l2Norm(bank.grads), 0.0);

  // A second backward accumulates (no zeroing in between), still in place.
  model->forward(x).pow(2).sum().backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(bank.grads.view(i), 2 * copy->parameters()[i].grad())) << "grad " << i;
  }

  opt.zeroGrad();
  EXPECT_EQ(torch::count_nonzero(bank.grads.flat()).item<int64_t>(), 0);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].grad().data_ptr(), bank.grads.data(i));
}

// torch::nn::Module::zero_grad(set_to_none) drops the views; the next step must re-point the
// fresh grads into the buffer and use their values.
TEST(CombinedTensor, GradsReplacedByTheUserAreTakenBackIntoTheBuffer) {
  std::vector<at::Tensor> params = {makeTensor({3, 4}, 1).requires_grad_(true), makeTensor({5}, 2).requires_grad_(true)};
  std::vector<at::Tensor> expected = {params[0].detach().clone(), params[1].detach().clone()};
  NpuFusedSGD opt(params, NpuFusedSGDOptions(0.5));
  for (auto& p : params) p.mutable_grad() = at::Tensor();  // set_to_none
  (params[0].sum() * 2 + params[1].sum()).backward();       // fresh grads outside the buffer
  ASSERT_NE(params[0].grad().data_ptr(), opt.banks()[0].grads.data(0));
  opt.step();
  EXPECT_TRUE(torch::allclose(params[0], expected[0] - 0.5 * 2));
  EXPECT_TRUE(torch::allclose(params[1], expected[1] - 0.5 * 1));
  EXPECT_EQ(params[0].grad().data_ptr(), opt.banks()[0].grads.data(0));
}

TEST(CombinedTensor, StepRefusesParametersMovedOutOfTheBuffer) {
  std::vector<at::Tensor> params = {makeTensor({3, 4}, 1).requires_grad_(true)};
  NpuFusedAdam opt(params);
  opt.step();
  params[0].set_data(torch::zeros({3, 4}));
  EXPECT_THROW(opt.step(), c10::Error);
}

TEST(CombinedTensor, OneBankPerDtype) {
  std::vector<at::Tensor> params = {makeTensor({3}, 1).requires_grad_(true),
                                    makeTensor({4}, 2).to(torch::kHalf).requires_grad_(true),
                                    makeTensor({5}, 3).requires_grad_(true)};
  NpuFusedAdam opt(params);
  ASSERT_EQ(opt.banks().size(), 2u);
  EXPECT_EQ(opt.banks()[0].params.dtype(), torch::kFloat);
  EXPECT_EQ(opt.banks()[0].params.size(), 2u);
  EXPECT_EQ(opt.banks()[1].params.dtype(), torch::kHalf);
  EXPECT_EQ(opt.banks()[0].paramIndices, (std::vector<size_t>{0, 2}));
}

// Padding of parameters, grads and state stays zero through steps, and inf written into the grad
// padding is seen by neither the step, the norms nor the overflow checks.
TEST(CombinedTensor, PaddingStaysZeroAndInfInPaddingIsIgnored) {
  std::vector<at::Tensor> params;
  for (const auto& shape : test::parityShapes()) params.push_back(makeTensor(shape, params.size() + 3).requires_grad_(true));
  NpuFusedAdamOptions o;
  o.weightDecay = 0.1;
  o.amsgrad = true;
  NpuFusedAdam opt(params, o);
  const ParamBank& bank = opt.banks()[0];

  // Poison the grad padding.
  {
    at::Tensor flat = bank.grads.flat();
    float* d = flat.data_ptr<float>();
    const auto& layout = bank.grads.layout();
    for (size_t i = 0; i < layout.size(); ++i) {
      d[layout.offset(i) + layout.numel(i)] = std::numeric_limits<float>::infinity();
      d[layout.offset(i) + CombinedLayout::alignedNumel(layout.numel(i)) - 1] = std::nanf("");
    }
  }
  double expectedSq = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor g = makeTensor(params[i].sizes().vec(), 100 + i, 0.1f);
    params[i].grad().copy_(g);
    expectedSq += g.to(torch::kDouble).pow(2).sum().item<double>();
  }
  const double norm = l2Norm(bank.grads);
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_NEAR(norm, std::sqrt(expectedSq), 1e-9 * std::sqrt(expectedSq));
  for (double n : perTensorL2Norm(bank.grads)) EXPECT_TRUE(std::isfinite(n));

  at::Tensor foundInf = torch::zeros({1});
  checkFinite(bank.grads, foundInf);
  opt.unscaleGrads(0.5, foundInf);
  EXPECT_EQ(foundInf.item<float>(), 0.0f) << "padding raised a false overflow";

  for (int s = 0; s < 20; ++s) opt.step();
  EXPECT_TRUE(allZero(paddingOf(bank.params)));
  for (const auto& [name, slot] : bank.state) EXPECT_TRUE(allZero(paddingOf(slot))) << name;
  for (const auto& p : params) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
}

}  // namespace
}  // namespace npuscope::optim
