#include "npuscope/device/op_dispatch.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace npuscope::npu {

std::string emulatedKernelOf(const std::string& qualified, bool low_precision, bool fp64) {
  if (fp64) return "refused: no fp64 on the npu";
  bool explicit_kernel = false, implicit = false, non_functional = false, explicit_composite = false;
  auto& d = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : d.getAllOpNames()) {
    if (name.name != qualified) continue;
    auto op = d.findOp(name);
    if (!op) continue;
    explicit_kernel |= op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
    implicit |= op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    non_functional |= op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
    explicit_composite |= op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
  }
  // The dispatcher's order for a backend without its own kernel: composite kernels first.
  const bool composite = !explicit_kernel && (implicit || (explicit_composite && !non_functional));
  std::string how = explicit_kernel      ? "npu kernel"
                    : implicit           ? "composite: decomposes into other ops"
                    : non_functional     ? "CPU kernel via its out= variant, zero-copy"
                    : explicit_composite ? "composite: runs as other npu ops"
                                         : "CPU kernel, zero-copy";
  if (low_precision && !composite) how += "; fp16/bf16 computed in fp32, rounded";
  return how;
}

}  // namespace npuscope::npu
