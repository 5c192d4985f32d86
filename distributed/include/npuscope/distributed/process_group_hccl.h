// The `hccl` process group: torch.distributed's collectives on npu tensors, run by c10d's own
// ProcessGroupGloo (TCP) — the real distributed engine, not a home-made one. npu tensors are
// handed to Gloo as zero-copy CPU aliases of their memory (npu::cpu_alias), so results land in
// the npu tensors with no staging copy. Every collective is recorded as an op with Ascend's
// name (hcom_allReduce_, hcom_broadcast_, ...) and the npu tensors as its inputs, so a recording
// session sees its bytes, dtype and device. Registered for Python as backend "hccl"
// (npuscope/distributed.py); C++ programs construct it over any c10d::Store. While a recording
// session runs, each collective is also a row of the trace's collectives table: enqueue and
// completion times, bytes, and (group, seq), which names the same collective on every rank.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace npuscope::distributed {

class ProcessGroupHCCL : public c10d::ProcessGroup {
 public:
  // `timeout`: how long a collective waits for its peers before failing (c10d's default, 30 min,
  // when zero or negative).
  ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "hccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  c10d::ProcessGroupGloo& gloo() { return *gloo_; }

 private:
  class Tracked;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
  int64_t group_;                  // numbered in creation order (the same on every rank)
  std::atomic<int64_t> seq_{0};    // collectives called so far (the same on every rank)
};

}  // namespace npuscope::distributed
