// What a device memory block holds: the categories of memory by owner (schema 10's
// memory_blocks.category). The device runtime tags blocks with them, the recorder infers the
// untagged ones' (docs/memory.md), readers name them.
#pragma once

#include <cstdint>
#include <string>

#include "npuscope/store/status.h"

namespace npuscope {

enum class MemoryCategory : uint8_t {
  kUntagged = 0,
  kParameter,        // the model's parameters (fp16/bf16 model copy under amp O2/O3)
  kMasterWeight,     // fp32 master weights (amp O2)
  kGradient,         // parameters' gradients, combined-grad buffers, master gradients
  kOptimizerState,   // optimizer state (fused: combined state buffers)
  kActivation,       // forward results kept for the backward pass (autograd saved tensors)
  kCastCache,        // low-precision copies cached by autocast
  kTemporary,        // workspace and intermediates that die within their phase
  kDumpStaging,      // copies the dumper holds while writing
  kOther,            // allocated outside any op, buffers, inputs kept across steps
};
constexpr int kMemoryCategoryCount = 10;

// "untagged", "parameter", "master_weight", "gradient", "optimizer_state", "activation",
// "cast_cache", "temporary", "dump_staging", "other"; "untagged" for a value out of range.
const char* memoryCategoryName(MemoryCategory category);
inline const char* memoryCategoryName(int category) {
  return memoryCategoryName(static_cast<MemoryCategory>(category));
}
// The category of one of those names; an error naming the text and the names otherwise.
StatusOr<MemoryCategory> parseMemoryCategory(const std::string& name);

}  // namespace npuscope
