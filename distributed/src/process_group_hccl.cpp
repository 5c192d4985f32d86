#include "npuscope/distributed/process_group_hccl.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "npuscope/device/npu.h"

namespace npuscope::distributed {
namespace {

std::vector<at::Tensor> aliases(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(npu::cpu_alias(t));
  return out;
}

std::vector<std::vector<at::Tensor>> aliases(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& l : lists) out.push_back(aliases(l));
  return out;
}

std::vector<c10::IValue> recorded(const std::vector<at::Tensor>& tensors) {
  return std::vector<c10::IValue>(tensors.begin(), tensors.end());
}

// A collective that finished before it returned.
class CompletedWork : public c10d::Work {
 public:
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
};

}  // namespace

// torch.distributed calls a collective through c10d's dispatcher ops, which libtorch 1.13 lets
// through autograd for CPU and CUDA tensors only: npu tensors need the same fallthrough.
TORCH_LIBRARY_IMPL(c10d, AutogradPrivateUse1, m) {
  for (const char* op : {"broadcast_", "allreduce_", "allgather_", "reduce_scatter_", "reduce_", "gather_",
                         "scatter_", "alltoall_", "barrier", "send", "recv_"}) {
    m.impl(op, torch::CppFunction::makeFallthrough());
  }
}

ProcessGroupHCCL::ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size) {
  auto options = c10d::ProcessGroupGloo::Options::create(
      timeout.count() > 0 ? timeout : std::chrono::milliseconds(::kProcessGroupDefaultTimeout));
  options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  gloo_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  RECORD_FUNCTION("hcom_broadcast_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->broadcast(cpu, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  RECORD_FUNCTION("hcom_allReduce_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->allreduce(cpu, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  RECORD_FUNCTION("hcom_allReduce_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->allreduce_coalesced(cpu, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  RECORD_FUNCTION("hcom_reduce_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->reduce(cpu, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  RECORD_FUNCTION("hcom_allGather_", recorded(inputs));
  auto out = aliases(outputs);
  auto in = aliases(inputs);
  return gloo_->allgather(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  // Gloo has no flat allgather: gather into the output's per-rank slices.
  RECORD_FUNCTION("hcom_allGather_", std::vector<c10::IValue>{input});
  std::vector<std::vector<at::Tensor>> out{aliases(output.chunk(getSize()))};
  std::vector<at::Tensor> in{npu::cpu_alias(input)};
  return gloo_->allgather(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  RECORD_FUNCTION("hcom_gather_", recorded(inputs));
  auto out = aliases(outputs);
  auto in = aliases(inputs);
  return gloo_->gather(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  RECORD_FUNCTION("hcom_scatter_", recorded(outputs));
  auto out = aliases(outputs);
  auto in = aliases(inputs);
  return gloo_->scatter(out, in, opts);
}

// Gloo has no reduce-scatter: an allreduce of the inputs laid end to end (one copy into a flat
// buffer), then this rank's part copied into its output. Done when it returns.
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  RECORD_FUNCTION("hcom_reduceScatter_", recorded(outputs));
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "hccl reduce_scatter: one output and one input list expected");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(), "hccl reduce_scatter: the input list must hold ",
              getSize(), " tensors (one per rank), got ", inputs[0].size());
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& t : inputs[0]) flat_parts.push_back(npu::cpu_alias(t).reshape({-1}));
  std::vector<at::Tensor> flat{at::cat(flat_parts)};
  c10d::AllreduceOptions ar;
  ar.reduceOp = opts.reduceOp;
  ar.timeout = opts.timeout;
  gloo_->allreduce(flat, ar)->wait();
  int64_t offset = 0;
  for (int r = 0; r < getRank(); ++r) offset += inputs[0][static_cast<size_t>(r)].numel();
  at::Tensor out = npu::cpu_alias(outputs[0]);
  out.copy_(flat[0].narrow(0, offset, out.numel()).view(out.sizes()));
  return c10::make_intrusive<CompletedWork>();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  RECORD_FUNCTION("hcom_alltoall_", std::vector<c10::IValue>{input});
  at::Tensor out = npu::cpu_alias(output), in = npu::cpu_alias(input);
  return gloo_->alltoall_base(out, in, output_split_sizes, input_split_sizes, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  RECORD_FUNCTION("hcom_send_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->send(cpu, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  RECORD_FUNCTION("hcom_receive_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->recv(cpu, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  RECORD_FUNCTION("hcom_receive_", recorded(tensors));
  auto cpu = aliases(tensors);
  return gloo_->recvAnysource(cpu, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  RECORD_FUNCTION("hcom_barrier_", std::vector<c10::IValue>());
  return gloo_->barrier(opts);
}

}  // namespace npuscope::distributed
