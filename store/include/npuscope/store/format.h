// Human-readable renderings shared by messages, the CLI and the GUI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace npuscope {

// 1536 -> "1.50 KiB"; exact bytes below 1 KiB ("512 B").
std::string formatBytes(uint64_t bytes);
// Durations as the PyTorch profiler prints them, three decimals in the largest fitting unit:
// 999 -> "0.999us"; 1234 -> "1.234us"; 1234567 -> "1.235ms"; 2.5e9 -> "2.500s".
std::string formatDuration(int64_t ns);
// `v` with `decimals` digits after the point ("12.346").
std::string formatFixed(double v, int decimals);
// `v` as a std::ostream prints it by default (%g: six significant digits, no trailing zeros):
// 65536 -> "65536", 0.5 -> "0.5", 1e-7 -> "1e-07".
std::string formatGeneral(double v);
// Whether `s` begins with `prefix`.
inline bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
// The size syntax of the NPUSCOPE_* variables: bytes, or a number with K, M, G or T (binary
// units), e.g. "512M", "1.5G"; `fallback` for an empty, malformed or non-positive text.
uint64_t parseBytes(const char* text, uint64_t fallback);

}  // namespace npuscope
