#include "npuscope/device/calibration.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "npuscope/device/cost_model.h"
#include "npuscope/device/npu.h"

namespace npuscope::npu {
namespace {

using Shape = std::vector<int64_t>;

// "32,3,224,224;64,3,11,11" -> shapes (quotes dropped; "N/A" and "" are none; a trailing ";"
// is one more, empty shape: a scalar).
std::vector<Shape> shapes(std::string field) {
  field.erase(std::remove(field.begin(), field.end(), '"'), field.end());
  std::vector<Shape> out;
  if (field.empty() || field == "N/A") return out;
  std::stringstream all(field);
  std::string one;
  while (std::getline(all, one, ';')) {
    Shape s;
    std::stringstream dims(one);
    std::string d;
    while (std::getline(dims, d, ',')) {
      if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos) return {};
      s.push_back(std::stoll(d));
    }
    out.push_back(s);
  }
  if (field.back() == ';') out.emplace_back();
  return out;
}

std::vector<std::string> list(const std::string& field) {
  std::vector<std::string> out;
  std::stringstream s(field);
  for (std::string d; std::getline(s, d, ';');) out.push_back(d);
  return out;
}

at::Tensor meta(const Shape& s, at::ScalarType t) { return at::empty(s, at::TensorOptions().dtype(t).device(at::kMeta)); }

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

at::ScalarType dtypeOf(const std::string& ascend) {
  if (ascend == "FLOAT16" || ascend == "DT_FLOAT16") return at::kHalf;
  if (ascend == "BF16" || ascend == "BFLOAT16" || ascend == "DT_BF16") return at::kBFloat16;
  if (ascend == "INT32" || ascend == "DT_INT32") return at::kInt;
  if (ascend == "INT64" || ascend == "DT_INT64" || ascend == "UINT64") return at::kLong;
  if (ascend == "BOOL" || ascend == "DT_BOOL") return at::kBool;
  if (ascend == "UINT8" || ascend == "DT_UINT8") return at::kByte;
  if (ascend == "INT8") return at::kChar;
  if (ascend == "DOUBLE" || ascend == "DT_DOUBLE") return at::kDouble;
  return at::kFloat;
}

// The aten op a kernel type implements (what the emulator records and costs); empty: not costed.
std::string atenOf(const std::string& type) {
  static const std::map<std::string, std::string> kMap = {
      {"Relu", "aten::relu"}, {"ReluGrad", "aten::threshold_backward"}, {"Mul", "aten::mul"},
      {"Muls", "aten::mul"}, {"Add", "aten::add"}, {"Adds", "aten::add"}, {"Sub", "aten::sub"},
      {"RealDiv", "aten::div"}, {"Div", "aten::div"}, {"Cast", "aten::_to_copy"}, {"Equal", "aten::eq"},
      {"MaxPoolWithArgmaxV1", "aten::max_pool2d_with_indices"},
      {"MaxPoolGradWithArgmaxV1", "aten::max_pool2d_with_indices_backward"}, {"ReduceSum", "aten::sum"},
      {"ReduceMean", "aten::mean"}, {"TensorMove", "aten::clone"}, {"MemSet", "aten::zero_"},
      {"ZerosLike", "aten::zero_"}, {"DropOutDoMask", "aten::mul"},
      {"LogSoftmaxV2", "aten::_log_softmax"}, {"LogSoftmaxGrad", "aten::_log_softmax_backward_data"},
      {"SoftmaxV2", "aten::_softmax"}, {"NLLLoss", "aten::nll_loss_forward"},
      {"NLLLossGrad", "aten::nll_loss_backward"}, {"AdaptiveAvgPool3d", "aten::_adaptive_avg_pool2d"},
      {"AdaptiveAvgPool3dGrad", "aten::_adaptive_avg_pool2d_backward"}, {"OnesLike", "aten::ones_like"},
      {"Fill", "aten::fill_"}, {"BroadcastTo", "aten::clone"}, {"TopKV2", "aten::topk"},
      {"ForeachAddList", "aten::_foreach_add_"}, {"ForeachMulScalar", "aten::_foreach_mul_"},
      {"GatherV2", "aten::index_select"}, {"Sqrt", "aten::sqrt"}, {"Neg", "aten::neg"},
      {"Sigmoid", "aten::sigmoid"}, {"Exp", "aten::exp"}, {"Cos", "aten::cos"}, {"Sin", "aten::sin"},
      {"Abs", "aten::abs"}, {"Pows", "aten::pow"}, {"NotEqual", "aten::ne"}, {"Greater", "aten::gt"},
      {"Slice", "aten::slice"}, {"StridedSlice", "aten::slice"}, {"ConcatD", "aten::cat"},
      {"LpNormV2", "aten::norm"}, {"EmbeddingDenseGradV2", "aten::embedding_dense_backward"},
      {"Transpose", "npu::npu_transpose"},
      // torch_npu's fused ops and their backward (the names torch_npu gives them).
      {"RmsNorm", "npu::npu_rms_norm"}, {"RmsNormGrad", "npu::npu_rms_norm_backward"},
      {"SwiGlu", "npu::npu_swiglu"}, {"SwiGluGrad", "npu::npu_swiglu_backward"},
      {"RotaryPositionEmbedding", "npu::npu_rotary_mul"}, {"RotaryPositionEmbeddingGrad", "npu::npu_rotary_mul_backward"},
      {"FlashAttentionScore", "npu::npu_fusion_attention"}, {"FlashAttentionScoreGrad", "npu::npu_fusion_attention_grad"},
      {"ApplyAdamWV2", "npu::npu_apply_adam_w"}, {"ArgMaxWithValue", "aten::max"},
  };
  auto it = kMap.find(type);
  return it == kMap.end() ? "" : it->second;
}

bool isCommunication(const RealKernel& k) {
  return k.type.rfind("hcom_", 0) == 0 || k.core == "COMMUNICATION" || k.core == "HCCL";
}

}  // namespace

