#include "npuscope/workloads/models.h"

#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformer.h>
#include <torch/nn/modules/transformercoder.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

namespace npuscope::workloads {
namespace {

class Mlp : public Model {
 public:
  Mlp() {
    l1_ = register_module("l1", torch::nn::Linear(784, 256));
    l2_ = register_module("l2", torch::nn::Linear(256, 128));
    l3_ = register_module("l3", torch::nn::Linear(128, 100));
    out_ = register_module("out", torch::nn::Linear(100, 10));
  }
  at::Tensor forward(at::Tensor x) override {
    x = x.flatten(1);
    x = l1_(x).relu();
    x = l2_(x).relu();
    x = l3_(x).relu();
    return out_(x);
  }

 private:
  torch::nn::Linear l1_{nullptr}, l2_{nullptr}, l3_{nullptr}, out_{nullptr};
};

class Cnn : public Model {
 public:
  Cnn() {
    c1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    c2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    fc_ = register_module("fc", torch::nn::Linear(32 * 7 * 7, 10));
  }
  at::Tensor forward(at::Tensor x) override {
    x = at::max_pool2d(c1_(x).relu(), {2, 2});
    x = at::max_pool2d(c2_(x).relu(), {2, 2});
    return fc_(x.flatten(1));
  }

 private:
  torch::nn::Conv2d c1_{nullptr}, c2_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

// A basic residual block: two 3x3 conv + BatchNorm, a 1x1 conv + BatchNorm shortcut when the
// shape changes.
class BasicBlock : public torch::nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride) {
    c1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    b1_ = register_module("bn1", torch::nn::BatchNorm2d(out));
    c2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    b2_ = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      down_ = register_module("downsample",
                              torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                                    torch::nn::BatchNorm2d(out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = b1_(c1_(x)).relu();
    y = b2_(c2_(y));
    return (y + (down_ ? down_->forward(x) : x)).relu();
  }

 private:
  torch::nn::Conv2d c1_{nullptr}, c2_{nullptr};
  torch::nn::BatchNorm2d b1_{nullptr}, b2_{nullptr};
  torch::nn::Sequential down_{nullptr};
};

class ResNet : public Model {
 public:
  ResNet() {
    stem_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)));
    bn_ = register_module("bn1", torch::nn::BatchNorm2d(16));
    l1_ = register_module("layer1", std::make_shared<BasicBlock>(16, 16, 1));
    l2_ = register_module("layer2", std::make_shared<BasicBlock>(16, 32, 2));
    l3_ = register_module("layer3", std::make_shared<BasicBlock>(32, 64, 2));
    fc_ = register_module("fc", torch::nn::Linear(64, 10));
  }
  at::Tensor forward(at::Tensor x) override {
    x = bn_(stem_(x)).relu();
    x = l3_->forward(l2_->forward(l1_->forward(x)));
    return fc_(x.mean({2, 3}));
  }

 private:
  torch::nn::Conv2d stem_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
  std::shared_ptr<BasicBlock> l1_, l2_, l3_;
  torch::nn::Linear fc_{nullptr};
};

// A small encoder classifier: each image row is a token (28 tokens of 28 values), embedded to
// 64, plus a learned position embedding, two post-norm encoder layers (4 heads, FFN 128, no
// dropout), mean-pooled into a linear classifier.
class Transformer : public Model {
 public:
  Transformer() {
    embed_ = register_module("embed", torch::nn::Linear(28, 64));
    pos_ = register_parameter("pos", at::randn({28, 1, 64}) * 0.02);
    auto layer = torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).dropout(0.0);
    encoder_ = register_module("encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(layer, 2)));
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({64})));
    fc_ = register_module("fc", torch::nn::Linear(64, 10));
  }
  at::Tensor forward(at::Tensor x) override {
    x = x.reshape({x.size(0), 28, 28}).transpose(0, 1);  // (tokens, batch, features)
    x = embed_(x) + pos_;
    x = encoder_(x);
    return fc_(norm_(x.mean(0)));
  }

 private:
  torch::nn::Linear embed_{nullptr}, fc_{nullptr};
  at::Tensor pos_;
  torch::nn::TransformerEncoder encoder_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
};

// A TorchScript module saved from Python (forward(x) -> logits). Its parameters and buffers are
// registered here too (the same tensors), so optimizers, AMP's casts and Module::to see them.
class Scripted : public Model {
 public:
  explicit Scripted(torch::jit::Module m) : m_(std::move(m)) {
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) register_parameter(flat(p.name), p.value);
    for (const auto& b : m_.named_buffers(/*recurse=*/true)) register_buffer(flat(b.name), b.value);
  }
  at::Tensor forward(at::Tensor x) override {
    c10::IValue out = m_.forward({x});
    if (!out.isTensor()) throw std::runtime_error("the TorchScript model's forward must return one tensor");
    return out.toTensor();
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    m_.train(on);
  }

 private:
  static std::string flat(std::string name) {
    for (char& c : name) c = c == '.' ? '_' : c;
    return name;
  }
  torch::jit::Module m_;
};

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const std::vector<std::string>& modelNames() {
  static const std::vector<std::string> names = {"mlp", "cnn", "resnet", "transformer"};
  return names;
}

StatusOr<std::shared_ptr<Model>> makeModel(const std::string& name) {
  if (name == "mlp") return std::shared_ptr<Model>(std::make_shared<Mlp>());
  if (name == "cnn") return std::shared_ptr<Model>(std::make_shared<Cnn>());
  if (name == "resnet") return std::shared_ptr<Model>(std::make_shared<ResNet>());
  if (endsWith(name, ".pt") || endsWith(name, ".pth") || name.find('/') != std::string::npos) {
    try {
      return std::shared_ptr<Model>(std::make_shared<Scripted>(torch::jit::load(name)));
    } catch (const c10::Error& e) {
      std::string what = e.what_without_backtrace();
      return invalidArgument(name + ": cannot load a TorchScript model (" + what.substr(0, what.find('\n')) + ")");
    }
  }
  if (name == "transformer") return std::shared_ptr<Model>(std::make_shared<Transformer>());
  std::string known;
  for (const auto& n : modelNames()) known += (known.empty() ? "" : ", ") + n;
  return invalidArgument("unknown model '" + name + "': expected one of " + known + " or a TorchScript file (.pt)");
}

}  // namespace npuscope::workloads
