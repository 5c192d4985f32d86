#!/usr/bin/env bash
# The main job: installs what is missing, builds, trains the CNN on Fashion-MNIST on the emulated
# NPU under AMP O2 with NpuFusedAdam while the profiler records every op into an SQLite trace
# file, then prints that run's report. Extra arguments go to `npuscope train`
# (e.g. --epochs 5 --opt-level O1).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the npuscope executable needs is installed and built: the tests, the GUI, the Python
# extension and the benchmarks come with the test command (scripts/test.sh).
bash scripts/install-deps.sh --main
NPUSCOPE_TARGETS=npuscope bash scripts/build.sh -DNPUSCOPE_BUILD_TESTS=OFF -DNPUSCOPE_BUILD_GUI=OFF \
  -DNPUSCOPE_BUILD_PYTHON=OFF -DNPUSCOPE_BUILD_BENCHMARKS=OFF
BUILD_DIR=${NPUSCOPE_BUILD_DIR:-build}
DB=${NPUSCOPE_DB:-npuscope.db}
"$BUILD_DIR/cli/npuscope" train --model cnn --device npu:0 --opt-level O2 --optimizer adam --lr 1e-3 \
  --epochs 1 --db "$DB" "$@"
"$BUILD_DIR/cli/npuscope" report "$DB"
