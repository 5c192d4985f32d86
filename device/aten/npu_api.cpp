// The npu:: API on the ATen side: devices as c10::Device, names, threads, op cost estimates.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <thread>

#include "aten/npu_tensor.h"
#include "npuscope/analysis/op_support.h"
#include "npuscope/device/npu.h"
#include "npuscope/store/format.h"

namespace npuscope::npu {

namespace detail {
std::atomic<OpObserver> g_op_observer{nullptr};
}
void set_op_observer(OpObserver fn) { detail::g_op_observer.store(fn); }

c10::Device device(int index) {
  if (index < 0) index = current_device();
  const Status s = check_device(index);
  TORCH_CHECK(s.isOk(), s.message());
  return c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(index));
}

c10::Device parse_torch_device(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  auto idx = parse_device(text);
  TORCH_CHECK(idx.isOk(), idx.status().message());
  return device(*idx);
}

std::string format_device(const c10::Device& d) {
  if (d.type() == kDeviceType) return device_name(d.has_index() ? d.index() : current_device());
  return d.str();
}

bool is_npu(const at::Tensor& t) { return aten::isNpu(t); }

void tag_tensor_memory(const at::Tensor& t, MemoryCategory category, const std::string& owner) {
  if (!t.defined() || !aten::isNpu(t) || !t.has_storage()) return;
  tag_memory(t.storage().data(), category, owner.empty() ? nullptr : owner.c_str());
}

at::Tensor cpu_alias(const at::Tensor& t) { return aten::isNpu(t) ? aten::owningAliasAsCpu(t) : t; }

void synchronize(int device_index) {
  // Every op has completed when it returns; only the index is checked. Recorded as an op: the
  // predicted timeline's host waits for the device here.
  RECORD_FUNCTION("npu::synchronize", std::vector<c10::IValue>());
  if (device_index >= 0) {
    const Status s = check_device(device_index);
    TORCH_CHECK(s.isOk(), s.message());
  }
}

void set_num_threads(int n) { at::set_num_threads(std::max(1, n)); }
int num_threads() { return at::get_num_threads(); }

namespace {
// Debian's libtorch starts with one intra-op thread; the device uses the cores it has.
struct InitThreads {
  InitThreads() {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("NPUSCOPE_NUM_THREADS")) n = std::atoi(env);
    if (n > 0) at::set_num_threads(n);
    NPU_LOG(kInfo) << "npu device: " << at::get_num_threads() << " intra-op thread(s), overflow mode "
                   << overflow_mode_name(overflow_mode());
  }
} g_init_threads;

