#include "npuscope/distributed/data_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>

#include "npuscope/distributed/process_group_hccl.h"

namespace npuscope::distributed {

struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<ProcessGroupHCCL> pg;
};

StatusOr<std::unique_ptr<DataParallel>> DataParallel::join(const std::string& addr, int port, int rank, int world,
                                                           std::chrono::milliseconds timeout) {
  if (world < 1 || rank < 0 || rank >= world) {
    return invalidArgument("rank " + std::to_string(rank) + " of a world of " + std::to_string(world) +
                           ": expected 0 <= rank < world");
  }
  if (port <= 0 || port > 65535) return invalidArgument("port " + std::to_string(port) + ": expected 1..65535");
  std::unique_ptr<DataParallel> dp(new DataParallel());
  dp->rank_ = rank;
  dp->world_ = world;
  dp->impl_ = std::make_unique<Impl>();
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(port);
    o.isServer = rank == 0;
    o.numWorkers = static_cast<std::size_t>(world);
    o.waitWorkers = true;
    o.timeout = timeout;
    dp->impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, o);
    dp->impl_->pg = c10::make_intrusive<ProcessGroupHCCL>(dp->impl_->store, rank, world, timeout);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return ioError("rank " + std::to_string(rank) + " could not join the job at " + addr + ":" +
                       std::to_string(port) + ": " + what.substr(0, what.find('\n')));
  }
  return dp;
}

DataParallel::~DataParallel() = default;

void DataParallel::averageGradients(const std::vector<at::Tensor>& grads) {
  // One coalesced all-reduce per dtype (a model under O2 has fp16 and fp32 gradients), as DDP's
  // buckets do: a collective's fixed cost is paid once, not per tensor.
  std::vector<std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& g : grads) {
    auto it = std::find_if(by_dtype.begin(), by_dtype.end(),
                           [&](const std::vector<at::Tensor>& v) { return v.front().scalar_type() == g.scalar_type(); });
    if (it == by_dtype.end()) by_dtype.push_back({g}); else it->push_back(g);
  }
  for (std::vector<at::Tensor>& group : by_dtype) {
    impl_->pg->allreduce_coalesced(group)->wait();
    for (const at::Tensor& g : group) g.div_(world_);
  }
}

bool DataParallel::anyOverflow(bool local) {
  std::vector<at::Tensor> flag{at::full({1}, local ? 1.0 : 0.0, at::kFloat)};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MAX;
  impl_->pg->allreduce(flag, o)->wait();
  return flag[0].item<float>() > 0;
}

void DataParallel::barrier() { impl_->pg->barrier()->wait(); }

}  // namespace npuscope::distributed
