// A small CNN trained on npu and on the CPU from identical weights and identical data: the npu
// runs libtorch's CPU kernels over the same bytes, so every step's loss, and the weights, running
// statistics and momentum buffers after training, must be bit-identical. Also: Module::to(npu)
// moves every parameter and buffer.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <string>
#include <vector>

#include "npuscope/device/npu.h"

namespace npu = npuscope::npu;

namespace {

c10::Device dev(int i = 0) { return npu::device(i); }

constexpr int kSteps = 50;
constexpr int kBatch = 16;
constexpr int kClasses = 10;

// conv -> batchnorm -> relu -> maxpool -> conv -> relu -> avgpool -> linear.
// BatchNorm adds buffers (running stats and the int64 step counter) for the move test and
// running-statistics updates to the training comparison.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(8))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)))),
        fc(register_module("fc", torch::nn::Linear(16 * 7 * 7, kClasses))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 2);  // 8 x 14 x 14
    x = torch::avg_pool2d(torch::relu(conv2(x)), 2);       // 16 x 7 x 7
    return fc(x.flatten(1));
  }

  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

bool bitEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (!at::isFloatingType(a.scalar_type())) return at::equal(a, b);
  const auto raw = a.element_size() == 4 ? at::kInt : at::kShort;  // compare raw bits
  return at::equal(a.contiguous().view(raw), b.contiguous().view(raw));
}

