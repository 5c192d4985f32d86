#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, runs CTest. (The options
# are given because the main job turns them off in the same build folder.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DNPUSCOPE_BUILD_TESTS=ON -DNPUSCOPE_BUILD_GUI=ON -DNPUSCOPE_BUILD_PYTHON=ON \
  -DNPUSCOPE_BUILD_BENCHMARKS=ON
BUILD_DIR=${NPUSCOPE_BUILD_DIR:-build}
export QT_QPA_PLATFORM=offscreen
# CTest runs two test processes at a time, each with an OpenMP team as wide as the machine. By
# default a libgomp thread spins at every barrier before it sleeps, taking the core from the
# other process's threads; on 2 cores that made the optimizer tests 25x slower. Passive waiting
# keeps the parallel code paths while the processes share the cores.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 --timeout 600
