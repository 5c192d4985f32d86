#include "npuscope/distributed/process_group_hccl.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <atomic>

#include "npuscope/store/clock.h"
#include "npuscope/store/collective_sink.h"
#include "npuscope/device/npu.h"

namespace npuscope::distributed {
namespace {

// The tensor Gloo works on: an npu tensor's zero-copy CPU alias, or a CPU tensor's shallow copy
// (same storage). Never the caller's own TensorImpl: Gloo's worker thread may drop the last
// reference to what it was given, and a tensor with a Python object needs the GIL to die — which
// deadlocks when the main thread, holding the GIL, destroys the process group (DDP's Reducer at
// teardown) and joins that worker.
at::Tensor glooTensor(const at::Tensor& t) {
  at::Tensor a = npu::cpu_alias(t);
  return a.is_same(t) ? t.variable_data() : a;
}

std::vector<at::Tensor> aliases(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(glooTensor(t));
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

std::atomic<int64_t> g_groups{0};

}  // namespace

// A collective as the session records it: taken at enqueue (inside its hcom_* op, so the record
// names that op), written when this rank sees it complete.
class ProcessGroupHCCL::Tracked {
 public:
  Tracked(ProcessGroupHCCL& pg, const char* kind, const std::vector<at::Tensor>& inputs)
      : seq_(++pg.seq_), sink_(collectiveSink()) {
    if (!sink_ || !sink_->context(&rec_.op_id, &rec_.step)) {
      sink_.reset();
      return;
    }
    rec_.group = pg.group_;
    rec_.seq = seq_;
    rec_.kind = kind;
    for (const at::Tensor& t : inputs) rec_.bytes += static_cast<int64_t>(t.nbytes());
    if (!inputs.empty()) rec_.dtype = std::string(inputs.front().dtype().name());
    rec_.group_size = pg.getSize();
    rec_.start_ns = nowNs();
  }
  // Records the collective when `work` completes (at once for work that is already done). The
  // work handed back completes only after the record was made, so a caller that waited for it
  // (and a session that stops after) finds the collective recorded.
  c10::intrusive_ptr<c10d::Work> finish(c10::intrusive_ptr<c10d::Work> work) {
    if (!sink_) return work;
    if (work->isCompleted()) {
      if (work->isSuccess()) rec_.end_ns = nowNs();
      sink_->add(rec_);
      return work;
    }
    c10::intrusive_ptr<c10::ivalue::Future> future;
    try {
      future = work->getFuture();
    } catch (const std::exception&) {  // send/recv work has no future: completion seen at wait()
      return c10::make_intrusive<RecordedWork>(work, c10::intrusive_ptr<c10::ivalue::Future>(), sink_, rec_);
    }
    // Callbacks run in the order they were added: the record first, then the chained future.
    future->addCallback([sink = sink_, rec = rec_](c10::ivalue::Future& f) mutable {
      if (!f.hasError()) rec.end_ns = nowNs();
      sink->add(rec);
    });
    auto chained = future->then([](c10::ivalue::Future& f) { return f.value(); }, future->elementType());
    return c10::make_intrusive<RecordedWork>(work, chained, nullptr, rec_);
  }

 private:
  // A Gloo work whose future (or, without one, whose wait) comes after the record.
  class RecordedWork : public c10d::Work {
   public:
    RecordedWork(c10::intrusive_ptr<c10d::Work> inner, c10::intrusive_ptr<c10::ivalue::Future> chained,
                 std::shared_ptr<CollectiveSink> sink, CollectiveRecord rec)
        : inner_(std::move(inner)), chained_(std::move(chained)), sink_(std::move(sink)), rec_(std::move(rec)) {}
    ~RecordedWork() override {
      if (sink_) sink_->add(rec_);  // a send/recv nobody waited for: completion not known
    }
    bool isCompleted() override { return chained_ ? chained_->completed() : inner_->isCompleted(); }
    bool isSuccess() const override { return inner_->isSuccess(); }
    std::exception_ptr exception() const override { return inner_->exception(); }
    int sourceRank() const override { return inner_->sourceRank(); }
    std::vector<at::Tensor> result() override { return inner_->result(); }
    void abort() override { inner_->abort(); }
    bool wait(std::chrono::milliseconds timeout) override {
      const bool ok = inner_->wait(timeout);
      if (chained_) {
        chained_->wait();
      } else if (sink_) {
        rec_.end_ns = nowNs();
        sink_->add(rec_);
        sink_.reset();
      }
      return ok;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
      if (!chained_) return inner_->getFuture();
      return chained_;
    }

