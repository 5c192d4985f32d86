// The cost model of the real device: a modeled duration for each op from its FLOPs and bytes,
// and a modeled stream timeline per device. All parameters live in CostModelParams, documented
// with their sources; docs/device.md explains the model.
#pragma once

#include <cstdint>
#include <mutex>

namespace npuscope::npu {

// Figures of an Ascend 910 (910A) training card.
struct CostModelParams {
  // Cube unit (matrix) peak, fp16 in / fp32 accumulate: 256 TFLOPS (Ascend 910 data sheet).
  double cube_fp16_flops_per_s = 256e12;
  // fp32 matrix work: the Cube has no fp32 path on 910A; modeled at a quarter of fp16 peak.
  double cube_fp32_flops_per_s = 64e12;
  // Vector unit: 32 AI cores x 128 fp16 lanes x 1 GHz = 4.1 TFLOPS fp16, half that in fp32.
  double vector_fp16_flops_per_s = 4.096e12;
  double vector_fp32_flops_per_s = 2.048e12;
  // HBM2 bandwidth: 1228 GB/s (Ascend 910 data sheet: 4 stacks, 32 GiB).
  double hbm_bytes_per_s = 1228e9;
  // Fixed cost of starting one task on the device (scheduling, kernel prologue).
  int64_t launch_ns = 2000;
  // Ops torch_npu runs on the host (its `tocpu` list: analysis/op_support.h, docs/op_coverage.md):
  // the inputs go to the host and the outputs back over PCIe 4.0 x16 (the Atlas 300T card's
  // link: 32 GB/s raw, modeled at 25 GB/s achieved), the stream is synchronised first, and
  // the op computes on one host core (modeled at 20 GFLOPS, a vectorised x86 core).
  double pcie_bytes_per_s = 25e9;
  double host_flops_per_s = 20e9;
  int64_t host_fallback_sync_ns = 30000;
};

enum class ComputeUnit {
  kCube,    // matrix multiply, convolution
  kVector,  // elementwise, reductions, normalisation, activations
  kMemory,  // pure data movement: copies, views materialised, indexing
};

struct OpWork {
  ComputeUnit unit = ComputeUnit::kVector;
  bool low_precision = false;  // fp16/bf16 operands
  double flops = 0;            // floating-point operations
  double bytes = 0;            // bytes read + written in device memory
  // A real torch_npu would run this op on the host (CPU fallback): charged as copies over PCIe
  // and host compute instead of a device kernel.
  bool host_fallback = false;
};

// Modeled device duration: launch + max(compute time, memory time) (a roofline); a host
// fallback: launch + sync + bytes over PCIe + flops at the host's rate.
int64_t modeled_duration_ns(const OpWork& work, const CostModelParams& params = CostModelParams());

struct StreamSlot {
  int64_t start_ns;
  int64_t end_ns;
};

// One device stream. An op starts when the host has launched it and the previous op on the
// stream has finished. With the task queue on (TASK_QUEUE_ENABLE=1, the default) the host keeps
// launching while the device runs; with it off (0) the host waits for each op to finish, so
// every later launch is delayed by that wait.
class StreamModel {
 public:
  explicit StreamModel(bool task_queue = true) : task_queue_(task_queue) {}
  // `submit_ns`: host time at which the op was launched (measured); `dur_ns`: modeled duration.
  StreamSlot submit(int64_t submit_ns, int64_t dur_ns);
  void reset();
  bool task_queue() const { return task_queue_; }
  // Host-side delay accumulated by waiting for the device (task queue off).
  int64_t host_delay_ns() const { return delay_ns_; }

 private:
  bool task_queue_;
  int64_t prev_end_ns_ = INT64_MIN;
  int64_t delay_ns_ = 0;
};

// Per-device streams of the process, shared by every host thread (thread-safe). The task-queue
// mode comes from TASK_QUEUE_ENABLE (default 1).
StreamSlot submit_to_stream(int device, int64_t submit_ns, int64_t dur_ns);
void reset_streams();
bool task_queue_enabled();

}  // namespace npuscope::npu
