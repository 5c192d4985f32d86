#include "npuscope/analysis/ascend_kernels.h"

#include <array>
#include <utility>
#include <vector>

#include "npuscope/store/format.h"

namespace npuscope {
namespace {

struct Entry {
  std::string_view op;
  std::string_view type;
  const char* core;
};

constexpr const char* kCube = "AI_CORE";
constexpr const char* kVector = "AI_VECTOR_CORE";

// The kernels torch_npu (aclnn / ACL op adapters) launches for these ops, from real exports
// (kernel_details.csv of ../shared/data/traces) and torch_npu's op plugin. One kernel per op:
// what a card splits further (a convolution's TransData, a backward's input and weight halves)
// the cost model costs as one.
constexpr std::array kTable = {
    Entry{"aten::convolution", "Conv2D", kCube},
    Entry{"aten::_convolution", "Conv2D", kCube},
    Entry{"aten::convolution_overrideable", "Conv2D", kCube},
    Entry{"aten::convolution_backward", "Conv2DBackpropFilter", kCube},
    Entry{"aten::convolution_backward_overrideable", "Conv2DBackpropFilter", kCube},
    Entry{"aten::mm", "MatMulV2", kCube},
    Entry{"aten::addmm", "MatMulV2", kCube},
    Entry{"aten::matmul", "MatMulV2", kCube},
    Entry{"aten::linear", "MatMulV2", kCube},
    Entry{"aten::bmm", "BatchMatMulV2", kCube},
    Entry{"aten::baddbmm", "BatchMatMulV2", kCube},
    Entry{"aten::add", "Add", kVector},
    Entry{"aten::add_", "Add", kVector},
    Entry{"aten::sub", "Sub", kVector},
    Entry{"aten::sub_", "Sub", kVector},
    Entry{"aten::rsub", "Sub", kVector},
    Entry{"aten::mul", "Mul", kVector},
    Entry{"aten::mul_", "Mul", kVector},
    Entry{"aten::div", "RealDiv", kVector},
    Entry{"aten::div_", "RealDiv", kVector},
    Entry{"aten::relu", "Relu", kVector},
    Entry{"aten::relu_", "Relu", kVector},
    Entry{"aten::threshold_backward", "ReluGrad", kVector},
    Entry{"aten::gelu", "Gelu", kVector},
    Entry{"aten::gelu_backward", "GeluGrad", kVector},
    Entry{"aten::silu", "Swish", kVector},
    Entry{"aten::sigmoid", "Sigmoid", kVector},
    Entry{"aten::tanh", "Tanh", kVector},
    Entry{"aten::_to_copy", "Cast", kVector},
    Entry{"aten::to", "Cast", kVector},
    Entry{"aten::_copy_from", "TensorMove", kVector},
    Entry{"aten::_local_scalar_dense", "MEMCPY_ASYNC", "PCIE_DMA_SQE"},  // .item(): a copy to the host
    Entry{"aten::copy_", "TensorMove", kVector},
    Entry{"aten::clone", "TensorMove", kVector},
    Entry{"aten::contiguous", "Transpose", kVector},
    Entry{"aten::eq", "Equal", kVector},
    Entry{"aten::max_pool2d_with_indices", "MaxPoolWithArgmaxV1", kVector},
    Entry{"aten::max_pool2d_with_indices_backward", "MaxPoolGradWithArgmaxV1", kVector},
    Entry{"aten::avg_pool2d", "AvgPoolV2", kVector},
    Entry{"aten::_adaptive_avg_pool2d", "AdaptiveAvgPool3d", kVector},
    Entry{"aten::_adaptive_avg_pool2d_backward", "AdaptiveAvgPool3dGrad", kVector},
    Entry{"aten::sum", "ReduceSum", kVector},
    Entry{"aten::mean", "ReduceMean", kVector},
    Entry{"aten::zero_", "MemSet", kVector},
    Entry{"aten::fill_", "Fill", kVector},
    Entry{"aten::ones_like", "OnesLike", kVector},
    Entry{"aten::_log_softmax", "LogSoftmaxV2", kVector},
    Entry{"aten::_log_softmax_backward_data", "LogSoftmaxGrad", kVector},
    Entry{"aten::_softmax", "SoftmaxV2", kVector},
    Entry{"aten::_softmax_backward_data", "SoftmaxGrad", kVector},
    Entry{"aten::nll_loss_forward", "NLLLoss", "MIX_AIV"},
    Entry{"aten::nll_loss_backward", "NLLLossGrad", kVector},
    Entry{"aten::native_batch_norm", "BNTrainingUpdate", kVector},
    Entry{"aten::native_batch_norm_backward", "BNTrainingUpdateGrad", kVector},
    Entry{"aten::native_layer_norm", "LayerNormV3", kVector},
    Entry{"aten::native_layer_norm_backward", "LayerNormGrad", kVector},
    Entry{"aten::embedding", "GatherV2", kVector},
    Entry{"aten::index_select", "GatherV2", kVector},
    Entry{"aten::topk", "TopKV2", "MIX_AIV"},
    Entry{"aten::sqrt", "Sqrt", kVector},
    Entry{"aten::_foreach_add_", "ForeachAddList", kVector},
    Entry{"aten::_foreach_mul_", "ForeachMulScalar", kVector},
    Entry{"npu::npu_rms_norm", "RmsNorm", kVector},
    Entry{"npu::npu_rotary_mul", "RotaryMul", kVector},
    Entry{"npu::npu_swiglu", "SwiGlu", kVector},
    Entry{"npu::fast_gelu", "FastGelu", kVector},
    Entry{"npu::npu_confusion_transpose", "ConfusionTransposeD", kVector},
    Entry{"npu::npu_scaled_masked_softmax", "ScaledMaskedSoftmax", kVector},
    Entry{"npu::npu_fusion_attention", "FlashAttentionScore", "MIX_AIC"},
};


// "aten::index_select" -> "IndexSelect"; a trailing "_" (in place) is dropped.
std::string camel(std::string_view name) {
  const size_t colon = name.rfind("::");
  if (colon != std::string_view::npos) name.remove_prefix(colon + 2);
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_' || c == '.') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return out.empty() ? std::string(name) : out;
}

}  // namespace

AscendKernel ascendKernelFor(std::string_view op_name) {
  if (startsWith(op_name, "hcom_")) return {std::string(op_name), "HCCL"};
  for (const Entry& e : kTable) {
    if (e.op == op_name) return {std::string(e.type), e.core};
  }
  return {camel(op_name), kVector};
}

std::string ascendDataType(std::string_view t) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {"float", "FLOAT"},        {"c10::Half", "FLOAT16"}, {"c10::BFloat16", "DT_BF16"}, {"double", "DOUBLE"},
      {"long int", "INT64"},     {"long", "INT64"},        {"int", "INT32"},             {"short int", "INT16"},
      {"signed char", "INT8"},   {"unsigned char", "UINT8"}, {"bool", "BOOL"},
      {"c10::complex<float>", "COMPLEX64"},
  };
  for (const auto& [from, to] : kTypes) {
    if (t == from) return std::string(to);
  }
  if (t.empty() || t == "Scalar" || t == "None" || t == "ScalarList" || t == "TensorList") return "";
  return std::string(t);
}

