// Prints the runtime's view of the environment, one key=value per line, for test_device_runtime.
#include <ATen/ATen.h>

#include <cstdio>

#include "npuscope/device/npu.h"

int main() {
  namespace npu = npuscope::npu;
  const auto& st = npu::environment_status();
  std::printf("status=%s\n", st.isOk() ? "ok" : st.message().c_str());
  std::printf("count=%d\n", npu::device_count());
  std::printf("physical=");
  for (int i = 0; i < npu::device_count(); ++i) std::printf("%s%d", i ? "," : "", npu::physical_id(i));
  std::printf("\ncurrent=%d\n", npu::device_count() > 0 ? npu::current_device() : -1);
  std::printf("threads=%d\n", npu::num_threads());
  std::printf("log_level=%d\n", static_cast<int>(npu::log_level()));
  std::printf("task_queue=%d\n", npu::task_queue_enabled() ? 1 : 0);
  std::printf("mode=%s\n", npu::overflow_mode_name(npu::overflow_mode()));
  std::printf("capacity=%llu\n", static_cast<unsigned long long>(npu::memory_stats(0).capacity));
  std::fflush(stdout);
  NPU_LOG(kWarning) << "probe warning line";
  NPU_LOG(kInfo) << "probe info line";
  if (npu::device_count() > 0) {
    // A tensor on the current device: its device string as a user sees it.
    at::Tensor t = at::ones({2}).to(npu::device());
    std::printf("tensor_device=%s\n", npu::format_device(t.device()).c_str());
  }
  return 0;
}
