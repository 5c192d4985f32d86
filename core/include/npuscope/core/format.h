// Human-readable renderings shared by messages, the CLI and the GUI.
#pragma once

#include <cstdint>
#include <string>

namespace npuscope {

// 1536 -> "1.50 KiB"; exact bytes below 1 KiB ("512 B").
std::string formatBytes(uint64_t bytes);

}  // namespace npuscope
