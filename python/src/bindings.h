// The npuscope._C extension: one registration function per library it exposes. Errors cross
// into Python as RuntimeError (c10::Error, the libraries' TORCH_CHECK messages) or as the
// exception a Status code maps to (throwIfError).
#pragma once

#include <functional>
#include <memory>

#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "npuscope/store/status.h"

namespace npuscope::python {

namespace py = pybind11;

// Raises the Python exception for a failed Status: ValueError (invalid argument), OSError
// (I/O), MemoryError (out of memory), RuntimeError (anything else); nothing when OK.
void throwIfError(const Status& status);
template <typename T>
T valueOrThrow(StatusOr<T> result) {
  throwIfError(result.status());
  return std::move(result).value();
}

// An RAII guard as a Python context manager: built on __enter__, dropped on __exit__.
template <typename Guard>
struct GuardScope {
  std::function<std::unique_ptr<Guard>()> make;
  std::unique_ptr<Guard> guard;
};

void bindDevice(py::module_& m);
void bindOptim(py::module_& m);
void bindAmp(py::module_& m);
void bindMsprobe(py::module_& m);
void bindProfiler(py::module_& m);
void bindDistributed(py::module_& m);

}  // namespace npuscope::python
