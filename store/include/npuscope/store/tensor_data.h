// Dumped tensors' data as the trace file keeps it: element types, raw little-endian buffers
// decoded to doubles, shapes as text, the statistics the dumper stores, and the stored payload
// (zstd-compressed or not) back to its bytes. One implementation for the dumper (which writes
// them), analysis (which compares them) and the GUI (which draws them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/status.h"

namespace npuscope::tensor {

// Element types of dumped tensors. Names (dtypeName / parseDType) are the `tensor_dumps.dtype`
// texts: float32 float16 bfloat16 float64 int8 uint8 int16 int32 int64 bool.
enum class DType { kUnknown, kFloat32, kFloat16, kBFloat16, kFloat64, kInt8, kUInt8, kInt16, kInt32, kInt64, kBool };

DType parseDType(std::string_view name);  // kUnknown for anything else
const char* dtypeName(DType t);           // "unknown" for kUnknown
size_t dtypeSize(DType t);                // bytes per element; 0 for kUnknown
bool isFloating(DType t);
// The Ascend dump header's data_type enum (DT_FLOAT=1, DT_FLOAT16=2, DT_BF16=27, ...); 0 unknown.
int aclDataType(DType t);
DType fromAclDataType(int acl);

float halfToFloat(uint16_t h);
float bfloat16ToFloat(uint16_t h);
// Element i of a raw little-endian buffer as a double.
double elementAt(const uint8_t* data, DType t, size_t i);
// All `count` elements as doubles.
std::vector<double> toDoubles(const uint8_t* data, DType t, size_t count);

// "[2, 3]" -> {2, 3}; "[]" -> {} (a scalar). kInvalidArgument for anything else.
StatusOr<std::vector<int64_t>> parseShape(std::string_view text);
std::string formatShape(const std::vector<int64_t>& dims);

// Statistics as the dumper stores them. min/max/mean/l2norm are over the non-NaN elements
// (so an inf shows as max = inf); all four are NaN when there is none. count: elements.
struct TensorStats {
  double min = 0, max = 0, mean = 0, l2norm = 0;
  int64_t nan_count = 0, inf_count = 0, count = 0;
};
TensorStats computeStats(const uint8_t* data, DType t, size_t count);

// Payload bytes of a stored dump (decompressed when the dumper zstd-compressed them).
StatusOr<std::vector<uint8_t>> decodeDumpPayload(const std::vector<uint8_t>& stored, bool zstd_frame);

// A stored payload's elements as doubles: decoded (decodeDumpPayload), then read as `dtype`.
// kInvalidArgument for an unknown dtype or a payload that does not decode.
StatusOr<std::vector<double>> decodeDumpValues(const std::vector<uint8_t>& stored, bool zstd_frame, DType dtype);

}  // namespace npuscope::tensor
