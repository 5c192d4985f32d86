// Devices, the environment that shapes them, and the calling thread's current device.
#include <cstdlib>
#include <sstream>

#include "npuscope/device/device_log.h"
#include "npuscope/device/runtime.h"

namespace npuscope::npu {
namespace {

struct Registry {
  Status status;
  std::vector<int> physical;  // logical index -> physical id
  int default_device = 0;
};

StatusOr<int> parseInt(const std::string& text) {
  if (text.empty()) return invalidArgument("empty number");
  size_t pos = 0;
  int v = 0;
  try {
    v = std::stoi(text, &pos);
  } catch (...) {
    return invalidArgument("'" + text + "' is not a number");
  }
  if (pos != text.size()) return invalidArgument("'" + text + "' is not a number");
  return v;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

Registry build() {
  Registry r;
  int count = 8;
  if (const char* env = std::getenv("NPUSCOPE_NPU_COUNT")) {
    auto v = parseInt(trim(env));
    if (!v.isOk() || *v < 1 || *v > kMaxDevices) {
      r.status = invalidArgument("NPUSCOPE_NPU_COUNT='" + std::string(env) +
                                 "': expected a whole number from 1 to " + std::to_string(kMaxDevices));
      return r;
    }
    count = *v;
  }
  if (const char* env = std::getenv("ASCEND_RT_VISIBLE_DEVICES")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto v = parseInt(trim(item));
      if (!v.isOk() || *v < 0 || *v >= count) {
        r.status = invalidArgument("ASCEND_RT_VISIBLE_DEVICES='" + std::string(env) + "': '" + item +
                                   "' is not a device id from 0 to " + std::to_string(count - 1));
        r.physical.clear();
        return r;
      }
      for (int seen : r.physical) {
        if (seen == *v) {
          r.status = invalidArgument("ASCEND_RT_VISIBLE_DEVICES='" + std::string(env) +
                                     "': device " + item + " is listed twice");
          r.physical.clear();
          return r;
        }
      }
      r.physical.push_back(*v);
    }
  } else {
    for (int i = 0; i < count; ++i) r.physical.push_back(i);
  }
  if (const char* env = std::getenv("ASCEND_DEVICE_ID")) {
    auto v = parseInt(trim(env));
    if (!v.isOk() || *v < 0 || *v >= static_cast<int>(r.physical.size())) {
      r.status = invalidArgument("ASCEND_DEVICE_ID='" + std::string(env) + "': expected a device from 0 to " +
                                 std::to_string(static_cast<int>(r.physical.size()) - 1));
      r.physical.clear();
      return r;
    }
    r.default_device = *v;
  }
  return r;
}

const Registry& registry() {
  static const Registry r = [] {
    Registry built = build();
    if (!built.status.isOk()) {
      NPU_LOG(kError) << built.status.message();
    } else {
      std::string ids;
      for (int p : built.physical) ids += (ids.empty() ? "" : ",") + std::to_string(p);
      NPU_LOG(kInfo) << "npu runtime: " << built.physical.size() << " visible device(s) (physical " << ids
                     << "), default npu:" << built.default_device;
    }
    return built;
  }();
  return r;
}

thread_local int t_current_device = -1;

}  // namespace

thread_local int InternalScope::depth_ = 0;

const Status& environment_status() { return registry().status; }

int device_count() { return static_cast<int>(registry().physical.size()); }

int physical_id(int device) {
  const auto& r = registry();
  return device >= 0 && device < static_cast<int>(r.physical.size()) ? r.physical[device] : -1;
}

int current_device() {
  if (t_current_device < 0) t_current_device = registry().default_device;
  return t_current_device;
}

Status check_device(int device) {
  const auto& r = registry();
  if (!r.status.isOk()) return r.status;
  if (device < 0 || device >= static_cast<int>(r.physical.size())) {
    return invalidArgument("npu:" + std::to_string(device) + " does not exist: " +
                           std::to_string(r.physical.size()) + " npu device(s) are visible (npu:0 to npu:" +
                           std::to_string(static_cast<int>(r.physical.size()) - 1) + ")");
  }
  return Status::ok();
}

Status set_device(int device) {
  RETURN_IF_ERROR(check_device(device));
  t_current_device = device;
  return Status::ok();
}

std::string device_name(int device) { return "npu:" + std::to_string(device); }

StatusOr<int> parse_device(const std::string& text) {
  std::string t = trim(text);
  std::string num;
  if (t == "npu") return current_device();
  if (t.rfind("npu:", 0) == 0) {
    num = t.substr(4);
  } else {
    num = t;
  }
  auto v = parseInt(num);
  if (!v.isOk() || *v < 0) {
    return invalidArgument("device '" + text + "': expected npu, npu:N or N");
  }
  RETURN_IF_ERROR(check_device(*v));
  return *v;
}

}  // namespace npuscope::npu
