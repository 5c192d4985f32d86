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

namespace {

// Waits for a collective of the job. A failure of the transport (Gloo's IoException when a peer
// rank ended or its connection broke) becomes a c10::Error naming the rank and the collective,
// as torch's own errors are, so a training loop's error path ends its run instead of the
// exception leaving the program (std::terminate).
void waitFor(const c10::intrusive_ptr<c10d::Work>& work, int rank, const char* what) {
  try {
    work->wait();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string why = e.what();
    TORCH_CHECK(false, "rank ", rank, ": the ", what, " with the other ranks failed (a peer rank ended or lost its "
                "connection): ", why.substr(0, why.find('\n')));
  }
}

}  // namespace

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
    waitFor(impl_->pg->allreduce_coalesced(group), rank_, "gradient all-reduce");
    for (const at::Tensor& g : group) g.div_(world_);
  }
}

bool DataParallel::anyOverflow(bool local) {
  std::vector<at::Tensor> flag{at::full({1}, local ? 1.0 : 0.0, at::kFloat)};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MAX;
  waitFor(impl_->pg->allreduce(flag, o), rank_, "overflow all-reduce");
  return flag[0].item<float>() > 0;
}

void DataParallel::barrier() { waitFor(impl_->pg->barrier(), rank_, "barrier"); }

}  // namespace npuscope::distributed
