#!/usr/bin/env bash
# Sanitizer builds, each in its own build directory:
#   thread            core's tests (the multi-producer trace writer, its checkpointer) and the
#                     dumper's multi-threaded file writers under ThreadSanitizer; libtorch is
#                     not instrumented, so torch code is left to ASan/UBSan
#   address,undefined core, device and profiler tests under AddressSanitizer + UBSan
# Usage: scripts/sanitize.sh [thread|address] (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
which=${1:-all}
common=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSCOPE_BUILD_GUI=OFF -DNPUSCOPE_BUILD_BENCHMARKS=OFF
        -DNPUSCOPE_PCH=OFF)

if [[ $which == all || $which == thread ]]; then
  cmake -S . -B build-tsan "${common[@]}" -DNPUSCOPE_SANITIZE=thread
  cmake --build build-tsan --target test_core test_dump_compare
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  build-tsan/tests/core/test_core
  build-tsan/tests/dumper/test_dump_compare --gtest_filter='DumpWriter.*:PayloadPool.*'
  unset TSAN_OPTIONS
fi

if [[ $which == all || $which == address ]]; then
  cmake -S . -B build-asan "${common[@]}" -DNPUSCOPE_SANITIZE=address,undefined
  cmake --build build-asan --target test_core test_device_runtime test_npu_tensors test_profiler
  # libtorch itself is not built with ASan: leaks inside it are not ours.
  export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  build-asan/tests/core/test_core
  build-asan/tests/device/test_device_runtime
  build-asan/tests/device/test_npu_tensors
  build-asan/tests/profiler/test_profiler
fi
