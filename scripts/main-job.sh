#!/usr/bin/env bash
# The main job: installs what is missing, builds, trains the CNN on Fashion-MNIST on the emulated
# NPU under AMP O2 with NpuFusedAdam while the profiler records every op into an SQLite trace
# file, then prints that run's report. Extra arguments go to `npuscope train`
# (e.g. --epochs 5 --opt-level O1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${NPUSCOPE_BUILD_DIR:-build}
DB=${NPUSCOPE_DB:-npuscope.db}
"$BUILD_DIR/cli/npuscope" train --model cnn --device npu:0 --opt-level O2 --optimizer adam --lr 1e-3 \
  --epochs 1 --db "$DB" "$@"
"$BUILD_DIR/cli/npuscope" report "$DB"
