// The cost model of the real device: a modeled duration for each op from its FLOPs and bytes,
// and a modeled stream timeline per device. All parameters live in CostModelParams, documented
// with their sources; docs/device.md explains the model.
#pragma once

#include <cstdint>
#include <mutex>

namespace npuscope::npu {

// What a vector-unit (AI Vector core) kernel does, by the family of its op: each family has its
// own fixed cost and effective bandwidth (CostModelParams::vector), as Ascend's kernels of one
// family share a tiling scheme and pipeline shape.
enum class VectorKind : uint8_t {
  kElementwise,       // add, mul, relu, comparisons, dropout's mask multiply
  kTranscendental,    // exp, log, sin, cos, tanh, sigmoid, gelu, silu
  kCast,              // dtype conversion
  kCopy,              // contiguous copy, clone, broadcast
  kStridedCopy,       // slice, concatenation, gather, index_select, embedding lookup
  kFill,              // zeros, ones, fill
  kTranspose,         // a permuted (non-contiguous) copy
  kPool,              // max / average pooling
  kPoolGrad,          // their backward
  kSoftmax,           // softmax, log_softmax, nll_loss, topk and their backward
  kNorm,              // rms_norm, layer_norm, batch_norm
  kNormGrad,          // their backward
  kSwiGlu,            // torch_npu's npu_swiglu
  kSwiGluGrad,        // its backward
  kRotary,            // npu_rotary_mul and its backward
  kAdam,              // fused Adam / AdamW step (ApplyAdamWV2)
  kForeach,           // _foreach_* list ops
  kScatter,           // embedding backward, index_put, scatter
  kReduceAll,         // a reduction to one value (sum, mean, norm)
  kReducePartial,     // a reduction over some dimensions
  kFormatActivation,  // TransData of an activation: NCHW <-> NC1HWC0
  kFormatWeight,      // TransData of a weight: NCHW <-> FRACTAL_Z
  kFormatMatrix,      // TransData of a matrix: ND <-> FRACTAL_NZ (the Cube's tiled layout)
  kCount
};
const char* vectorKindName(VectorKind k);

// One family's cost: setup + bytes / bandwidth (bytes read + written).
struct VectorCost {
  double setup_us;
  double bytes_per_s;
};

// Figures of an Ascend 910B training card, fitted with `npuscope calibrate` on two real 910B
// exports (docs/device.md, "Calibration": the Qwen3-0.6B bf16 step and the AlexNet fp32 step of
// tests/data/traces): effective rates, not data-sheet peaks.
struct CostModelParams {
  // Cube unit (matrix): fp16 / bf16 in, fp32 accumulate. 190 TFLOPS achieved on the Qwen3
  // step's large matmuls (the 910B's data-sheet peak is about 313 TFLOPS fp16).
  double cube_fp16_flops_per_s = 190e12;
  // fp32 matrix work (HF32 on the 910B's Cube): 150 TFLOPS on the AlexNet step's convolutions.
  double cube_fp32_flops_per_s = 150e12;
  // A Cube kernel also streams its operands: inputs read at 600 GB/s (HBM, the operands are
  // cold: weights), outputs written at 1.9 TB/s (into the L2 cache). Matmuls with few rows
  // (batch 32 fully connected layers) are bound by this, not by the FLOPs.
  double cube_read_bytes_per_s = 600e9;
  double cube_write_bytes_per_s = 1.9e12;
  // A convolution's Cube efficiency by input channels (padded to C0): cin / (cin + 64). The
  // Cube's K dimension is cin per kernel position, so few channels leave it mostly idle.
  double conv_channel_half = 64;
  // Fused attention (FlashAttentionScore and its backward) runs at 40 % of the Cube rate: the
  // softmax between the two matmuls runs on the vector cores.
  double attention_efficiency = 0.4;
  // Vector unit, per family (setup µs, effective bytes / s): fitted per family on the two steps.
  // Effective bandwidths above HBM's 1.6 TB/s mean the family's operands are mostly in the L2
  // cache (192 MB) in those steps; below, extra passes or scalar work.
  VectorCost vector[static_cast<size_t>(VectorKind::kCount)] = {
      {0.3, 930e9},   // kElementwise
      {4.0, 430e9},   // kTranscendental
      {0.1, 800e9},   // kCast
      {0.8, 1030e9},  // kCopy
      {4.8, 920e9},   // kStridedCopy
      {0.1, 2200e9},  // kFill
      {18, 450e9},    // kTranspose
      {6, 180e9},     // kPool
      {10, 4000e9},   // kPoolGrad (reads the argmax mask only where it is set)
      {9, 200e9},     // kSoftmax
      {5.2, 800e9},   // kNorm
      {23, 340e9},    // kNormGrad
      {0, 1300e9},    // kSwiGlu
      {2.7, 570e9},   // kSwiGluGrad
      {3.9, 640e9},   // kRotary
      {2.3, 330e9},   // kAdam
      {2.2, 1350e9},  // kForeach
      {2.5, 1100e9},  // kScatter
      {2.7, 750e9},   // kReduceAll
      {16, 1260e9},   // kReducePartial
      {12, 2600e9},   // kFormatActivation
      {3.1, 160e9},   // kFormatWeight
      {8, 600e9},     // kFormatMatrix (fitted on the Qwen3 job's rank 2, see docs/device.md)
  };
  // Fixed cost of starting one task on the device (scheduling, kernel prologue): the shortest
  // kernels of both steps take 1.3-1.6 µs.
  int64_t launch_ns = 1600;
  // Ops torch_npu runs on the host (its `tocpu` list: analysis/op_support.h, docs/op_coverage.md):
  // the inputs go to the host and the outputs back over PCIe 4.0 x16 (the Atlas 300T card's
  // link: 32 GB/s raw, modeled at 25 GB/s achieved), the stream is synchronised first, and
  // the op computes on one host core (modeled at 20 GFLOPS, a vectorised x86 core).
  double pcie_bytes_per_s = 25e9;
  double host_flops_per_s = 20e9;
  int64_t host_fallback_sync_ns = 30000;
  const VectorCost& cost(VectorKind k) const { return vector[static_cast<size_t>(k)]; }
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
  VectorKind kind = VectorKind::kElementwise;  // the family of a vector / memory op
  double out_bytes = 0;        // of `bytes`, those written (Cube ops: at the write rate)
  double efficiency = 1.0;     // of the Cube rate (convolutions by channels, attention)
  // TransData tasks folded into this op (a convolution's operands between NCHW and NC1HWC0 /
  // FRACTAL_Z, as torch_npu converts them around each convolution): count and bytes moved, per
  // kind. Each costs a launch plus its family's setup; the bytes go at its family's bandwidth.
  int format_act_tasks = 0, format_weight_tasks = 0;
  double format_act_bytes = 0, format_weight_bytes = 0;
};

// Modeled device duration. A Cube op: launch + max(flops / (rate x efficiency), inputs / read
// rate + outputs / write rate). A vector or memory op: launch + its family's setup + bytes / its
// family's bandwidth. A host fallback: launch + sync + bytes over PCIe + flops at the host's rate.
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
