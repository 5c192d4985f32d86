// Fashion-MNIST as Debian's dataset-fashion-mnist package ships it: gzip-compressed IDX files,
// read in place. Images become float [N, 1, 28, 28] normalised with the training set's mean and
// standard deviation; labels int64 [N].
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "npuscope/store/status.h"

namespace npuscope::workloads {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

struct Dataset {
  at::Tensor images;  // float32 [N, 1, 28, 28], normalised
  at::Tensor labels;  // int64 [N]
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Reads `{dir}/{train|t10k}-{images-idx3|labels-idx1}-ubyte.gz`. A missing or malformed file is
// an error naming the file and what was expected.
StatusOr<Dataset> loadFashionMnist(const std::string& dir, bool train);

// Reads one gzip IDX file into a uint8 tensor with the file's dimensions.
StatusOr<at::Tensor> readIdxGz(const std::string& path);

// Class-dependent synthetic images (a bright square whose position encodes the class, plus
// noise): learnable, deterministic for a seed, for tests and machines without the dataset.
Dataset syntheticDataset(int64_t n, uint64_t seed);

}  // namespace npuscope::workloads
