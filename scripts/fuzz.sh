#!/usr/bin/env bash
# Runs one libFuzzer target (or `all`) for SECONDS each over its seed corpus (and what long
# campaigns kept in fuzz/campaigns/<target>/):
#   scripts/fuzz.sh fuzz_acl_json 60        scripts/fuzz.sh all 30
# Targets: fuzz_acl_json, fuzz_dump_file, fuzz_trace_file, fuzz_schedule, fuzz_chrome_trace,
# fuzz_npu_folder, fuzz_npu_kernels, fuzz_chrome_events, fuzz_import_csv, fuzz_torch_npu_db, fuzz_msprobe_dump, fuzz_operator_memory,
# fuzz_module_memory, fuzz_acl_dump_name, fuzz_layer_mapping (fuzz/README.md). They are built
# with clang-14, libFuzzer, ASan and UBSan in build-fuzz/ (NPUSCOPE_FUZZ_BUILD_DIR). A crash, a
# leak, a timeout (10 s per input) or running out of memory fails the run and leaves the input
# in build-fuzz/artifacts/; add it to fuzz/corpus/<target>/ with the fix. New inputs found go to
# a scratch copy of the corpus, never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${1:?usage: scripts/fuzz.sh TARGET|all SECONDS}
SECONDS_EACH=${2:-30}
BUILD_DIR=${NPUSCOPE_FUZZ_BUILD_DIR:-build-fuzz}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/npuscope-ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSCOPE_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 > "$BUILD_DIR.configure.log" 2>&1 ||
  { cat "$BUILD_DIR.configure.log"; exit 1; }
targets=(fuzz_acl_json fuzz_dump_file fuzz_trace_file fuzz_schedule fuzz_chrome_trace fuzz_npu_folder fuzz_npu_kernels
         fuzz_chrome_events fuzz_import_csv fuzz_torch_npu_db fuzz_msprobe_dump fuzz_operator_memory
         fuzz_module_memory fuzz_acl_dump_name fuzz_layer_mapping)
[ "$TARGET" = all ] || targets=("$TARGET")
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}"
mkdir -p "$BUILD_DIR/artifacts"
# One target per core at a time: each runs its SECONDS on a core of its own.
run_one() {
  local t=$1 corpus
  corpus=$(mktemp -d)
  cp -r "fuzz/corpus/${t#fuzz_}/." "$corpus/"
  # What long campaigns found (scripts/fuzz-long.sh), so that a short run starts where they got to.
  if [ -d "fuzz/campaigns/${t#fuzz_}" ]; then cp -r "fuzz/campaigns/${t#fuzz_}/." "$corpus/"; fi
  echo "fuzz: $t for ${SECONDS_EACH}s"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "$BUILD_DIR/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
     -artifact_prefix="$BUILD_DIR/artifacts/$t-" -print_final_stats=1 "$corpus" 2>"$BUILD_DIR/$t.log"; then
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD_DIR/$t.log" | sed "s/^/fuzz: $t /"
    rm -rf "$corpus"
  else
    tail -60 "$BUILD_DIR/$t.log"; echo "fuzz: $t FAILED (input in $BUILD_DIR/artifacts/)"; rm -rf "$corpus"
    return 1
  fi
}
slots=$(nproc) running=0 failed=0
for t in "${targets[@]}"; do
  if (( running >= slots )); then wait -n || failed=1; running=$((running - 1)); fi
  (( failed == 0 )) || break
  run_one "$t" &
  running=$((running + 1))
done
while (( running > 0 )); do wait -n || failed=1; running=$((running - 1)); done
(( failed == 0 )) || exit 1
