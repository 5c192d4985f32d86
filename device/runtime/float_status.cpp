// The sticky float-status register, one per device, and the overflow mode.
#include <array>
#include <cstdlib>
#include <cstring>

#include "npuscope/device/runtime.h"

namespace npuscope::npu {
namespace {

bool envFlag(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "on") == 0);
}

OverflowMode initialMode() {
  if (const char* v = std::getenv("NPUSCOPE_OVERFLOW_MODE")) {
    auto m = parse_overflow_mode(v);
    if (m.isOk()) return *m;
  }
  return OverflowMode::kInfNan;
}

std::atomic<int> g_mode{static_cast<int>(initialMode())};
std::array<std::atomic<uint32_t>, kMaxDevices> g_status{};
std::atomic<OverflowSiteObserver> g_site_observer{nullptr};
std::atomic<bool> g_window_open{false};

}  // namespace

namespace detail {
std::atomic<bool> g_float_status_tracking{envFlag("NPUSCOPE_FLOAT_STATUS")};
}

OverflowMode overflow_mode() { return static_cast<OverflowMode>(g_mode.load(std::memory_order_relaxed)); }
void set_overflow_mode(OverflowMode mode) { g_mode.store(static_cast<int>(mode)); }

StatusOr<OverflowMode> parse_overflow_mode(const std::string& text) {
  if (text == "inf_nan") return OverflowMode::kInfNan;
  if (text == "saturation") return OverflowMode::kSaturation;
  return invalidArgument("overflow mode '" + text + "': expected inf_nan or saturation");
}

const char* overflow_mode_name(OverflowMode mode) {
  return mode == OverflowMode::kSaturation ? "saturation" : "inf_nan";
}

void set_float_status_tracking(bool on) { detail::g_float_status_tracking.store(on); }

bool get_float_status(int device) {
  return device >= 0 && device < kMaxDevices && g_status[device].load(std::memory_order_acquire) != 0;
}
void clear_float_status(int device) {
  if (device >= 0 && device < kMaxDevices) g_status[device].store(0, std::memory_order_release);
}
void raise_float_status(int device) {
  if (device >= 0 && device < kMaxDevices) g_status[device].store(1, std::memory_order_release);
}

void set_overflow_site_observer(OverflowSiteObserver observer) { g_site_observer.store(observer); }
OverflowSiteObserver overflow_site_observer() { return g_site_observer.load(std::memory_order_acquire); }
void open_overflow_window() { g_window_open.store(true, std::memory_order_release); }
bool take_overflow_window() {
  return g_window_open.load(std::memory_order_relaxed) && g_window_open.exchange(false, std::memory_order_acq_rel);
}

}  // namespace npuscope::npu
