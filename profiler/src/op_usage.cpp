#include "npuscope/profiler/op_usage.h"

#include <ATen/record_function.h>

#include "npuscope/device/npu.h"

namespace npuscope::profiler {

namespace {
std::atomic<OpUsageCollector*> g_collector{nullptr};
}  // namespace

struct OpUsageCallback {
  static std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
    OpUsageCollector* c = g_collector.load();
    if (!c) return nullptr;
    const std::string name = fn.name();
    // Only the dispatcher's ops: autograd nodes (MulBackward0, ...) are scopes, not kernels.
    if (name.rfind("aten::", 0) != 0) return nullptr;
    OpUsage local;
    bool any_tensor = false, any_npu = false;
    for (const c10::IValue& v : fn.inputs()) {
      if (!v.isTensor() || !v.toTensor().defined()) continue;
      any_tensor = true;
      any_npu |= v.toTensor().device().type() == npu::kDeviceType;
      const auto st = v.toTensor().scalar_type();
      local.dtypes.insert(c10::toString(st));
      local.low_precision |= st == at::kHalf || st == at::kBFloat16;
      local.fp64 |= st == at::kDouble;
    }
    if (any_tensor && !any_npu) return nullptr;
    std::lock_guard<std::mutex> lock(c->mu_);
    OpUsage& u = c->ops_[name];
    ++u.calls;
    u.dtypes.insert(local.dtypes.begin(), local.dtypes.end());
    u.phases.insert(c->phase_.load());
    u.low_precision |= local.low_precision;
    u.fp64 |= local.fp64;
    return nullptr;
  }
};

OpUsageCollector::OpUsageCollector() {
  g_collector.store(this);
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&OpUsageCallback::onStart).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

OpUsageCollector::~OpUsageCollector() {
  at::removeCallback(handle_);
  g_collector.store(nullptr);
}

}  // namespace npuscope::profiler
