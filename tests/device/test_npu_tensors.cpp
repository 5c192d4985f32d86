// npu tensors through libtorch: creation, zero-copy execution, views, out= and resize, indexing,
// fp64 refusal, the capacity error, the float-status register in both modes, low-precision math.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "npuscope/device/npu.h"

namespace npu = npuscope::npu;

namespace {

c10::Device dev(int i = 0) { return npu::device(i); }

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

// Turns float-status tracking on for a test and restores mode and tracking after.
struct StatusScope {
  explicit StatusScope(npu::OverflowMode mode) {
    npu::set_overflow_mode(mode);
    npu::set_float_status_tracking(true);
    npu::clear_float_status(0);
  }
  ~StatusScope() {
    npu::set_float_status_tracking(false);
    npu::set_overflow_mode(npu::OverflowMode::kInfNan);
    npu::clear_float_status(0);
  }
};

}  // namespace

TEST(NpuTensors, CreatedOnTheRequestedDeviceAndNamedNpu) {
  at::Tensor t = at::empty({2, 3}, at::TensorOptions().device(dev(2)));
  EXPECT_EQ(t.device().type(), c10::DeviceType::PrivateUse1);
  EXPECT_EQ(t.device().index(), 2);
  EXPECT_EQ(npu::format_device(t.device()), "npu:2");
  EXPECT_EQ(npu::format_device(c10::Device(c10::kCPU)), "cpu");
  EXPECT_EQ(npu::parse_torch_device("npu:1"), dev(1));
  EXPECT_NE(errorOf([] { npu::parse_torch_device("npu:9"); }).find("npu:9 does not exist"), std::string::npos);
}

TEST(NpuTensors, RoundTripAndCrossDeviceCopies) {
  at::manual_seed(0);
  at::Tensor c = at::randn({4, 5});
  at::Tensor n0 = c.to(dev(0));
  at::Tensor n1 = n0.to(dev(1));
  EXPECT_EQ(n1.device().index(), 1);
  EXPECT_TRUE(at::equal(n1.cpu(), c));
  EXPECT_TRUE(at::equal(n0.to(at::kHalf).cpu(), c.to(at::kHalf)));
}

TEST(NpuTensors, GuardSwitchesTheCurrentDevice) {
  ASSERT_TRUE(npu::set_device(0).isOk());
  {
    c10::DeviceGuard g(dev(3));
    EXPECT_EQ(npu::current_device(), 3);
    at::Tensor t = at::ones({2}, at::TensorOptions().device(c10::DeviceType::PrivateUse1));
    EXPECT_EQ(t.device().index(), 3);
  }
  EXPECT_EQ(npu::current_device(), 0);
}

TEST(NpuTensors, OpsRunInPlaceOnDeviceMemoryWithoutCopies) {
  at::Tensor a = at::arange(16, at::kFloat).to(dev());
  at::Tensor b = at::ones({16}).to(dev());
  void* pa = a.data_ptr();
  at::Tensor& r = a.add_(b, 2);
  EXPECT_EQ(r.data_ptr(), pa);
  EXPECT_TRUE(r.is_same(a));
  EXPECT_TRUE(at::equal(a.cpu(), at::arange(16, at::kFloat) + 2));

  // A fresh result lives in the device pool: allocating it moves the device's accounting.
  npu::empty_cache(0);
  const auto before = npu::memory_stats(0).allocated;
  at::Tensor c = at::mul(a, b);
  EXPECT_EQ(c.device(), dev());
  EXPECT_GE(npu::memory_stats(0).allocated, before + 16 * sizeof(float));
  c.reset();
  EXPECT_EQ(npu::memory_stats(0).allocated, before);
}

TEST(NpuTensors, ViewsWriteThroughToTheirBase) {
  at::Tensor x = at::zeros({10}).to(dev());
  // unfold has no explicit npu kernel: the fallback must return a view of x's storage.
  at::Tensor u = x.unfold(0, 2, 2);
  u.select(1, 0).fill_(1);
  x.narrow(0, 1, 3).add_(5);
  at::Tensor expect = at::zeros({10});
  expect.unfold(0, 2, 2).select(1, 0).fill_(1);
  expect.narrow(0, 1, 3).add_(5);
  EXPECT_TRUE(at::equal(x.cpu(), expect));
  EXPECT_EQ(u.data_ptr(), x.data_ptr());
}