   private:
    c10::intrusive_ptr<c10d::Work> inner_;
    c10::intrusive_ptr<c10::ivalue::Future> chained_;
    std::shared_ptr<CollectiveSink> sink_;  // send/recv: records at wait()
    CollectiveRecord rec_;
  };

  int64_t seq_;
  std::shared_ptr<CollectiveSink> sink_;
  CollectiveRecord rec_;
};

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
    : ProcessGroup(rank, size), group_(++g_groups) {
  auto options = c10d::ProcessGroupGloo::Options::create(
      timeout.count() > 0 ? timeout : std::chrono::milliseconds(::kProcessGroupDefaultTimeout));
  options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  gloo_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  RECORD_FUNCTION("hcom_broadcast_", recorded(tensors));
  Tracked track(*this, "broadcast", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->broadcast(cpu, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  RECORD_FUNCTION("hcom_allReduce_", recorded(tensors));
  Tracked track(*this, "allreduce", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->allreduce(cpu, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  RECORD_FUNCTION("hcom_allReduce_", recorded(tensors));
  Tracked track(*this, "allreduce", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->allreduce_coalesced(cpu, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  RECORD_FUNCTION("hcom_reduce_", recorded(tensors));
  Tracked track(*this, "reduce", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->reduce(cpu, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  RECORD_FUNCTION("hcom_allGather_", recorded(inputs));
  Tracked track(*this, "allgather", inputs);
  auto out = aliases(outputs);
  auto in = aliases(inputs);
  return track.finish(gloo_->allgather(out, in, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  // Gloo has no flat allgather: gather into the output's per-rank slices.
  RECORD_FUNCTION("hcom_allGather_", std::vector<c10::IValue>{input});
  Tracked track(*this, "allgather", {input});
  std::vector<std::vector<at::Tensor>> out{aliases(output.chunk(getSize()))};
  std::vector<at::Tensor> in{glooTensor(input)};
  return track.finish(gloo_->allgather(out, in, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  RECORD_FUNCTION("hcom_gather_", recorded(inputs));
  Tracked track(*this, "gather", inputs);
  auto out = aliases(outputs);
  auto in = aliases(inputs);
  return track.finish(gloo_->gather(out, in, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  RECORD_FUNCTION("hcom_scatter_", recorded(outputs));
  Tracked track(*this, "scatter", outputs);
  auto out = aliases(outputs);
  auto in = aliases(inputs);
  return track.finish(gloo_->scatter(out, in, opts));
}

// Gloo has no reduce-scatter: an allreduce of the inputs laid end to end (one copy into a flat
// buffer), then this rank's part copied into its output. Done when it returns.
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  RECORD_FUNCTION("hcom_reduceScatter_", recorded(outputs));
  Tracked track(*this, "reduce_scatter", inputs.empty() ? std::vector<at::Tensor>() : inputs[0]);
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "hccl reduce_scatter: one output and one input list expected");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(), "hccl reduce_scatter: the input list must hold ",
              getSize(), " tensors (one per rank), got ", inputs[0].size());
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& t : inputs[0]) flat_parts.push_back(glooTensor(t).reshape({-1}));
  std::vector<at::Tensor> flat{at::cat(flat_parts)};
  c10d::AllreduceOptions ar;
  ar.reduceOp = opts.reduceOp;
  ar.timeout = opts.timeout;
  gloo_->allreduce(flat, ar)->wait();
  int64_t offset = 0;
  for (int r = 0; r < getRank(); ++r) offset += inputs[0][static_cast<size_t>(r)].numel();
  at::Tensor out = glooTensor(outputs[0]);
  out.copy_(flat[0].narrow(0, offset, out.numel()).view(out.sizes()));
  return track.finish(c10::make_intrusive<CompletedWork>());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  RECORD_FUNCTION("hcom_alltoall_", std::vector<c10::IValue>{input});
  Tracked track(*this, "alltoall", {input});
  at::Tensor out = glooTensor(output), in = glooTensor(input);
  return track.finish(gloo_->alltoall_base(out, in, output_split_sizes, input_split_sizes, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  RECORD_FUNCTION("hcom_send_", recorded(tensors));
  Tracked track(*this, "send", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->send(cpu, dst_rank, tag));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  RECORD_FUNCTION("hcom_receive_", recorded(tensors));
  Tracked track(*this, "recv", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->recv(cpu, src_rank, tag));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  RECORD_FUNCTION("hcom_receive_", recorded(tensors));
  Tracked track(*this, "recv", tensors);
  auto cpu = aliases(tensors);
  return track.finish(gloo_->recvAnysource(cpu, tag));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  RECORD_FUNCTION("hcom_barrier_", std::vector<c10::IValue>());
  Tracked track(*this, "barrier", {});
  return track.finish(gloo_->barrier(opts));
}

}  // namespace npuscope::distributed
