// DeviceGuard support for npu: the current device is the runtime's thread-local one; the device
// has one (default) stream per device, as all its work runs synchronously on the host.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "npuscope/device/npu.h"

namespace npuscope::npu::aten {
namespace {

void setOrThrow(int index) {
  const Status s = npu::set_device(index);
  TORCH_CHECK(s.isOk(), s.message());
}

struct NpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDeviceType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (d.index() != old.index()) setOrThrow(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kDeviceType, npu::current_device()); }
  void setDevice(c10::Device d) const override { setOrThrow(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { (void)npu::set_device(d.index()); }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(npu::device_count());
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

}  // namespace npuscope::npu::aten