std::string baseName(const std::string& name) {
  const auto pos = name.find("::");
  std::string n = pos == std::string::npos ? name : name.substr(pos + 2);
  const auto dot = n.find('.');
  return dot == std::string::npos ? n : n.substr(0, dot);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool isOneOf(const std::string& n, std::initializer_list<const char*> names) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

bool isReduction(const std::string& n) {
  return isOneOf(n, {"sum", "mean", "norm", "linalg_vector_norm", "amax", "amin", "max", "min", "prod", "var", "std",
                     "var_mean", "std_mean", "any", "all", "argmax", "argmin", "logsumexp", "nansum", "count_nonzero"});
}

// The family of a vector / memory op (CostModelParams::vector), by its name; `copy` ops by
// their operands: a dtype change is a cast, a non-contiguous source a transpose.
VectorKind vectorKindOf(const std::string& n, const std::vector<at::Tensor>& inputs, double out_numel) {
  using K = VectorKind;
  const bool backward = contains(n, "backward") || endsWith(n, "_grad");
  if (startsWith(n, "_foreach_")) return K::kForeach;
  if (isOneOf(n, {"npu_apply_adam_w", "npu_apply_adam", "_fused_adam_", "_fused_adamw_", "_fused_adam", "_fused_adamw"}))
    return K::kAdam;
  if (contains(n, "pool")) return backward ? K::kPoolGrad : K::kPool;
  if (contains(n, "softmax") || contains(n, "nll_loss") || contains(n, "cross_entropy") || n == "topk" || n == "sort")
    return K::kSoftmax;
  if (contains(n, "rms_norm") || contains(n, "layer_norm") || contains(n, "batch_norm") || contains(n, "group_norm"))
    return backward ? K::kNormGrad : K::kNorm;
  if (contains(n, "swiglu")) return backward ? K::kSwiGluGrad : K::kSwiGlu;
  if (contains(n, "rotary")) return K::kRotary;
  if (n == "npu_format_cast") return K::kFormatActivation;
  if (n == "npu_transpose" || n == "npu_confusion_transpose") return K::kTranspose;
  if (isReduction(n)) return out_numel <= 1 ? K::kReduceAll : K::kReducePartial;
  if (isOneOf(n, {"embedding_dense_backward", "embedding_backward", "index_put_", "index_put", "_index_put_impl_",
                  "scatter", "scatter_", "scatter_add", "scatter_add_", "index_add", "index_add_"}))
    return K::kScatter;
  if (isOneOf(n, {"cat", "stack", "index", "index_select", "gather", "embedding", "slice", "narrow_copy", "unfold",
                  "masked_select", "repeat", "roll", "flip"}))
    return K::kStridedCopy;
  if (isOneOf(n, {"zero_", "fill_", "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "fill"}))
    return K::kFill;
  if (isOneOf(n, {"copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "to", "clone", "contiguous", "expand_copy"})) {
    const at::Tensor* src = nullptr;
    for (const auto& t : inputs)
      if (t.defined()) {
        src = &t;
        break;
      }
    if (src && !src->is_contiguous()) return K::kTranspose;
    at::ScalarType first = at::ScalarType::Undefined;
    for (const auto& t : inputs) {
      if (!t.defined()) continue;
      if (first == at::ScalarType::Undefined) first = t.scalar_type();
      else if (t.scalar_type() != first) return K::kCast;
    }
    return n == "_to_copy" || n == "to" ? K::kCast : K::kCopy;
  }
  if (isOneOf(n, {"exp", "exp_", "log", "log_", "log1p", "expm1", "sin", "cos", "tan", "tanh", "tanh_", "sigmoid",
                  "sigmoid_", "gelu", "fast_gelu", "npu_fast_gelu", "silu", "silu_", "erf", "erfinv", "softplus",
                  "mish", "elu", "selu", "atan", "asin", "acos", "sinh", "cosh", "log2", "log10", "exp2"}) ||
      (backward && (contains(n, "gelu") || contains(n, "silu") || contains(n, "sigmoid") || contains(n, "tanh"))))
    return K::kTranscendental;
  return K::kElementwise;
}

// The cost formulas, from the inputs and the (known or derived) size of the first output.
OpWork estimate(const std::string& op_name, const std::vector<at::Tensor>& inputs, double out0, double out_numel,
                double out_bytes) {
  OpWork w;
  double in_numel = 0;
  for (const auto& t : inputs) {
    if (!t.defined()) continue;
    w.bytes += static_cast<double>(t.numel() * t.element_size());
    in_numel = std::max(in_numel, static_cast<double>(t.numel()));
    if (aten::isLowPrecision(t.scalar_type())) w.low_precision = true;
  }
  w.bytes += out_bytes;
  w.out_bytes = out_bytes;
  const std::string n = baseName(op_name);
  auto in = [&](size_t i) -> const at::Tensor* {
    return i < inputs.size() && inputs[i].defined() ? &inputs[i] : nullptr;
  };
  if (n == "mm" || n == "bmm" || n == "matmul" || n == "addmm" || n == "baddbmm" || n == "addbmm" ||
      n == "linear" || n == "mv" || n == "addmv" || n == "dot") {
    // 2 * output elements * reduction length; the reduction length is the last dim of the
    // first matrix operand (addmm/baddbmm: operand 1).
    const bool has_bias = n == "addmm" || n == "baddbmm" || n == "addbmm" || n == "addmv";
    const at::Tensor* a = in(has_bias ? 1 : 0);
    const double k = a && a->dim() > 0 ? static_cast<double>(a->size(-1)) : 1.0;
    w.unit = ComputeUnit::kCube;
    w.flops = 2.0 * std::max(out0, 1.0) * k + (has_bias ? out0 : 0.0);
  } else if (contains(n, "convolution") || contains(n, "conv")) {
    const at::Tensor* weight = in(contains(n, "backward") ? 2 : 1);
    const double per_out = weight && weight->dim() > 0 && weight->size(0) > 0
                               ? static_cast<double>(weight->numel()) / static_cast<double>(weight->size(0))
                               : 1.0;
    // The Cube works on input channels padded to C0 (16 fp16 / bf16 values, 8 fp32) and is
    // idle for part of each K step when there are few of them.
    const double cin = weight && weight->dim() > 1 ? static_cast<double>(weight->size(1)) : 0.0;
    const double c0 = w.low_precision ? 16.0 : 8.0;
    const double padded = cin > 0 ? std::ceil(cin / c0) * c0 : 0.0;
    const double pad = cin > 0 ? padded / cin : 1.0;
    w.unit = ComputeUnit::kCube;
    if (padded > 0) w.efficiency = padded / (padded + CostModelParams().conv_channel_half);
    auto sizeOf = [](const at::Tensor* t) { return t ? static_cast<double>(t->numel() * t->element_size()) : 0.0; };
    if (contains(n, "backward")) {
      const at::Tensor* grad = in(0);
      const double g = grad ? static_cast<double>(grad->numel()) : out0;
      w.flops = 2.0 * 2.0 * g * per_out * pad;  // grad_input and grad_weight
      // TransData around it (what a 910B's torch_npu runs, docs/device.md): grad_output and
      // input to NC1HWC0, grad_input back; the weight to FRACTAL_Z and grad_weight back.
      w.format_act_tasks = 3;
      w.format_act_bytes = 2.0 * (sizeOf(in(0)) + 2.0 * sizeOf(in(1)));
      w.format_weight_tasks = 2;
      w.format_weight_bytes = 4.0 * sizeOf(weight);
    } else {
      w.flops = 2.0 * out0 * per_out * pad;
      // The input to NC1HWC0 and the output back, the weight to FRACTAL_Z.
      w.format_act_tasks = 2;
      w.format_act_bytes = 2.0 * (sizeOf(in(0)) + out_bytes);
      w.format_weight_tasks = 1;
      w.format_weight_bytes = 2.0 * sizeOf(weight);
    }
  } else if ((n == "npu_fusion_attention" || n == "npu_fusion_attention_grad") && in(0) && in(1) && in(0)->dim() >= 3) {
    // torch_npu's fused attention: Q K^T and P V on the Cube, 4 * B * N * Sq * Skv * D (the
    // element count of Q times Skv times 4); Skv is dim 1 of key in B S H / B S N D, dim 2 in
    // B N S D, dim 0 in S B H (the query's layout string is not among the shapes: the larger
    // of the two sequence dims is taken). A mask (a fourth tensor: the causal masks LLMs pass)
    // halves it; the backward recomputes the scores and makes three gradients: 2.5 times.
    const at::Tensor& k = *in(1);
    const double skv = static_cast<double>(std::max(k.size(0), std::max(k.size(1), k.dim() == 4 ? k.size(2) : 1)));
    w.unit = ComputeUnit::kCube;
    w.flops = 4.0 * static_cast<double>(in(0)->numel()) * skv;
    bool masked = false;
    for (size_t i = 3; i < inputs.size(); ++i) masked |= inputs[i].defined() && inputs[i].dim() >= 2;
    if (n == "npu_fusion_attention_grad") {
      w.flops *= 2.5;
      masked = false;
      for (size_t i = 4; i < inputs.size(); ++i) masked |= inputs[i].defined() && inputs[i].dim() == 2;
    }
    if (masked) w.flops /= 2;
    w.efficiency = CostModelParams().attention_efficiency;
  } else {
    const bool memory = n == "copy_" || n == "_copy_from" || n == "npu_confusion_transpose" || n == "_copy_from_and_resize" ||
                        n == "_to_copy" || n == "cat" || n == "stack" || n == "index" || n == "index_select" ||
                        n == "gather" || n == "scatter" || n == "index_put_" || n == "clone" || n == "contiguous" ||
                        n == "fill_" || n == "zero_" || n == "empty" || n == "empty_strided" || n == "as_strided" ||
                        n == "view" || n == "_reshape_alias" || n == "resize_" || n == "unfold" || n == "masked_fill_" ||
                        n == "embedding" || n == "embedding_dense_backward" || n == "slice" || n == "npu_format_cast" ||
                        n == "npu_transpose";
    w.kind = vectorKindOf(n, inputs, out_numel);
    if (memory) {
      w.unit = ComputeUnit::kMemory;
      w.flops = 0;
    } else {
      // Elementwise, reductions, activations, normalisations: a few operations per element
      // (what the FLOP counts report; the duration comes from the family's bandwidth).
      w.unit = ComputeUnit::kVector;
      const bool heavy = w.kind == VectorKind::kTranscendental || w.kind == VectorKind::kNorm ||
                         w.kind == VectorKind::kNormGrad || w.kind == VectorKind::kSoftmax;
      w.flops = std::max(out_numel, in_numel) * (heavy ? 5.0 : 1.0);
    }
    // A slice or gather reads only what it writes; an embedding's backward touches only the
    // rows of its gradient.
    if (w.kind == VectorKind::kStridedCopy && (n == "slice" || n == "index_select" || n == "gather" || n == "index" ||
                                               n == "embedding" || n == "narrow_copy")) {
      w.bytes = 2 * out_bytes;
    } else if (w.kind == VectorKind::kScatter && n == "embedding_dense_backward" && in(0)) {
      w.bytes = 2.0 * static_cast<double>(in(0)->numel() * in(0)->element_size());
    }
  }
  w.host_fallback = opSupport(op_name).level == OpSupportLevel::kFallback;
  return w;
}

double product(const std::vector<int64_t>& v) {
  double p = 1;
  for (int64_t x : v) p *= static_cast<double>(x);
  return p;
}

}  // namespace

OpWork estimate_op_work(const std::string& op_name, const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs) {
  double out_numel = 0, out_bytes = 0;
  for (const auto& t : outputs) {
    if (!t.defined()) continue;
    out_numel += static_cast<double>(t.numel());
    out_bytes += static_cast<double>(t.numel() * t.element_size());
  }
  const double out0 = !outputs.empty() && outputs[0].defined() ? static_cast<double>(outputs[0].numel()) : 0;
  return estimate(op_name, inputs, out0, out_numel, out_bytes);
}

OpWork estimate_op_work(const std::string& op_name, c10::ArrayRef<const c10::IValue> inputs) {
  // Dispatches no op (it runs inside profiler callbacks): shapes only.
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> ints[3];  // the first int-list arguments: stride, padding, dilation
  int lists = 0;
  for (const auto& v : inputs) {
    if (v.isTensor()) {
      tensors.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) tensors.push_back(t);
    } else if (v.isList() && lists < 3) {
      std::vector<int64_t> l;
      for (const auto& e : v.toListRef()) {
        if (e.isInt()) l.push_back(e.toInt());
      }
      if (!l.empty()) ints[lists++] = std::move(l);
    } else if (v.isNone() && tensors.size() == 2 && lists == 0) {
      tensors.emplace_back();  // keep the bias slot of convolution(input, weight, bias?, ...)
    }
  }
  const std::string n = baseName(op_name);
  auto dims = [&](size_t i) {
    return i < tensors.size() && tensors[i].defined() ? tensors[i].sizes().vec() : std::vector<int64_t>{};
  };
  std::vector<int64_t> out;
  if (n == "mm" || n == "bmm" || n == "addmm" || n == "baddbmm" || n == "matmul" || n == "linear") {
    const size_t first = (n == "addmm" || n == "baddbmm") ? 1 : 0;
    auto a = dims(first), b = dims(first + 1);
    if (!a.empty() && !b.empty()) {
      out = a;
      out.back() = n == "linear" ? b.front() : b.back();
    }
  } else if (contains(n, "conv") && !contains(n, "backward")) {
    auto in = dims(0), w = dims(1);
    if (in.size() >= 3 && w.size() == in.size()) {
      out = {in[0], w[0]};
      for (size_t d = 2; d < in.size(); ++d) {
        const size_t k = d - 2;
        const int64_t s = k < ints[0].size() ? ints[0][k] : 1, p = k < ints[1].size() ? ints[1][k] : 0,
                      dl = k < ints[2].size() ? ints[2][k] : 1;
        out.push_back((in[d] + 2 * p - dl * (w[d] - 1) - 1) / std::max<int64_t>(s, 1) + 1);
      }
    }
  }
  if (out.empty() && isReduction(n) && !tensors.empty() && tensors[0].defined()) {
    // A reduction keeps the dimensions not in its dim list (its first int list); none: one value.
    out = {1};
    if (lists > 0) {
      const auto sizes = tensors[0].sizes();
      const int64_t rank = static_cast<int64_t>(sizes.size());
      for (int64_t d = 0; d < rank; ++d) {
        bool reduced = false;
        for (int64_t r : ints[0]) reduced |= r == d || r + rank == d;
        if (!reduced) out.push_back(sizes[static_cast<size_t>(d)]);
      }
    }
  }
  double out0 = out.empty() ? 0 : product(out);
  double elem = !tensors.empty() && tensors[0].defined() ? static_cast<double>(tensors[0].element_size()) : 4.0;
  if (out.empty()) {  // elementwise-like: the output is as large as the largest input
    for (const auto& t : tensors)
      if (t.defined()) out0 = std::max(out0, static_cast<double>(t.numel()));
  }
  return estimate(op_name, tensors, out0, out0, out0 * elem);
}

}  // namespace npuscope::npu
