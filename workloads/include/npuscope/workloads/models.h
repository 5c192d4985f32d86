// The built-in models that `npuscope train` knows by name.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include <memory>
#include <string>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope::workloads {

// A classifier: forward(x) -> logits.
class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(at::Tensor x) = 0;
};

// "mlp": 784-256-128-100-10 with ReLU (the hidden sizes of the Fashion-MNIST benchmark table).
// "cnn": two 3x3 conv (16, 32 channels) + ReLU + 2x2 max-pool blocks, then a linear classifier.
// "resnet": a 3x3 stem and three residual blocks (16, 32, 64 channels) with BatchNorm, global
//   average pooling, a linear classifier (exercises O2's BatchNorm rule).
// "transformer": image rows as 28 tokens, a 2-layer encoder (d 64, 4 heads), mean pooling.
// A path ending in .pt / .pth (or holding a '/'): a TorchScript module saved from Python whose
// forward(x) takes [N, 1, 28, 28] images and returns logits.
StatusOr<std::shared_ptr<Model>> makeModel(const std::string& name);
const std::vector<std::string>& modelNames();

}  // namespace npuscope::workloads
