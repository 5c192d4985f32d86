#!/usr/bin/env bash
# Installs the Debian packages npuscope needs. Idempotent: packages already present are left
# alone, and apt-get is not called at all when nothing is missing.
#   scripts/install-deps.sh          everything: the main job's set and the test set
#   scripts/install-deps.sh --main   the main job's set: what building and running the npuscope
#                                    executable needs (scripts/main-job.sh)
set -euo pipefail

# package                 why
MAIN_PACKAGES=(
  build-essential         # g++ 12, the C++17 compiler
  cmake                   # build system (3.25 on Debian 12)
  ninja-build             # fast parallel builds on 2 cores
  ccache                  # rebuilds of heavy libtorch translation units come from the cache
  pkg-config              # locating zstd and other libraries
  libtorch-dev            # libtorch 1.13.1 (CPU): ATen, c10, autograd, the dispatcher
  libgloo-dev             # Gloo's headers: the hccl process group runs on c10d's ProcessGroupGloo
  libopenblas0-openmp     # without it libblas.so.3 is netlib's reference BLAS (~35x slower mm);
                          # the OpenMP build shares libtorch's OpenMP threads (see below)
  libsqlite3-dev          # the trace store
  libprotobuf-dev         # Ascend DumpData headers for dump files
  protobuf-compiler       # protoc: generates the C++ of dumper/proto/*.proto, decodes dumps in tests
  libcli11-dev            # command-line parsing of the npuscope CLI
  nlohmann-json3-dev      # acl.json and chrome-trace JSON
  libzstd-dev             # compression of tensor dumps
  libxxhash-dev           # XXH3 content hashes: a dumped payload is stored once per step
  zlib1g-dev              # gzip: IDX files of Fashion-MNIST, imported *.json.gz traces
  libsimdjson-dev         # npuscope import: chrome-trace JSON parsed in chunks
  dataset-fashion-mnist   # the real training data, read in place under /usr/share/datasets
)
TEST_PACKAGES=(
  libgtest-dev            # GoogleTest for the unit tests
  libgmock-dev            # GoogleMock (comes with GoogleTest's CMake package)
  libbenchmark-dev        # Google Benchmark for benchmarks/
  qtbase5-dev             # the Qt5 Widgets GUI
  libqt5charts5-dev       # loss / loss-scale plots in the GUI
  xvfb                    # GUI screenshots under a virtual X server
  python3-torch           # the Python front-end: Debian's torch 1.13, built on the same libtorch
  python3-torchvision     # resnet50 of the online-inference example
  python3-dev             # Python.h for the npuscope._C extension
  pybind11-dev            # the npuscope._C bindings
  python3-pytest          # the Python tests (run by CTest with /usr/bin/python3)
  clang-14                # scripts/fuzz.sh: the fuzz targets are built with clang
  libfuzzer-14-dev        # libFuzzer for scripts/fuzz.sh
)

case "${1:-}" in
  --main) PACKAGES=("${MAIN_PACKAGES[@]}") ;;
  "") PACKAGES=("${MAIN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "install-deps: unknown option '$1' (expected --main or nothing)" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

# libtorch calls BLAS through libblas.so.3, which Debian's alternatives point at the installed
# BLAS of highest priority: OpenBLAS's pthread build when it is there too. That build keeps its
# own worker threads, which spin (sched_yield) for ~0.1 s after every call, beside libtorch's
# OpenMP threads: on 2 cores the two pools take turns on the same cores. So the OpenMP build,
# which runs BLAS on libtorch's own OpenMP threads, is selected -- for libopenblas.so.0 too:
# the OpenMP libblas.so.3 loads libopenblas.so.0 through $ORIGIN, which is the alternatives'
# directory, so with only libblas.so.3 switched it still ran the pthread build's code.
# Measured here, three alternating process pairs of bench_device: the test CNN's npu/CPU step
# ratio 1.34-1.76 with the pthread build, 0.78-0.96 with the OpenMP one.
multiarch=$(gcc -dumpmachine)
blas_dir=/usr/lib/$multiarch/openblas-openmp
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  alt="$lib-$multiarch"
  current=$(update-alternatives --query "$alt" 2>/dev/null | awk '/^Value:/ {print $2}')
  if [ "$current" != "$blas_dir/$lib" ]; then
    echo "install-deps: selecting $blas_dir/$lib for $lib"
    $SUDO update-alternatives --set "$alt" "$blas_dir/$lib"
  fi
done
