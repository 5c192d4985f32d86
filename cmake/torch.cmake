# Everything that includes a libtorch header links npuscope::torch. It carries the flags that
# Debian's libtorch 1.13 needs to agree with its own binary:
#  * -DNDEBUG: libtorch is built with it, and at::RecordFunction's layout differs without it
#    (its inputs() then asserts);
#  * -fPIC on every torch TU, so one precompiled header serves libraries and executables;
#  * -fopenmp: libtorch's parallel backend is OpenMP, and at::parallel_for is an inline template
#    that spreads work over the intra-op threads only in a TU compiled with OpenMP (_OPENMP);
#    without it our own parallel_for calls (fp16 conversions, the fused optimizers' kernels)
#    ran on the calling thread alone. The runtime is libtorch's own libgomp.
find_package(Torch REQUIRED CONFIG)
find_package(OpenMP REQUIRED COMPONENTS CXX)

add_library(npuscope_torch INTERFACE)
add_library(npuscope::torch ALIAS npuscope_torch)
target_link_libraries(npuscope_torch INTERFACE ${TORCH_LIBRARIES} OpenMP::OpenMP_CXX)
target_compile_definitions(npuscope_torch INTERFACE NDEBUG)
target_compile_options(npuscope_torch INTERFACE -fPIC ${TORCH_CXX_FLAGS})
# Under UBSan (scripts/sanitize.sh's ASan + UBSan tree) the torch TUs leave out two of its checks:
# `null` (a null pointer dereferenced stops the run under ASan anyway, as a SEGV with its stack)
# and `alignment` (tensor data comes from our allocator, aligned to 64 bytes). Measured on one
# torch test TU they cost a fifth of its compile (24 s -> 19 s at -Og), over the tree's hundreds
# of torch TUs minutes of a cold CI. The torch-free libraries (the readers of outside input,
# which the fuzz build also checks with all of UBSan) and the npuscope executable keep them.
if(NPUSCOPE_SANITIZE MATCHES "undefined")
  target_compile_options(npuscope_torch INTERFACE -fno-sanitize=alignment,null)
endif()

# Two precompiled headers: the ATen/dispatcher level for libraries, and the full C++ frontend
# (torch::nn) for tests and benchmarks. Targets reuse them with npuscope_use_pch(). Loading one
# costs seconds per file (the torch one more): the libraries and the CLI take the ATen one, and
# files that include no torch header skip it (SKIP_PRECOMPILE_HEADERS).
add_library(npuscope_pch_aten OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_stub.cpp)
target_link_libraries(npuscope_pch_aten PRIVATE npuscope::torch)
add_library(npuscope_pch_torch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_stub.cpp)
target_link_libraries(npuscope_pch_torch PRIVATE npuscope::torch)
if(NPUSCOPE_PCH)
  target_precompile_headers(npuscope_pch_aten PRIVATE
      <ATen/ATen.h> <ATen/core/dispatch/Dispatcher.h> <torch/library.h> <c10/core/TensorImpl.h>)
  target_precompile_headers(npuscope_pch_torch PRIVATE
      <torch/torch.h> <ATen/core/dispatch/Dispatcher.h> <torch/library.h>)
endif()

# npuscope_use_pch(target aten|torch)
function(npuscope_use_pch target kind)
  if(NPUSCOPE_PCH)
    target_precompile_headers(${target} REUSE_FROM npuscope_pch_${kind})
  endif()
endfunction()
