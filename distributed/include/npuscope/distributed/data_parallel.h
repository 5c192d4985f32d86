// Data-parallel training for C++ programs (npuscope train --nproc N, or a user's own loop): one
// rank of a job joins the `hccl` process group over a TCP store, averages gradients across the
// ranks after each backward and decides AMP's overflow skip for all ranks. No c10d header here.
// docs/distributed.md, "C++ ranks".
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "npuscope/store/status.h"

namespace at {
class Tensor;
}

namespace npuscope::distributed {

class DataParallel {
 public:
  // Joins the job: rank 0 serves the store at addr:port, the others connect; every rank waits
  // (up to `timeout`) for all `world` ranks. A collective waits `timeout` for its peers.
  static StatusOr<std::unique_ptr<DataParallel>> join(const std::string& addr, int port, int rank, int world,
                                                      std::chrono::milliseconds timeout);
  ~DataParallel();
  int rank() const { return rank_; }
  int world() const { return world_; }
  // The collectives below throw c10::Error when one fails (a peer rank ended, a connection broke,
  // the timeout passed), naming this rank and the collective.
  // Sums each tensor over the ranks (one coalesced all-reduce per dtype) and divides it by the
  // world size.
  void averageGradients(const std::vector<at::Tensor>& grads);
  // Whether any rank overflowed (an all-reduce of the flag): every rank skips the same steps.
  bool anyOverflow(bool local);
  // Waits for every rank (a barrier).
  void barrier();

 private:
  DataParallel() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1;
};

}  // namespace npuscope::distributed
