#!/usr/bin/env bash
# Configures and builds npuscope in ./build (Ninja, ccache, precompiled headers).
# Extra arguments go to CMake, e.g. scripts/build.sh -DNPUSCOPE_BUILD_GUI=OFF.
# NPUSCOPE_TARGETS="a b" builds those targets only (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${NPUSCOPE_BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/npuscope-ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # cache hits across clones and worktrees
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
targets=()
for t in ${NPUSCOPE_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
