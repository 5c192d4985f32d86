// Conversions between fp32 and the device's low-precision formats (fp16, bf16) over contiguous
// buffers: one pass, vectorised with F16C where the CPU has it, multi-threaded for large
// tensors. The rounding is IEEE round-to-nearest-even, as libtorch's own casts.
#pragma once

#include <cstdint>

namespace npuscope::npu::aten {

void halfToFloat(const uint16_t* src, float* dst, int64_t n);
void bfloat16ToFloat(const uint16_t* src, float* dst, int64_t n);

// Rounds n floats to fp16/bf16. `saturate`: values beyond the format's finite range clamp to
// its max and NaN becomes 0 (Ascend saturation mode). Returns true when the input had a value
// the format cannot hold (|x| > max after rounding, inf or NaN): an overflow.
bool floatToHalf(const float* src, uint16_t* dst, int64_t n, bool saturate);
bool floatToBfloat16(const float* src, uint16_t* dst, int64_t n, bool saturate);

}  // namespace npuscope::npu::aten
