// The device log, controlled as on Ascend:
//   ASCEND_GLOBAL_LOG_LEVEL      0 debug, 1 info, 2 warning, 3 error (default), 4 none
//   ASCEND_SLOG_PRINT_TO_STDOUT  1: lines go to stdout; otherwise to stderr
// Lines look like "[WARNING] NPU(1234,worker):2026-11-22-10:01:02.123 message".
#pragma once

#include <sstream>
#include <string>

namespace npuscope::npu {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kNone = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& message);
// Re-reads the two environment variables (tests change them).
void reload_log_config();

}  // namespace npuscope::npu

// NPU_LOG(kWarning) << "text"; formats nothing when the level is off.
#define NPU_LOG(level)                                                      \
  if (!::npuscope::npu::log_enabled(::npuscope::npu::LogLevel::level)) {   \
  } else                                                                    \
    ::npuscope::npu::detail_log::Line(::npuscope::npu::LogLevel::level).stream()

namespace npuscope::npu::detail_log {
class Line {
 public:
  explicit Line(LogLevel level) : level_(level) {}
  ~Line() { log_line(level_, os_.str()); }
  std::ostringstream& stream() { return os_; }

 private:
  LogLevel level_;
  std::ostringstream os_;
};
}  // namespace npuscope::npu::detail_log
