#include "npuscope/store/memory_category.h"

namespace npuscope {
namespace {

const char* const kNames[kMemoryCategoryCount] = {
    "untagged", "parameter", "master_weight", "gradient", "optimizer_state",
    "activation", "cast_cache", "temporary", "dump_staging", "other"};

}  // namespace

const char* memoryCategoryName(MemoryCategory category) {
  const int i = static_cast<int>(category);
  return i >= 0 && i < kMemoryCategoryCount ? kNames[i] : kNames[0];
}

StatusOr<MemoryCategory> parseMemoryCategory(const std::string& name) {
  for (int i = 0; i < kMemoryCategoryCount; ++i) {
    if (name == kNames[i]) return static_cast<MemoryCategory>(i);
  }
  std::string all;
  for (int i = 1; i < kMemoryCategoryCount; ++i) all += std::string(i > 1 ? ", " : "") + kNames[i];
  return invalidArgument("memory category '" + name + "' is not one of " + all);
}

}  // namespace npuscope