TEST(NpuTensors, ComparisonsOfTransposedInputsAreContiguousAsOnACard) {
  // CPU follows the transposed input's strides (so `.view(-1)` of the result fails there);
  // torch_npu's comparison kernels write contiguous results, and accuracy() helpers rely on it.
  at::Tensor pred = at::arange(10, at::kLong).view({2, 5});
  at::Tensor target = at::tensor({3, 7}, at::kLong);
  at::Tensor cpu = pred.t().eq(target.view({1, -1}).expand({5, 2}));
  ASSERT_FALSE(cpu.is_contiguous());
  at::Tensor npu = pred.to(dev()).t().eq(target.to(dev()).view({1, -1}).expand({5, 2}));
  EXPECT_TRUE(npu.is_contiguous());
  EXPECT_TRUE(at::equal(npu.cpu(), cpu));
  EXPECT_EQ(npu.view(-1).sum().item<int64_t>(), 2);
  EXPECT_TRUE(pred.to(dev()).t().lt(4).is_contiguous());
  EXPECT_TRUE(pred.to(dev()).t().ge(pred.to(dev()).t()).is_contiguous());
}

TEST(NpuTensors, OutVariantsResizeTheirOutput) {
  at::Tensor a = at::randn({3, 4}).to(dev());
  at::Tensor b = at::randn({4, 5}).to(dev());
  at::Tensor out = at::empty({0}, at::TensorOptions().device(dev()));
  at::mm_out(out, a, b);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(out.device(), dev());
  EXPECT_TRUE(at::allclose(out.cpu(), at::mm(a.cpu(), b.cpu())));
  at::Tensor big = at::empty({100}, at::TensorOptions().device(dev()));
  at::add_out(big, a, a);
  EXPECT_EQ(big.sizes(), a.sizes());
  EXPECT_TRUE(at::equal(big.cpu(), a.cpu() * 2));
  at::Tensor r = at::empty({2}, at::TensorOptions().device(dev()));
  r.resize_({4, 4});
  r.fill_(3);
  EXPECT_EQ(r.sum().item<float>(), 48.0f);
}

TEST(NpuTensors, IndexingWithNpuIndices) {
  at::Tensor x = at::arange(20, at::kFloat).reshape({4, 5});
  at::Tensor xn = x.to(dev());
  at::Tensor idx = at::tensor({3, 0, 2}, at::kLong);
  EXPECT_TRUE(at::equal(xn.index({idx.to(dev())}).cpu(), x.index({idx})));
  at::Tensor mask = x.gt(7);
  EXPECT_TRUE(at::equal(xn.index({mask.to(dev())}).cpu(), x.index({mask})));
  xn.index_put_({idx.to(dev())}, at::full({5}, -1.0f).to(dev()));
  x.index_put_({idx}, at::full({5}, -1.0f));
  EXPECT_TRUE(at::equal(xn.cpu(), x));
}

TEST(NpuTensors, Float64IsRefusedNamingTheOp) {
  const auto opts = at::TensorOptions().device(dev()).dtype(at::kDouble);
  std::string m = errorOf([&] { at::empty({2}, opts); });
  EXPECT_NE(m.find("aten::empty"), std::string::npos) << m;
  EXPECT_NE(m.find("does not support Double"), std::string::npos) << m;
  at::Tensor f = at::ones({2}).to(dev());
  m = errorOf([&] { f.to(at::kDouble); });
  EXPECT_NE(m.find("aten::_to_copy"), std::string::npos) << m;
  m = errorOf([&] { at::ones({2}, at::kDouble).to(dev()); });
  EXPECT_NE(m.find("does not support Double"), std::string::npos) << m;
  // Structured ops allocate their result before any npu kernel runs: refused at that allocation.
  m = errorOf([&] { f.sum(at::kDouble); });
  EXPECT_NE(m.find("does not support Double"), std::string::npos) << m;
  // Double scalars are fine.
  EXPECT_FLOAT_EQ((f * 2.5).sum().item<float>(), 5.0f);
}

