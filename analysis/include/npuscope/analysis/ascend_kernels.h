// How torch_npu names what an aten op runs on the card: the kernel's op type (the `Type` column
// of kernel_details.csv: Conv2D, MatMulV2, Add, ...) and the core it runs on (`Accelerator
// Core`: AI_CORE for the Cube, AI_VECTOR_CORE, HCCL for collectives), and how it prints tensor
// descriptions (data types FLOAT / FLOAT16 / DT_BF16, shapes "32,3,224,224;64,3,11,11").
// The ascend_pt writer names the predicted timeline's kernels with these, so an export reads like
// a real card's and compares against one by op type.
#pragma once

#include <string>
#include <string_view>

namespace npuscope {

struct AscendKernel {
  std::string type;  // "Conv2D"
  const char* core;  // "AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "HCCL"
};

// The kernel an op (as the recorder names it: "aten::addmm", "npu::npu_rms_norm",
// "hcom_allReduce_") runs as. Ops without a table entry: their name without its namespace in
// CamelCase ("aten::index_select" -> "IndexSelect") on the vector core.
AscendKernel ascendKernelFor(std::string_view op_name);

// A recorded dtype ("float", "c10::Half", "long int") as CANN prints it ("FLOAT", "FLOAT16",
// "INT64"); "" for what is not a tensor (Scalar, None, empty).
std::string ascendDataType(std::string_view recorded);

// The tensor inputs of a recorded op as kernel_details.csv lists them: shapes "32,3,224,224;1000"
// (tensors only, scalars left out), their data types "FLOAT;FLOAT" and formats ("NCHW" for 4-D,
// "ND" otherwise). Empty strings when the op's inputs were not recorded.
struct AscendTensorList {
  std::string shapes, dtypes, formats;
};
AscendTensorList ascendInputs(std::string_view shapes, std::string_view dtypes);

}  // namespace npuscope
