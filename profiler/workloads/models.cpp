#include "workloads/models.h"

#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

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

}  // namespace

const std::vector<std::string>& modelNames() {
  static const std::vector<std::string> names = {"mlp", "cnn"};
  return names;
}

StatusOr<std::shared_ptr<Model>> makeModel(const std::string& name) {
  if (name == "mlp") return std::shared_ptr<Model>(std::make_shared<Mlp>());
  if (name == "cnn") return std::shared_ptr<Model>(std::make_shared<Cnn>());
  std::string known;
  for (const auto& n : modelNames()) known += (known.empty() ? "" : ", ") + n;
  return invalidArgument("unknown model '" + name + "': expected one of " + known);
}

}  // namespace npuscope::workloads