TEST(NpuTensors, CapacityErrorIsRecoverable) {
  const int d = 4;
  npu::empty_cache(d);
  npu::set_memory_capacity(d, 64ull << 20);
  const auto opts = at::TensorOptions().device(dev(d));
  at::Tensor a = at::empty({12 << 20}, opts);  // 48 MiB
  std::string m = errorOf([&] { at::empty({12 << 20}, opts); });
  EXPECT_NE(m.find("npu:4 out of memory: tried to allocate 48.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("capacity of 64.00 MiB"), std::string::npos) << m;
  a.reset();
  at::Tensor b;
  EXPECT_NO_THROW(b = at::empty({12 << 20}, opts));
  b.reset();
  npu::empty_cache(d);
  npu::set_memory_capacity(d, 32ull << 30);
}

TEST(FloatStatusOnTensors, InfNanModeOverflowSetsTheRegister) {
  StatusScope s(npu::OverflowMode::kInfNan);
  at::Tensor h = at::full({8}, 60000.0f).to(at::kHalf).to(dev());
  at::Tensor ok = h / 2;
  EXPECT_FALSE(npu::get_float_status(0)) << "a clean op must not set the register";
  at::Tensor big = h * 2;
  EXPECT_TRUE(std::isinf(big.cpu().to(at::kFloat)[0].item<float>()));
  EXPECT_TRUE(npu::get_float_status(0));
  npu::clear_float_status(0);
  EXPECT_FALSE(npu::get_float_status(0));
  // A cast that overflows counts too.
  at::Tensor f = at::full({2}, 1e6f).to(dev());
  f.to(at::kHalf);
  EXPECT_TRUE(npu::get_float_status(0));
}

TEST(FloatStatusOnTensors, SaturationModeClampsAndOnlyTheRegisterKnows) {
  StatusScope s(npu::OverflowMode::kSaturation);
  at::Tensor h = at::full({8}, 60000.0f).to(at::kHalf).to(dev());
  at::Tensor big = h * 2;
  at::Tensor v = big.cpu().to(at::kFloat);
  EXPECT_EQ(v[0].item<float>(), 65504.0f);
  EXPECT_TRUE(at::isfinite(v).all().item<bool>());
  EXPECT_TRUE(npu::get_float_status(0));
  npu::clear_float_status(0);
  at::Tensor n = at::full({2}, -1e6f).to(dev()).to(at::kHalf);
  EXPECT_EQ(n.cpu().to(at::kFloat)[0].item<float>(), -65504.0f);
  EXPECT_TRUE(npu::get_float_status(0));
}

TEST(FloatStatusOnTensors, DoubleScalarsAreFineWithTrackingOn) {
  for (npu::OverflowMode mode : {npu::OverflowMode::kInfNan, npu::OverflowMode::kSaturation}) {
    StatusScope s(mode);
    at::Tensor f = at::full({4}, 3.0f).to(dev());
    at::Tensor h = f.to(at::kHalf);
    std::string err = errorOf([&] {
      EXPECT_EQ((f * 2.5).scalar_type(), at::kFloat);
      EXPECT_EQ((f * 2.5).cpu()[0].item<float>(), 7.5f);
      EXPECT_EQ((h * 2.5).scalar_type(), at::kHalf);
      f.mul_(0.5);
      EXPECT_EQ(f.cpu()[0].item<float>(), 1.5f);
      EXPECT_EQ((f + 1.25).cpu()[0].item<float>(), 2.75f);
      // A 0-dim CPU double tensor (at::scalar_tensor's default dtype) takes part as a scalar.
      EXPECT_EQ((f * at::scalar_tensor(2.0)).scalar_type(), at::kFloat);
    });
    EXPECT_EQ(err, "") << "a Python-style double scalar is not an fp64 tensor";
    EXPECT_FALSE(npu::get_float_status(0));
  }
}

// libtorch's C++ autograd turns a Scalar into a 0-dim CPU double tensor (MulBackward1 of
// `loss * 1e9`); beside a 0-dim npu tensor it is a scalar, not a reason to compute in fp64.
TEST(NpuTensors, ZeroDimCpuDoubleBesideZeroDimNpuIsAScalar) {
  StatusScope tracking(npu::OverflowMode::kInfNan);  // every op through the checked path
  at::Tensor l = at::full({}, 2.0f).to(dev()).requires_grad_();
  EXPECT_EQ(errorOf([&] {
              at::Tensor r = l * at::scalar_tensor(1e9);  // not a wrapped number
              EXPECT_EQ(r.scalar_type(), at::kFloat);
              EXPECT_EQ(r.cpu().item<float>(), 2e9f);
              (l * 1e9).backward();
            }),
            "");
  ASSERT_TRUE(l.grad().defined());
  EXPECT_EQ(l.grad().scalar_type(), at::kFloat);
  EXPECT_EQ(l.grad().cpu().item<float>(), 1e9f);
}

TEST(FloatStatusOnTensors, TrackingOffLeavesTheRegisterAlone) {
  npu::set_float_status_tracking(false);
  npu::clear_float_status(0);
  at::Tensor h = at::full({8}, 60000.0f).to(at::kHalf).to(dev());
  at::Tensor big = h * 2;
  EXPECT_FALSE(npu::get_float_status(0));
}

TEST(LowPrecision, Fp16MatmulIsFp32AccumulateRoundedOnce) {
  at::manual_seed(1);
  at::Tensor a = at::randn({64, 256}).to(at::kHalf), b = at::randn({256, 32}).to(at::kHalf);
  at::Tensor r = at::mm(a.to(dev()), b.to(dev()));
  EXPECT_EQ(r.scalar_type(), at::kHalf);
  // Cube semantics: fp16 inputs, fp32 accumulation, one rounding of the result.
  at::Tensor expect = at::mm(a.to(at::kFloat), b.to(at::kFloat)).to(at::kHalf);
  EXPECT_TRUE(at::equal(r.cpu(), expect));
}

TEST(LowPrecision, DtypesOfResultsFollowTorchRules) {
  at::Tensor h = at::randn({4, 4}).to(at::kHalf).to(dev());
  at::Tensor f = at::randn({4, 4}).to(dev());
  at::Tensor bf = at::randn({4, 4}).to(at::kBFloat16).to(dev());
  EXPECT_EQ((h + f).scalar_type(), at::kFloat);
  EXPECT_EQ((h + at::scalar_tensor(2.0f).to(dev())).scalar_type(), at::kHalf);
  EXPECT_EQ((h + bf).scalar_type(), at::kFloat);
  EXPECT_EQ(at::relu(bf).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::_softmax(h, 1, /*half_to_float=*/true).scalar_type(), at::kFloat);
  EXPECT_EQ(at::softmax(h, 1).scalar_type(), at::kHalf);
  EXPECT_EQ(h.sum(at::kFloat).scalar_type(), at::kFloat);
  EXPECT_EQ(h.argmax().scalar_type(), at::kLong);
  EXPECT_EQ(h.gt(0).scalar_type(), at::kBool);
  // BatchNorm with fp32 parameters (apex O2) keeps the input's dtype.
  at::Tensor x = at::randn({2, 3, 4, 4}).to(at::kHalf).to(dev());
  at::Tensor w = at::ones({3}).to(dev()), bb = at::zeros({3}).to(dev());
  at::Tensor y = at::batch_norm(x, w, bb, {}, {}, true, 0.1, 1e-5, false);
  EXPECT_EQ(y.scalar_type(), at::kHalf);
}

TEST(LowPrecision, InPlaceOnHalfRoundsIntoTheTensor) {
  at::Tensor h = at::full({4}, 1.0f).to(at::kHalf).to(dev());
  void* p = h.data_ptr();
  h.mul_(1.0009765625);  // 1 + 2^-10: representable in fp16
  EXPECT_EQ(h.data_ptr(), p);
  EXPECT_EQ(h.cpu().to(at::kFloat)[0].item<float>(), 1.0009765625f);
  h.add_(1e-4);  // below half an ulp: rounds away
  EXPECT_EQ(h.cpu().to(at::kFloat)[0].item<float>(), 1.0009765625f);
}

TEST(Modules, ToNpuMovesParametersAndTrains) {
  torch::manual_seed(0);
  torch::nn::Linear lin(4, 3);
  lin->to(dev());
  for (const auto& p : lin->parameters()) EXPECT_EQ(p.device(), dev());
  at::Tensor x = at::randn({5, 4}).to(dev());
  auto loss = lin->forward(x).pow(2).mean();
  loss.backward();
  for (const auto& p : lin->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().device(), dev());
  }
}

TEST(CostEstimate, MatmulFlopsFromShapes) {
  at::Tensor a = at::ones({64, 128}).to(dev()), b = at::ones({128, 32}).to(dev());
  at::Tensor c = at::mm(a, b);
  auto w = npu::estimate_op_work("aten::mm", {a, b}, {c});
  EXPECT_EQ(w.unit, npu::ComputeUnit::kCube);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 64 * 128 * 32);
  EXPECT_DOUBLE_EQ(w.bytes, 4.0 * (64 * 128 + 128 * 32 + 64 * 32));
  EXPECT_FALSE(w.low_precision);
}

