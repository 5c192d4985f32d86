#include "npuscope/device/device_log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace npuscope::npu {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kError)};
std::atomic<bool> g_stdout{false};
std::once_flag g_once;

void loadFromEnv() {
  int level = static_cast<int>(LogLevel::kError);
  if (const char* v = std::getenv("ASCEND_GLOBAL_LOG_LEVEL")) {
    if (v[0] >= '0' && v[0] <= '4' && v[1] == '\0') level = v[0] - '0';
  }
  g_level.store(level);
  const char* out = std::getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
  g_stdout.store(out && std::strcmp(out, "1") == 0);
}

void ensureLoaded() { std::call_once(g_once, loadFromEnv); }

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
    default: return "NONE";
  }
}

}  // namespace

LogLevel log_level() {
  ensureLoaded();
  return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed));
}
void set_log_level(LogLevel level) {
  ensureLoaded();
  g_level.store(static_cast<int>(level));
}
bool log_enabled(LogLevel level) {
  return level != LogLevel::kNone && static_cast<int>(level) >= static_cast<int>(log_level());
}
void reload_log_config() {
  ensureLoaded();
  loadFromEnv();
}

void log_line(LogLevel level, const std::string& message) {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm t{};
  localtime_r(&tv.tv_sec, &t);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02d-%02d:%02d:%02d.%03ld", t.tm_year + 1900, t.tm_mon + 1,
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec / 1000));
  FILE* out = g_stdout.load() ? stdout : stderr;
  std::fprintf(out, "[%s] NPU(%d):%s %s\n", levelName(level), static_cast<int>(getpid()), stamp, message.c_str());
  std::fflush(out);
}

}  // namespace npuscope::npu
