#include "npuscope/workloads/fashion_mnist.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <cstring>
#include <memory>
#include <vector>

namespace npuscope::workloads {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const {
    if (f) gzclose(f);
  }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

bool readExact(gzFile f, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const int chunk = static_cast<int>(std::min<size_t>(n, 1 << 30));
    const int got = gzread(f, p, static_cast<unsigned>(chunk));
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

uint32_t bigEndian(const unsigned char* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

}  // namespace

StatusOr<at::Tensor> readIdxGz(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) return notFound(path + ": cannot open (expected a gzip IDX file; install dataset-fashion-mnist or pass --data DIR)");
  unsigned char magic[4];
  if (!readExact(f.get(), magic, 4) || magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) {
    return invalidArgument(path + ": not an IDX file of unsigned bytes (bad magic number)");
  }
  const int ndim = magic[3];
  if (ndim < 1 || ndim > 4) return invalidArgument(path + ": IDX file with " + std::to_string(ndim) + " dimensions");
  std::vector<int64_t> dims(static_cast<size_t>(ndim));
  int64_t total = 1;
  for (int i = 0; i < ndim; ++i) {
    unsigned char b[4];
    if (!readExact(f.get(), b, 4)) return invalidArgument(path + ": truncated IDX header");
    dims[static_cast<size_t>(i)] = bigEndian(b);
    total *= dims[static_cast<size_t>(i)];
  }
  at::Tensor t = at::empty(dims, at::kByte);
  if (!readExact(f.get(), t.data_ptr<uint8_t>(), static_cast<size_t>(total))) {
    return invalidArgument(path + ": truncated: expected " + std::to_string(total) + " bytes of data");
  }
  return t;
}

StatusOr<Dataset> loadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  ASSIGN_OR_RETURN(at::Tensor images, readIdxGz(prefix + "-images-idx3-ubyte.gz"));
  ASSIGN_OR_RETURN(at::Tensor labels, readIdxGz(prefix + "-labels-idx1-ubyte.gz"));
  if (images.dim() != 3 || images.size(1) != 28 || images.size(2) != 28) {
    return invalidArgument(prefix + "-images-idx3-ubyte.gz: expected N x 28 x 28 images");
  }
  if (labels.dim() != 1 || labels.size(0) != images.size(0)) {
    return invalidArgument(prefix + "-labels-idx1-ubyte.gz: expected one label per image (" +
                           std::to_string(images.size(0)) + ")");
  }
  Dataset d;
  d.images = images.to(at::kFloat).div_(255.0).sub_(kFashionMnistMean).div_(kFashionMnistStd).unsqueeze(1);
  d.labels = labels.to(at::kLong);
  return d;
}

Dataset syntheticDataset(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Dataset d;
  d.labels = at::randint(0, 10, {n}, gen, at::kLong);
  d.images = at::randn({n, 1, 28, 28}, gen);
  auto acc = d.labels.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = acc[i], r = (c / 5) * 12 + 2, col = (c % 5) * 5 + 1;
    d.images[i][0].narrow(0, r, 8).narrow(0, 0, 8).narrow(1, col, 4).add_(1.0);
  }
  return d;
}

}  // namespace npuscope::workloads