AscendTensorList ascendInputs(std::string_view shapes, std::string_view dtypes) {
  AscendTensorList out;
  // Top-level entries of "[[32, 3], [], [[1], [2]]]": each entry's text between its brackets.
  std::vector<std::string_view> entries;
  if (shapes.size() >= 2 && shapes.front() == '[') {
    int depth = 0;
    size_t begin = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const char c = shapes[i];
      if (c == '[') {
        if (++depth == 2) begin = i + 1;
      } else if (c == ']') {
        if (depth-- == 2) entries.push_back(shapes.substr(begin, i - begin));
      }
    }
  }
  std::vector<std::string_view> types;
  for (size_t at = 0; at <= dtypes.size();) {
    size_t comma = dtypes.find(',', at);
    if (comma == std::string_view::npos) comma = dtypes.size();
    std::string_view t = dtypes.substr(at, comma - at);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    types.push_back(t);
    at = comma + 1;
  }
  bool first = true;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string type = ascendDataType(i < types.size() ? types[i] : std::string_view());
    if (type.empty() || entries[i].find('[') != std::string_view::npos) continue;  // scalars, lists
    if (!first) out.shapes += ';', out.dtypes += ';', out.formats += ';';
    first = false;
    int dims = entries[i].empty() ? 0 : 1;
    for (char c : entries[i]) {
      if (c == ',') ++dims;
      if (c != ' ') out.shapes += c;
    }
    out.dtypes += type;
    out.formats += dims == 4 ? "NCHW" : "ND";
  }
  return out;
}

}  // namespace npuscope
