// Helpers shared by the amp tests: small models, deterministic data, bitwise comparisons.
#pragma once

#include <torch/torch.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "npuscope/amp/amp.h"
#include "npuscope/device/npu.h"
#include "npuscope/optim/fused_optimizers.h"

namespace npuscope::amp::test {

inline c10::Device npu0() { return npuscope::npu::device(0); }

// linear(16 -> 32) -> relu -> linear(32 -> 10)
struct MlpImpl : torch::nn::Module {
  MlpImpl() : fc1(register_module("fc1", torch::nn::Linear(16, 32))), fc2(register_module("fc2", torch::nn::Linear(32, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

// conv(1 -> 4, 3x3) -> batchnorm -> relu -> avgpool 2 -> linear(64 -> 10), on 8x8 inputs.
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(4))),
        fc(register_module("fc", torch::nn::Linear(64, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc(torch::avg_pool2d(torch::relu(bn(conv(x))), 2).flatten(1));
  }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
  torch::nn::Linear fc;
};
TORCH_MODULE(Cnn);

// A learnable classification set: labels from a fixed random linear teacher.
struct Batch {
  at::Tensor x, y;
};
inline std::vector<Batch> makeData(int batches, int64_t batch, std::vector<int64_t> featureShape, uint64_t seed) {
  torch::manual_seed(seed);
  int64_t features = 1;
  for (int64_t d : featureShape) features *= d;
  at::Tensor teacher = torch::randn({features, 10});
  std::vector<Batch> out;
  for (int b = 0; b < batches; ++b) {
    at::Tensor flat = torch::randn({batch, features});
    at::Tensor y = flat.matmul(teacher).argmax(1);
    std::vector<int64_t> shape{batch};
    shape.insert(shape.end(), featureShape.begin(), featureShape.end());
    out.push_back({flat.reshape(shape).to(npu0()), y.to(npu0())});
  }
  return out;
}

inline bool bitEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  at::Tensor ca = a.detach().cpu().contiguous(), cb = b.detach().cpu().contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

inline std::map<std::string, at::Tensor> snapshot(torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : m.named_parameters()) out[kv.key()] = kv.value().detach().cpu().clone();
  for (const auto& kv : m.named_buffers()) out["buffer." + kv.key()] = kv.value().detach().cpu().clone();
  return out;
}

inline std::shared_ptr<optim::NpuFusedOptimizer> makeSgd(const std::vector<at::Tensor>& params,
                                                         const optim::FusedOptimizerConfig& config, double lr = 0.05) {
  optim::NpuFusedSGDOptions o(lr);
  o.momentum = 0.9;
  return std::make_shared<optim::NpuFusedSGD>(params, o, config);
}

inline std::shared_ptr<optim::NpuFusedOptimizer> makeAdam(const std::vector<at::Tensor>& params,
                                                          const optim::FusedOptimizerConfig& config) {
  optim::NpuFusedAdamOptions o;
  o.lr = 1e-2;
  return std::make_shared<optim::NpuFusedAdam>(params, o, config);
}

// Captures amp's log lines for a test's lifetime.
struct LogCapture {
  std::vector<std::string> lines;
  LogCapture() {
    setLogSink([this](const std::string& l) { lines.push_back(l); });
  }
  ~LogCapture() { setLogSink(nullptr); }
  int count(const std::string& needle) const {
    int n = 0;
    for (const auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
};

// Expects `fn` to throw a c10::Error whose message contains every needle.
template <class F>
void expectError(F&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning " << needles.at(0);
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nmissing: " << n;
  }
}

}  // namespace npuscope::amp::test
