#!/usr/bin/env bash
# Every benchmark, C++ and Python, then one table (benchmarks/bench_table.py): each figure with a
# target in benchmarks/targets.tsv, the target, the figure of the last run recorded on this
# machine (benchmarks/results/, with commit and machine), and WORSE where it moved the wrong way
# by more than the noise seen between recorded runs. The run is recorded there too (commit the
# file: it is the next run's baseline). Run it before you stop whenever a hot path changed.
#   scripts/bench.sh [--no-save] [--only bench_profiler,bench_python,...]
# The benchmarks take a quiet machine: nothing else heavy while they run.
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(bench_profiler bench_device bench_dump bench_optim bench_import bench_gui bench_python)
only="" save=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-save) save=(--no-save) ;;
    --only) only=${2:?"--only needs a list"}; shift ;;
    *) echo "bench: unknown option '$1' (expected --no-save or --only LIST)" >&2; exit 2 ;;
  esac
  shift
done
benches=("${ALL[@]}")
if [ -n "$only" ]; then IFS=, read -r -a benches <<< "$only"; fi
for b in "${benches[@]}"; do
  [[ " ${ALL[*]} " == *" $b "* ]] || { echo "bench: no benchmark '$b' (expected one of: ${ALL[*]})" >&2; exit 2; }
done
bash scripts/install-deps.sh
targets="npuscope_python npuscope_python_files"
for b in "${benches[@]}"; do [ "$b" = bench_python ] || targets+=" $b"; done
NPUSCOPE_TARGETS="$targets" bash scripts/build.sh -DNPUSCOPE_BUILD_TESTS=ON -DNPUSCOPE_BUILD_GUI=ON \
  -DNPUSCOPE_BUILD_PYTHON=ON -DNPUSCOPE_BUILD_BENCHMARKS=ON >/dev/null
BUILD_DIR=${NPUSCOPE_BUILD_DIR:-build}
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
for b in "${benches[@]}"; do
  start=$(date +%s)
  if [ "$b" = bench_python ]; then
    PYTHONPATH="$BUILD_DIR/python" /usr/bin/python3 benchmarks/bench_python.py > "$raw/$b.json" 2> "$raw/$b.err" ||
      echo "bench: $b failed: $(tail -1 "$raw/$b.err")" >&2
  else
    "$BUILD_DIR/benchmarks/$b" --benchmark_format=json > "$raw/$b.json" 2> "$raw/$b.err" ||
      echo "bench: $b failed: $(tail -1 "$raw/$b.err")" >&2
  fi
  echo "bench: $b in $(( $(date +%s) - start )) s" >&2
done
/usr/bin/python3 benchmarks/bench_table.py "$raw" "${save[@]}"