namespace {
std::vector<npu::OverflowSite>& sites() {
  static std::vector<npu::OverflowSite> s;
  return s;
}
void keepSite(const npu::OverflowSite& s) { sites().push_back(s); }
struct SiteObserverScope {
  SiteObserverScope() {
    sites().clear();
    npu::set_overflow_site_observer(&keepSite);
  }
  ~SiteObserverScope() { npu::set_overflow_site_observer(nullptr); }
};
}  // namespace

// The first result that overflows after a window opens is described once, with numbers taken
// from the tensors themselves: 300 * 300 = 90000 rounds past fp16's 65504; later overflows of
// the same window are not reported; an input already holding inf is named as such.
TEST(FloatStatusOnTensors, TheFirstOverflowOfAWindowIsDescribedOnce) {
  StatusScope s(npu::OverflowMode::kInfNan);
  SiteObserverScope observe;
  at::Tensor h = at::full({4}, 300.0f).to(at::kHalf).to(dev());
  h.index_put_({0}, 2.0f);  // one element stays small: 3 of 4 overflow
  npu::open_overflow_window();
  at::Tensor fine = h + 1;  // no overflow: nothing reported, the window stays open
  EXPECT_TRUE(sites().empty());
  at::Tensor big = h * h;
  ASSERT_EQ(sites().size(), 1u);
  const npu::OverflowSite& a = sites()[0];
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.dtype, "float16");
  EXPECT_TRUE(a.rounding);
  EXPECT_EQ(a.numel, 4);
  EXPECT_EQ(a.out_inf, 3);
  EXPECT_EQ(a.out_nan, 0);
  EXPECT_DOUBLE_EQ(a.out_max_abs, 90000.0);  // before rounding; the 4.0 is smaller
  EXPECT_DOUBLE_EQ(a.in_max_abs, 300.0);
  EXPECT_EQ(a.in_inf + a.in_nan, 0);
  at::Tensor worse = big + 1;  // inf again, same window: not reported
  EXPECT_EQ(sites().size(), 1u);
  npu::open_overflow_window();
  at::Tensor again = big * 0.5;  // inf in, inf out
  ASSERT_EQ(sites().size(), 2u);
  EXPECT_EQ(sites()[1].in_inf, 3);
  EXPECT_DOUBLE_EQ(sites()[1].in_max_abs, 4.0);
  EXPECT_EQ(sites()[1].out_inf, 3);
  // fp32 math overflowing in fp32: no rounding, the result's own infinities.
  npu::open_overflow_window();
  at::Tensor f = at::full({2}, 3e38f).to(dev());
  at::Tensor g = f * 10;
  ASSERT_EQ(sites().size(), 3u);
  EXPECT_EQ(sites()[2].dtype, "float32");
  EXPECT_FALSE(sites()[2].rounding);
  EXPECT_EQ(sites()[2].out_inf, 2);
  EXPECT_NEAR(sites()[2].in_max_abs, 3e38, 1e32);
}

// Saturation mode keeps results finite; the site still counts what overflowed.
TEST(FloatStatusOnTensors, SaturationModeOverflowIsStillCounted) {
  StatusScope s(npu::OverflowMode::kSaturation);
  SiteObserverScope observe;
  at::Tensor h = at::full({8}, 60000.0f).to(at::kHalf).to(dev());
  npu::open_overflow_window();
  at::Tensor big = h * 2;
  ASSERT_EQ(sites().size(), 1u);
  EXPECT_EQ(sites()[0].out_inf, 8);
  EXPECT_DOUBLE_EQ(sites()[0].out_max_abs, 120000.0);
  // No window open, no observer call (the register is still raised).
  npu::clear_float_status(0);
  at::Tensor more = h * 2;
  EXPECT_EQ(sites().size(), 1u);
  EXPECT_TRUE(npu::get_float_status(0));
}
