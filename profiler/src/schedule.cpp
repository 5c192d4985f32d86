// torch.profiler's schedule (session.h): torch-free, so the fuzz build takes it alone.
#include <sstream>
#include <stdexcept>
#include <string>

#include "npuscope/profiler/session.h"

namespace npuscope::profiler {

Schedule::Action Schedule::actionFor(int64_t step) const {
  if (step < skip_first) return Action::kNone;
  const int64_t j = step - skip_first;
  const int64_t cycle = static_cast<int64_t>(wait) + warmup + active;
  if (cycle <= 0) return Action::kNone;
  if (repeat > 0 && j >= cycle * repeat) return Action::kNone;
  const int64_t p = j % cycle;
  if (p < wait) return Action::kNone;
  if (p < static_cast<int64_t>(wait) + warmup) return Action::kWarmup;
  return Action::kRecord;
}

StatusOr<Schedule> Schedule::parse(const std::string& text) {
  Schedule s;
  s.active = 1 << 30;
  std::stringstream ss(text);
  std::string item;
  bool active_set = false;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      return invalidArgument("schedule '" + text + "': expected key=value pairs like wait=1,warmup=1,active=3");
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    int v = 0;
    try {
      size_t pos = 0;
      v = std::stoi(value, &pos);
      if (pos != value.size() || v < 0) throw std::invalid_argument(value);
    } catch (...) {
      return invalidArgument("schedule '" + text + "': " + key + " needs a whole number >= 0, not '" + value + "'");
    }
    if (key == "skip_first") s.skip_first = v;
    else if (key == "wait") s.wait = v;
    else if (key == "warmup") s.warmup = v;
    else if (key == "active") { s.active = v; active_set = true; }
    else if (key == "repeat") s.repeat = v;
    else return invalidArgument("schedule '" + text + "': unknown key '" + key +
                                "' (expected skip_first, wait, warmup, active, repeat)");
  }
  if (active_set && s.active == 0) return invalidArgument("schedule '" + text + "': active must be at least 1");
  return s;
}

}  // namespace npuscope::profiler
