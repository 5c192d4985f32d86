#!/usr/bin/env bash
# Sanitizer builds, each in its own build directory (CI runs both):
#   thread            the store's and analysis's tests (the multi-producer trace writer, its checkpointer) and the
#                     dumper's multi-threaded file writers under ThreadSanitizer; libtorch is
#                     not instrumented, so torch code is left to ASan/UBSan
#   address           AddressSanitizer + UBSan over the store, analysis, import, device, profiler, dumper and
#                     CLI tests (the CLI tests run the instrumented npuscope binary)
# Usage: scripts/sanitize.sh [thread|address] (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
which=${1:-all}
# -Og and line tables only (-g1): sanitizer reports keep file:line. GCC's ASan + UBSan
# instrumentation is costly to optimise: at -O1 report_command.cpp took 62 s to compile, at -Og
# 22 s (release: 10 s), with every check kept; CI builds these trees cold. The torch TUs leave out
# UBSan's null and alignment checks (cmake/torch.cmake says why).
common=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-Og -g1 -DNDEBUG"
        -DNPUSCOPE_BUILD_GUI=OFF -DNPUSCOPE_BUILD_BENCHMARKS=OFF -DNPUSCOPE_BUILD_PYTHON=OFF)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/npuscope-ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}

if [[ $which == all || $which == thread ]]; then
  cmake -S . -B build-tsan "${common[@]}" -DNPUSCOPE_SANITIZE=thread >/dev/null
  cmake --build build-tsan --target test_store test_analysis test_dump_compare test_import
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  build-tsan/tests/store/test_store --gtest_brief=1
  build-tsan/tests/analysis/test_analysis --gtest_brief=1
  build-tsan/tests/import/test_import --gtest_brief=1  # the importer's reading pipeline
  build-tsan/tests/dumper/test_dump_compare --gtest_brief=1 --gtest_filter='DumpWriter.*:PayloadPool.*'
  unset TSAN_OPTIONS
  echo "sanitize: ThreadSanitizer passed"
fi

if [[ $which == all || $which == address ]]; then
  cmake -S . -B build-asan "${common[@]}" -DNPUSCOPE_SANITIZE=address,undefined >/dev/null
  targets=(test_store test_analysis test_import test_device_runtime test_npu_tensors test_profiler test_dump_compare test_dumper
           test_cli_train test_cli_report test_cli_dump test_cli_faults test_cli_import)
  cmake --build build-asan --target "${targets[@]}"
  # libtorch itself is not built with ASan: leaks inside it are not ours.
  export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # Only the targets built above: the other executables' tests are listed as *_NOT_BUILT.
  ctest --test-dir build-asan -j 2 --timeout 900 --output-on-failure -E '_NOT_BUILT$' \
        -L '^(store|analysis|import|device|profiler|dumper|cli)$'
  echo "sanitize: AddressSanitizer + UBSan passed"
fi
