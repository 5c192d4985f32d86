// msprobe's statistics dump from Python (npuscope.msprobe): a tensor's JSON leaf as dump.json
// holds it, its statistics computed in C++ from the tensor's memory (dumper::msprobeStats).
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <cstdio>

#include "npuscope/dumper/dumper.h"
#include "npuscope/profiler/msprobe_rows.h"

#include "bindings.h"

namespace npuscope::python {
namespace {

const char* torchDtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "torch.float32";
    case c10::kHalf: return "torch.float16";
    case c10::kBFloat16: return "torch.bfloat16";
    case c10::kDouble: return "torch.float64";
    case c10::kChar: return "torch.int8";
    case c10::kByte: return "torch.uint8";
    case c10::kShort: return "torch.int16";
    case c10::kInt: return "torch.int32";
    case c10::kLong: return "torch.int64";
    case c10::kBool: return "torch.bool";
    case c10::kComplexFloat: return "torch.complex64";
    case c10::kComplexDouble: return "torch.complex128";
    default: return "unknown";
  }
}

// Python's float for a statistic: NaN and infinities stay floats (json writes NaN / Infinity,
// as msprobe's files hold them).
py::object stat(bool present, double v) { return present ? py::object(py::float_(v)) : py::object(py::none()); }

}  // namespace

void bindMsprobe(py::module_& root) {
  py::module_ m = root.def_submodule("msprobe", "msprobe-format dumps: tensor statistics");
  m.def(
      "tensor_leaf",
      [](const at::Tensor& t, bool with_crc32) {
        py::dict d;
        d["type"] = "torch.Tensor";
        d["dtype"] = torchDtypeName(t.scalar_type());
        d["shape"] = py::cast(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
        const dumper::MsprobeStats s = dumper::msprobeStats(t, with_crc32);
        const bool is_bool = t.scalar_type() == c10::kBool;
        if (is_bool && s.has_minmax) {
          d["Max"] = py::bool_(s.max != 0);
          d["Min"] = py::bool_(s.min != 0);
        } else {
          d["Max"] = stat(s.has_minmax, s.max);
          d["Min"] = stat(s.has_minmax, s.min);
        }
        d["Mean"] = stat(s.has_mean, s.mean);
        d["Norm"] = stat(s.has_mean, s.norm);
        d["requires_grad"] = t.requires_grad();
        if (with_crc32) {
          char hex[9];
          std::snprintf(hex, sizeof hex, "%08x", s.crc32);
          d["md5"] = std::string(hex);
        }
        return d;
      },
      py::arg("tensor"), py::arg("md5") = false,
      "dump.json's leaf of a tensor: type, dtype, shape, Max, Min, Mean, Norm, requires_grad (and md5: msprobe's "
      "CRC-32 of the bytes)");
  m.def(
      "host_copy",
      [](const at::Tensor& t) {
        // The debugger's own copy is not one of the model's ops: nothing records it.
        at::DisableRecordFunctionGuard unrecorded;
        return t.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
      },
      py::arg("tensor"), "the tensor's data now, on the host (task tensor), unseen by any recording");
  m.def(
      "add_to_trace",
      [](std::string dump_json, std::string stack_json, std::string construct_json, int64_t step,
         std::unordered_map<std::string, int64_t> links, std::vector<std::pair<std::string, at::Tensor>> tensors) {
        profiler::MsprobeStep s{std::move(dump_json), std::move(stack_json), std::move(construct_json), step,
                                std::move(links), std::move(tensors)};
        auto added = [&]() {
          py::gil_scoped_release release;  // errors are raised once the GIL is back
          return profiler::addMsprobeStep(std::move(s));
        }();
        const profiler::MsprobeRows r = valueOrThrow(std::move(added));
        py::dict d;
        d["entries"] = r.entries;
        d["tensors"] = r.tensors;
        d["linked_entries"] = r.linked_entries;
        d["payloads"] = r.payloads;
        return d;
      },
      py::arg("dump_json"), py::arg("stack_json"), py::arg("construct_json"), py::arg("step"), py::arg("links"),
      py::arg("tensors"),
      "one dumped step's rows into the active recording's trace file, each entry linked to its op");
}

}  // namespace npuscope::python
