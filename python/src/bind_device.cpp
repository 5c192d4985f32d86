// The torch.npu API over the emulated device's runtime.
#include "npuscope/device/npu.h"

#include "bindings.h"

namespace npuscope::python {
namespace {

// The device of a call: -1 means the current one; anything else is checked.
int resolve(int device) {
  if (device < 0) return npu::current_device();
  throwIfError(npu::check_device(device));
  return device;
}

// Blocks collected under the pool's lock, turned into Python objects after it (the GIL is held
// throughout, so one scratch list serves).
std::vector<npu::BlockInfo>& snapshotScratch() {
  static std::vector<npu::BlockInfo> blocks;
  return blocks;
}

}  // namespace

void bindDevice(py::module_& root) {
  py::module_ m = root.def_submodule("npu", "the emulated npu's runtime");
  m.def("environment_error", [] { return npu::environment_status().isOk() ? std::string() : npu::environment_status().message(); },
        "The problem with the device environment variables, or '' when they are fine.");
  m.def("device_count", &npu::device_count);
  m.def("current_device", [] {
    throwIfError(npu::environment_status());
    return npu::current_device();
  });
  m.def("set_device", [](int d) { throwIfError(npu::set_device(d)); });
  m.def("parse_device", [](const std::string& text) { return valueOrThrow(npu::parse_device(text)); },
        "'npu', 'npu:N' or 'N' -> N (-1 for 'npu': the current device)");
  m.def("device_name", &npu::device_name);
  m.def("physical_id", [](int d) { return npu::physical_id(resolve(d)); });
  m.def("synchronize", [](int d) { npu::synchronize(resolve(d)); }, py::arg("device") = -1);
  m.def(
      "memory_stats",
      [](int d) {
        const npu::MemoryStats s = npu::memory_stats(resolve(d));
        py::dict out;
        out["allocated_bytes.all.current"] = s.allocated;
        out["allocated_bytes.all.peak"] = s.peak_allocated;
        out["reserved_bytes.all.current"] = s.reserved;
        out["reserved_bytes.all.peak"] = s.peak_reserved;
        out["capacity"] = s.capacity;
        out["num_alloc_retries"] = 0;
        out["num_allocs"] = s.num_allocs;
        out["num_ooms"] = s.num_ooms;
        return out;
      },
      py::arg("device") = -1);
  m.def("reset_peak_memory_stats", [](int d) { npu::reset_peak_memory_stats(resolve(d)); }, py::arg("device") = -1);
  m.def("empty_cache", [](int d) { npu::empty_cache(resolve(d)); }, py::arg("device") = -1);
  m.def("get_float_status", [](int d) { return npu::get_float_status(resolve(d)); }, py::arg("device") = -1);
  m.def("clear_float_status", [](int d) { npu::clear_float_status(resolve(d)); }, py::arg("device") = -1);
  m.def("overflow_mode", [] { return std::string(npu::overflow_mode_name(npu::overflow_mode())); });
  m.def("set_overflow_mode",
        [](const std::string& mode) { npu::set_overflow_mode(valueOrThrow(npu::parse_overflow_mode(mode))); });
  m.def("float_status_tracking", &npu::float_status_tracking);
  m.def("set_float_status_tracking", &npu::set_float_status_tracking);
  m.def(
      "tag_memory",
      [](const at::Tensor& t, const std::string& category, const std::string& owner) {
        npu::tag_tensor_memory(t, valueOrThrow(parseMemoryCategory(category)), owner);
      },
      py::arg("tensor"), py::arg("category"), py::arg("owner") = "",
      "Tags the npu block holding the tensor's storage with a memory category (docs/memory.md) and an owner.");
  m.def(
      "memory_tag",
      [](const at::Tensor& t) {
        return std::string(memoryCategoryName(npu::is_npu(t) && t.has_storage() ? npu::memory_tag(t.storage().data())
                                                                                 : npu::MemoryCategory::kUntagged));
      },
      py::arg("tensor"));
  m.def(
      "memory_snapshot",
      [](int d) {
        py::list out;
        npu::for_each_live_block(
            resolve(d),
            [](const npu::BlockInfo& b, void* arg) {
              auto* list = static_cast<std::vector<npu::BlockInfo>*>(arg);
              list->push_back(b);
            },
            &snapshotScratch());
        for (const npu::BlockInfo& b : snapshotScratch()) {
          py::dict block;
          block["device"] = b.device;
          block["address"] = b.address;
          block["size"] = b.size;
          block["requested_size"] = b.requested;
          block["category"] = memoryCategoryName(b.category);
          block["owner"] = b.owner ? std::string(b.owner) : std::string();
          out.append(block);
        }
        snapshotScratch().clear();
        return out;
      },
      py::arg("device") = -1,
      "The device's live blocks (allocation order): address, size, requested_size, category (tagged; untagged blocks "
      "get theirs in a recording), owner.");
  m.def("num_threads", &npu::num_threads);
  m.def("set_num_threads", &npu::set_num_threads);
}

}  // namespace npuscope::python
