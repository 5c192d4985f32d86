// npuscope._C.ProcessGroupHCCL: the C++ hccl process group as a torch.distributed ProcessGroup
// (torch's own pybind type is its base, so torch.distributed takes it as any backend's group).
// npuscope/distributed.py registers it as backend "hccl".
#include <pybind11/chrono.h>

#include "bindings.h"
#include "npuscope/distributed/process_group_hccl.h"

namespace npuscope::python {

void bindDistributed(py::module_& m) {
  py::module_::import("torch.distributed");  // registers c10d's ProcessGroup and Store types
  using distributed::ProcessGroupHCCL;
  py::class_<ProcessGroupHCCL, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupHCCL>>(
      m, "ProcessGroupHCCL", "torch.distributed's collectives on npu tensors, run by c10d's Gloo over TCP")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupHCCL>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
}

}  // namespace npuscope::python