bool bitEqual(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Copies parameters and buffers of `src` into `dst` (any devices).
void copyState(Net& dst, const Net& src) {
  torch::NoGradGuard no_grad;
  auto dp = dst->named_parameters();
  for (const auto& kv : src->named_parameters()) dp[kv.key()].copy_(kv.value());
  auto db = dst->named_buffers();
  for (const auto& kv : src->named_buffers()) db[kv.key()].copy_(kv.value());
}

// Synthetic MNIST-shaped data from a fixed seed: one random prototype per class plus noise, so
// the net has something to learn and the loss falls.
struct Data {
  at::Tensor x;  // [steps, batch, 1, 28, 28]
  at::Tensor y;  // [steps, batch]
};
Data makeData() {
  torch::manual_seed(2024);
  at::Tensor protos = torch::randn({kClasses, 1, 28, 28});
  Data d;
  d.y = torch::randint(0, kClasses, {kSteps, kBatch}, torch::kLong);
  d.x = protos.index_select(0, d.y.flatten()).view({kSteps, kBatch, 1, 28, 28}) +
        1.5 * torch::randn({kSteps, kBatch, 1, 28, 28});
  return d;
}

struct TrainRun {
  std::vector<float> losses;
  std::vector<at::Tensor> momentum;  // SGD momentum buffers after the last step
};

TrainRun train(Net& net, c10::Device device, const Data& data) {
  net->train();
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  TrainRun run;
  for (int s = 0; s < kSteps; ++s) {
    at::Tensor x = data.x[s].to(device);
    at::Tensor y = data.y[s].to(device);
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    EXPECT_EQ(loss.device(), device);
    loss.backward();
    opt.step();
    run.losses.push_back(loss.item<float>());
  }
  for (const auto& p : net->parameters()) {
    auto& state = static_cast<torch::optim::SGDParamState&>(
        *opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
    run.momentum.push_back(state.momentum_buffer());
  }
  return run;
}

}  // namespace

TEST(CnnModule, ToNpuMovesEveryParameterAndBuffer) {
  torch::manual_seed(0);
  Net net;
  Net reference;
  copyState(reference, net);
  const auto params = net->named_parameters();
  const auto buffers = net->named_buffers();
  ASSERT_EQ(params.size(), 8u);   // conv1 w/b, bn1 w/b, conv2 w/b, fc w/b
  ASSERT_EQ(buffers.size(), 3u);  // running_mean, running_var, num_batches_tracked

  net->to(dev());
  for (const auto& kv : net->named_parameters()) {
    EXPECT_EQ(kv.value().device(), dev()) << kv.key();
    EXPECT_TRUE(kv.value().requires_grad()) << kv.key();
    EXPECT_TRUE(kv.value().is_leaf()) << kv.key();
    EXPECT_TRUE(bitEqual(kv.value().cpu(), reference->named_parameters()[kv.key()])) << kv.key();
  }
  for (const auto& kv : net->named_buffers()) {
    EXPECT_EQ(kv.value().device(), dev()) << kv.key();
    EXPECT_TRUE(bitEqual(kv.value().cpu(), reference->named_buffers()[kv.key()])) << kv.key();
  }
  EXPECT_EQ(net->bn1->num_batches_tracked.scalar_type(), at::kLong);
  // The submodules' handles see the moved tensors too.
  EXPECT_EQ(net->conv1->weight.device(), dev());
  EXPECT_EQ(net->bn1->running_var.device(), dev());

  // A forward/backward on npu leaves gradients on npu and updates the buffers there.
  torch::manual_seed(1);
  at::Tensor x = torch::randn({4, 1, 28, 28}).to(dev());
  net->forward(x).sum().backward();
  for (const auto& kv : net->named_parameters()) {
    ASSERT_TRUE(kv.value().grad().defined()) << kv.key();
    EXPECT_EQ(kv.value().grad().device(), dev()) << kv.key();
  }
  EXPECT_EQ(net->bn1->num_batches_tracked.cpu().item<int64_t>(), 1);

  // To another npu, and back to the CPU.
  net->to(dev(1));
  for (const auto& p : net->parameters()) EXPECT_EQ(p.device(), dev(1));
  for (const auto& b : net->buffers()) EXPECT_EQ(b.device(), dev(1));
  net->to(torch::kCPU);
  for (const auto& p : net->parameters()) EXPECT_TRUE(p.device().is_cpu());
  for (const auto& b : net->buffers()) EXPECT_TRUE(b.device().is_cpu());
}

TEST(CnnModule, ToNpuWithDtypeConvertsLikeOnTheCpu) {
  // libtorch's C++ Module::to(device, dtype) converts every parameter and buffer, the int64
  // num_batches_tracked included (Python's converts floating tensors only): the npu must do what
  // the same call does on the CPU, on the npu.
  torch::manual_seed(0);
  Net net;
  Net cpu_net;
  copyState(cpu_net, net);
  net->to(dev(), at::kHalf);
  cpu_net->to(at::kHalf);
  auto cpu_params = cpu_net->named_parameters();
  for (const auto& kv : net->named_parameters()) {
    EXPECT_EQ(kv.value().device(), dev()) << kv.key();
    EXPECT_EQ(kv.value().scalar_type(), at::kHalf) << kv.key();
    EXPECT_TRUE(bitEqual(kv.value().cpu(), cpu_params[kv.key()])) << kv.key();
  }
  auto cpu_buffers = cpu_net->named_buffers();
  for (const auto& kv : net->named_buffers()) {
    EXPECT_EQ(kv.value().device(), dev()) << kv.key();
    EXPECT_EQ(kv.value().scalar_type(), cpu_buffers[kv.key()].scalar_type()) << kv.key();
    EXPECT_TRUE(bitEqual(kv.value().cpu(), cpu_buffers[kv.key()])) << kv.key();
  }
  EXPECT_EQ(net->bn1->running_mean.scalar_type(), at::kHalf);
  // The fp16 net runs on npu (libtorch 1.13's CPU kernels have no Half conv: the npu computes in
  // fp32 and rounds).
  at::Tensor out = net->forward(torch::randn({2, 1, 28, 28}).to(at::kHalf).to(dev()));
  EXPECT_EQ(out.scalar_type(), at::kHalf);
  EXPECT_EQ(out.device(), dev());
  EXPECT_TRUE(at::isfinite(out.cpu().to(at::kFloat)).all().item<bool>());
}

TEST(CnnModule, HalfNetOnNpuUpdatesBatchNormRunningStats) {
  torch::manual_seed(0);
  Net net;
  net->to(dev(), at::kHalf);
  net->train();
  at::Tensor x = torch::randn({8, 1, 28, 28}).to(at::kHalf).to(dev());
  at::Tensor h = net->conv1->forward(x);  // what bn1 sees
  // Expected after one training step from running_mean = 0, running_var = 1, momentum 0.1:
  // 0.1 * batch mean and 0.9 + 0.1 * unbiased batch variance, per channel.
  const at::Tensor hf = h.cpu().to(at::kFloat);
  const at::Tensor mean = hf.mean({0, 2, 3});
  const at::Tensor var = hf.var(at::IntArrayRef({0, 2, 3}), /*unbiased=*/true);
  net->forward(x);
  const at::Tensor rm = net->bn1->running_mean.cpu().to(at::kFloat);
  const at::Tensor rv = net->bn1->running_var.cpu().to(at::kFloat);
  EXPECT_EQ(net->bn1->num_batches_tracked.cpu().to(at::kLong).item<int64_t>(), 1);
  // fp16: a few roundings (conv output, batch statistics, the update), rtol 1e-2.
  EXPECT_TRUE(at::allclose(rm, 0.1 * mean, 1e-2, 1e-3)) << rm << 0.1 * mean;
  EXPECT_TRUE(at::allclose(rv, 0.9 + 0.1 * var, 1e-2, 1e-3)) << rv << 0.9 + 0.1 * var;
}

TEST(CnnTraining, FiftySgdStepsGiveBitIdenticalLossesOnNpuAndCpu) {
  const Data data = makeData();
  torch::manual_seed(0);
  Net cpu_net;
  Net npu_net;
  npu_net->to(dev());
  copyState(npu_net, cpu_net);
  for (const auto& kv : cpu_net->named_parameters()) {
    ASSERT_TRUE(bitEqual(npu_net->named_parameters()[kv.key()].cpu(), kv.value())) << kv.key();
  }

  const TrainRun cpu = train(cpu_net, torch::kCPU, data);
  const TrainRun npu_run = train(npu_net, dev(), data);

  ASSERT_EQ(cpu.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(npu_run.losses.size(), static_cast<size_t>(kSteps));
  int first_diff = -1;
  for (int s = 0; s < kSteps; ++s) {
    if (!bitEqual(cpu.losses[s], npu_run.losses[s]) && first_diff < 0) first_diff = s;
    EXPECT_TRUE(bitEqual(cpu.losses[s], npu_run.losses[s]))
        << "step " << s << ": cpu loss " << cpu.losses[s] << " npu loss " << npu_run.losses[s];
  }
  EXPECT_EQ(first_diff, -1) << "losses diverge from step " << first_diff;

  // The net learned something (prototype classes): the last steps' loss is well below the first.
  float first = 0, last = 0;
  for (int s = 0; s < 5; ++s) first += cpu.losses[s] / 5;
  for (int s = kSteps - 5; s < kSteps; ++s) last += cpu.losses[s] / 5;
  EXPECT_LT(last, 0.7f * first) << "first " << first << " last " << last;

  // Weights, BatchNorm statistics and momentum buffers end bit-identical, still on npu.
  for (const auto& kv : cpu_net->named_parameters()) {
    const at::Tensor n = npu_net->named_parameters()[kv.key()];
    EXPECT_EQ(n.device(), dev()) << kv.key();
    EXPECT_TRUE(bitEqual(n.cpu(), kv.value())) << kv.key();
    ASSERT_TRUE(n.grad().defined()) << kv.key();
    EXPECT_EQ(n.grad().device(), dev()) << kv.key();
    EXPECT_TRUE(bitEqual(n.grad().cpu(), kv.value().grad())) << kv.key() << ".grad";
  }
  for (const auto& kv : cpu_net->named_buffers()) {
    const at::Tensor n = npu_net->named_buffers()[kv.key()];
    EXPECT_EQ(n.device(), dev()) << kv.key();
    EXPECT_TRUE(bitEqual(n.cpu(), kv.value())) << kv.key();
  }
  ASSERT_EQ(cpu.momentum.size(), npu_run.momentum.size());
  for (size_t i = 0; i < cpu.momentum.size(); ++i) {
    EXPECT_EQ(npu_run.momentum[i].device(), dev());
    EXPECT_TRUE(bitEqual(npu_run.momentum[i].cpu(), cpu.momentum[i])) << "momentum buffer " << i;
  }

  // Inference (eval mode: running statistics) agrees too.
  cpu_net->eval();
  npu_net->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor xs = data.x[0];
  const at::Tensor out_cpu = cpu_net->forward(xs);
  const at::Tensor out_npu = npu_net->forward(xs.to(dev()));
  EXPECT_EQ(out_npu.device(), dev());
  EXPECT_TRUE(bitEqual(out_npu.cpu(), out_cpu));
}