int64_t modeledKernelNs(const RealKernel& k) {
  const std::vector<Shape> in = shapes(k.input_shapes), out = shapes(k.output_shapes);
  const std::vector<std::string> in_dtypes = list(k.input_dtypes);
  const at::ScalarType dt = in_dtypes.empty() ? at::kFloat : dtypeOf(in_dtypes[0]);
  const std::string& type = k.type;
  if (type == "Conv2D" || type == "Conv2DBackpropFilter" || type == "Conv2DBackpropInput") {
    // NC1HWC0 activations, FRACTAL_Z weights (C1*KH*KW, Cout/16, 16, C0): back to NCHW and
    // OIHW. Channels stay padded to C0, as the Cube computes them. Each backward kernel does a
    // forward convolution's FLOPs (the model charges convolution_backward for both halves).
    if (in.empty() || out.empty() || (type == "Conv2D" ? in.size() < 2 : in.size() < 3)) return -1;
    const Shape& x = type == "Conv2DBackpropInput" ? out[0] : in[0];
    const Shape& dy = type == "Conv2D" ? out[0] : in[2];
    const Shape& w = type == "Conv2D" ? in[1] : type == "Conv2DBackpropInput" ? in[1] : out[0];
    if (x.size() != 5 || dy.size() != 5 || w.size() != 4 || x[1] <= 0) return -1;
    const int64_t cin = x[1] * x[4], cout = dy[1] * dy[4];
    const int64_t kk = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(w[0] / x[1]))));
    const std::vector<at::Tensor> inputs = {meta({x[0], cin, x[2], x[3]}, dt), meta({cout, cin, kk, kk}, dt)};
    const std::vector<at::Tensor> outputs = {meta({dy[0], cout, dy[2], dy[3]}, dt)};
    // The export lists the TransData around it as kernels of their own: costed there.
    OpWork work = estimate_op_work("aten::convolution", inputs, outputs);
    work.format_act_tasks = work.format_weight_tasks = 0;
    return modeled_duration_ns(work);
  }
  if (type == "MatMulV2" || type == "MatMulV3" || type == "MatMul") {
    // out [M, N] = a (M x K, stored either way round) @ b: K from a's size. In FRACTAL_NZ the
    // output is [N / 16, M / 16, 16, 16].
    if (in.size() < 2 || out.empty()) return -1;
    const Shape& o = out[0];
    const bool nz = k.output_formats.find("FRACTAL_NZ") != std::string::npos && o.size() == 4;
    if (!nz && o.size() != 2) return -1;
    const int64_t m = nz ? o[1] * o[2] : o[0], n = nz ? o[0] * o[3] : o[1];
    if (m <= 0 || n <= 0) return -1;
    const int64_t kk = numel(in[0]) / m;
    const std::vector<at::Tensor> inputs = {meta({m, kk}, dt), meta({kk, n}, dt)};
    return modeled_duration_ns(estimate_op_work("aten::mm", inputs, {meta({m, n}, dt)}));
  }
  if (type == "BatchMatMulV2" || type == "BatchMatMul" || type == "BatchMatMulV3") {
    // out [..., M, N]: batch from the output, K from a's size per batch.
    if (in.size() < 2 || out.empty() || out[0].size() < 3) return -1;
    const Shape& o = out[0];
    const int64_t m = o[o.size() - 2], n = o[o.size() - 1], batch = numel(o) / std::max<int64_t>(1, m * n);
    if (m <= 0 || batch <= 0) return -1;
    const int64_t kk = numel(in[0]) / (batch * m);
    const std::vector<at::Tensor> inputs = {meta({batch, m, kk}, dt), meta({batch, kk, n}, dt)};
    return modeled_duration_ns(estimate_op_work("aten::bmm", inputs, {meta({batch, m, n}, dt)}));
  }
  if (in.empty() && out.empty()) return -1;  // no shapes (MemSet): nothing to cost it from
  const std::vector<std::string> out_dtypes = list(k.output_dtypes);
  auto dtypeAt = [&](const std::vector<std::string>& l, size_t i) { return i < l.size() ? dtypeOf(l[i]) : dt; };
  if (type == "TransData") {
    // torch_npu's format conversions, which PyTorch has no op for: an activation between NCHW
    // and NC1HWC0, or a weight to / from FRACTAL_Z (a costlier reshuffle).
    OpWork w;
    w.unit = ComputeUnit::kMemory;
    const std::string formats = k.input_formats + ";" + k.output_formats;
    w.kind = formats.find("FRACTAL_NZ") != std::string::npos  ? VectorKind::kFormatMatrix
             : formats.find("FRACTAL_Z") != std::string::npos ? VectorKind::kFormatWeight
                                                              : VectorKind::kFormatActivation;
    for (size_t i = 0; i < in.size(); ++i) w.bytes += static_cast<double>(numel(in[i])) * at::elementSize(dtypeAt(in_dtypes, i));
    for (size_t i = 0; i < out.size(); ++i) w.out_bytes += static_cast<double>(numel(out[i])) * at::elementSize(dtypeAt(out_dtypes, i));
    w.bytes += w.out_bytes;
    return modeled_duration_ns(w);
  }
  const std::string op = atenOf(type);
  if (op.empty()) return -1;
  std::vector<at::Tensor> inputs, outputs;
  for (size_t i = 0; i < in.size(); ++i) inputs.push_back(meta(in[i], dtypeAt(in_dtypes, i)));
  for (size_t i = 0; i < out.size(); ++i) outputs.push_back(meta(out[i], dtypeAt(out_dtypes, i)));
  return modeled_duration_ns(estimate_op_work(op, inputs, outputs));
}

