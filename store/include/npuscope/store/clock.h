// The one clock every record uses: monotonic nanoseconds.
#pragma once

#include <chrono>
#include <cstdint>

namespace npuscope {

inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace npuscope
