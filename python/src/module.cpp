// npuscope._C: the C++ libraries as seen from Python. Importing it loads libnpuscope_device.so
// (a link dependency), whose static registrations make the npu a device of the running torch.
#include <c10/util/Exception.h>

#include "bindings.h"

namespace npuscope::python {

void throwIfError(const Status& status) {
  if (status.isOk()) return;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      throw py::value_error(status.message());
    case StatusCode::kIoError:
      PyErr_SetString(PyExc_OSError, status.message().c_str());
      throw py::error_already_set();
    case StatusCode::kOutOfMemory:
      PyErr_SetString(PyExc_MemoryError, status.message().c_str());
      throw py::error_already_set();
    default:
      throw std::runtime_error(status.message());
  }
}

}  // namespace npuscope::python

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  m.doc() = "npuscope's C++ libraries: the emulated npu, amp, fused optimizers, recording";
  // The libraries' one-line messages without the C++ backtrace torch appends in debug builds.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  npuscope::python::bindDevice(m);
  npuscope::python::bindOptim(m);
  npuscope::python::bindAmp(m);
  npuscope::python::bindProfiler(m);
  npuscope::python::bindDistributed(m);
  npuscope::python::bindMsprobe(m);
}