double Calibration::uncostedShare() const {
  double us = 0;
  for (const auto& [type, t] : uncosted) us += t;
  return compute_us > 0 ? us / compute_us : 0;
}

std::vector<std::string> Calibration::typesOutside(double share, double low, double high) const {
  std::vector<std::string> out;
  for (const CalibrationType& t : types) {
    if (compute_us > 0 && t.real_us / compute_us >= share && (t.geomean < low || t.geomean > high)) out.push_back(t.type);
  }
  return out;
}

Calibration calibrate(const std::vector<RealKernel>& kernels) {
  struct Acc {
    std::vector<double> r;
    double real_us = 0, model_us = 0;
  };
  std::map<std::string, Acc> by_type;
  std::map<std::string, double> uncosted;
  Calibration c;
  double log_sum = 0;
  std::vector<double> all;
  for (const RealKernel& k : kernels) {
    if (isCommunication(k)) continue;
    c.compute_us += k.real_us;
    const int64_t ns = k.real_us > 0 ? modeledKernelNs(k) : -1;
    if (ns <= 0) {
      uncosted[k.type] += k.real_us;
      continue;
    }
    const double model_us = static_cast<double>(ns) / 1e3, ratio = model_us / k.real_us;
    Acc& a = by_type[k.type];
    a.r.push_back(ratio);
    a.real_us += k.real_us;
    a.model_us += model_us;
    c.real_us += k.real_us;
    c.model_us += model_us;
    all.push_back(ratio);
    log_sum += std::log(ratio);
  }
  c.costed = static_cast<int64_t>(all.size());
  if (!all.empty()) {
    const double mean = log_sum / static_cast<double>(all.size());
    double var = 0;
    for (double r : all) var += (std::log(r) - mean) * (std::log(r) - mean);
    c.geomean = std::exp(mean);
    c.geometric_sd = std::exp(std::sqrt(var / static_cast<double>(all.size())));
  }
  for (auto& [type, a] : by_type) {
    CalibrationType t;
    t.type = type;
    t.calls = static_cast<int64_t>(a.r.size());
    t.real_us = a.real_us;
    t.model_us = a.model_us;
    double s = 0;
    for (double r : a.r) s += std::log(r);
    t.geomean = std::exp(s / static_cast<double>(a.r.size()));
    t.min = *std::min_element(a.r.begin(), a.r.end());
    t.max = *std::max_element(a.r.begin(), a.r.end());
    c.types.push_back(t);
  }
  std::stable_sort(c.types.begin(), c.types.end(), [](const auto& a, const auto& b) { return a.real_us > b.real_us; });
  c.uncosted.assign(uncosted.begin(), uncosted.end());
  std::stable_sort(c.uncosted.begin(), c.uncosted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return c;
}

}  // namespace npuscope::npu
