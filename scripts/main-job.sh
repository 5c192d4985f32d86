#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the CNN on Fashion-MNIST on the
# emulated NPU, printing the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${NPUSCOPE_BUILD_DIR:-build}
"$BUILD_DIR/profiler/npuscope" train --model cnn --device npu:0 --epochs 1 "$@"
