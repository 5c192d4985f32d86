#!/usr/bin/env bash
# A long fuzzing campaign of one target, in segments that resume one corpus:
#   scripts/fuzz-long.sh fuzz_trace_file 3600 [PROCESSES]
# runs the target (the ASan + UBSan build of scripts/fuzz.sh, in build-fuzz/) for SECONDS in
# PROCESSES parallel processes (default 1) over build-fuzz/long/<target>/corpus, which starts as a
# copy of fuzz/corpus/<target>/ and keeps every input found since. Each segment's executions are
# appended to build-fuzz/long/<target>.tsv (date, seconds, processes, executions, corpus size,
# result; libFuzzer's output in build-fuzz/long/<target>/logs/) and to fuzz/campaigns.tsv (kept in
# the repository, with the commit fuzzed), and the campaign's total is printed: a campaign of 10M
# executions can be run as several segments, on machines that have other work to do.
#
# build-fuzz/ does not outlive a machine: a campaign carried over to another starts from the
# seeds and fuzz/campaigns/<target>/ (the inputs of earlier segments, minimized: after a segment,
# scripts/fuzz-long.sh TARGET merge writes them there to be committed).
#
# For speed the allocator keeps no allocation stacks and a smaller quarantine
# (malloc_context_size=0, quarantine_size_mb=16: ~13 % more inputs per second); a crash, leak or
# timeout that reproduces still stops the segment with the input in build-fuzz/artifacts/ — re-run that input
# with scripts/fuzz.sh's options for the full report, then add it to fuzz/corpus/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
USAGE="usage: scripts/fuzz-long.sh TARGET SECONDS [PROCESSES] | scripts/fuzz-long.sh TARGET merge"
TARGET=${1:?$USAGE}
SECONDS_EACH=${2:?$USAGE}
PROCESSES=${3:-1}
BUILD_DIR=${NPUSCOPE_FUZZ_BUILD_DIR:-build-fuzz}
[ -d "fuzz/corpus/${TARGET#fuzz_}" ] || { echo "fuzz-long: no target $TARGET (fuzz/README.md lists them)" >&2; exit 2; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/npuscope-ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSCOPE_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 > "$BUILD_DIR.configure.log" 2>&1 ||
  { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "$TARGET"
long="$BUILD_DIR/long/$TARGET"
mkdir -p "$long/corpus" "$long/logs" "$BUILD_DIR/artifacts"
segment=$(( $( [ -f "$long.tsv" ] && wc -l < "$long.tsv" || echo 0) + 1 ))
# The commit fuzzed (a tree with changes is marked), read before the segment: commits made
# meanwhile are not what ran.
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD -- . ':!fuzz/campaigns.tsv' ':!fuzz/campaigns' 2>/dev/null || commit="$commit+changes"
if [ "$SECONDS_EACH" = merge ]; then
  # The campaign's inputs, minimized to those that add coverage, kept for the next machine. What
  # is kept already (from another machine, perhaps) is merged too: nothing kept is dropped unless
  # this campaign's inputs cover it.
  kept="fuzz/campaigns/${TARGET#fuzz_}"
  [ -n "$(ls -A "$long/corpus")" ] || { echo "fuzz-long: $TARGET: no campaign here to merge (run a segment first)" >&2; exit 2; }
  inputs=("fuzz/corpus/${TARGET#fuzz_}" "$long/corpus")
  [ -d "$kept" ] && inputs+=("$kept")
  rm -rf "$kept.new" && mkdir -p "$kept.new"
  "$BUILD_DIR/fuzz/$TARGET" -merge=1 -timeout=10 "$kept.new" "${inputs[@]}" \
    2>"$long/logs/merge.log" || { tail -20 "$long/logs/merge.log"; exit 1; }
  # The seeds stay where they are: only what the campaign added is kept.
  for f in "fuzz/corpus/${TARGET#fuzz_}"/*; do rm -f "$kept.new/$(sha1sum < "$f" | cut -c1-40)"; done
  rm -rf "$kept" && mv "$kept.new" "$kept"
  echo "fuzz-long: $TARGET: $(ls "$kept" | wc -l) inputs ($(du -sh "$kept" | cut -f1)) in $kept beside the seeds"
  exit 0
fi
if [ -z "$(ls -A "$long/corpus")" ]; then
  cp -r "fuzz/corpus/${TARGET#fuzz_}/." "$long/corpus/"
  [ -d "fuzz/campaigns/${TARGET#fuzz_}" ] && cp -r "fuzz/campaigns/${TARGET#fuzz_}/." "$long/corpus/"
fi
echo "fuzz-long: $TARGET for ${SECONDS_EACH}s in $PROCESSES process(es) over $long/corpus ($(ls "$long/corpus" | wc -l) inputs)"
started=$(date +%s)
# One process: fuzz until the segment's end. libFuzzer's -timeout is wall-clock, so on a machine
# with other work an input can overrun it only because the process was starved: a timeout's input
# is run again alone, and if it then finishes within the limit the process goes on fuzzing (the
# input is kept in artifacts/unreproduced/, the log says so). A crash, a leak, a timeout that
# reproduces, or any other failure ends the process and fails the segment.
fuzz_process() {
  local i=$1 left unit
  local log="$long/logs/segment-$segment-$i.log"
  : > "$log"
  while left=$((started + SECONDS_EACH - $(date +%s))); [ "$left" -gt 0 ]; do
    if ASAN_OPTIONS=detect_leaks=1:malloc_context_size=0:quarantine_size_mb=16 \
       UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
         "$BUILD_DIR/fuzz/$TARGET" -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 \
         -artifact_prefix="$BUILD_DIR/artifacts/$TARGET-" -print_final_stats=1 "$long/corpus" 2>>"$log"; then
      continue
    fi
    unit=$(tail -200 "$log" | sed -n 's/.*Test unit written to \(.*timeout-[0-9a-f]*\)$/\1/p' | tail -1)
    if [ -n "$unit" ] && tail -200 "$log" | grep -q 'ERROR: libFuzzer: timeout' &&
       ASAN_OPTIONS=detect_leaks=1 "$BUILD_DIR/fuzz/$TARGET" -timeout=10 "$unit" >/dev/null 2>&1; then
      mkdir -p "$BUILD_DIR/artifacts/unreproduced" && mv "$unit" "$BUILD_DIR/artifacts/unreproduced/"
      echo "fuzz-long: the timeout did not reproduce: ${unit##*/} ran within 10 s alone (kept in artifacts/unreproduced/); fuzzing on" >> "$log"
      continue
    fi
    return 1
  done
}
pids=()
for i in $(seq 1 "$PROCESSES"); do
  fuzz_process "$i" &
  pids+=($!)
done
result=ok
for p in "${pids[@]}"; do wait "$p" || result=FAILED; done
elapsed=$(($(date +%s) - started))  # shorter than asked when a failure stopped it
execs=0
for i in $(seq 1 "$PROCESSES"); do
  # every run of the process (a process that went on after an unreproduced timeout ran more than once)
  n=$(awk '/^stat::number_of_executed_units:/ {s += $2} END {print s + 0}' "$long/logs/segment-$segment-$i.log")
  execs=$((execs + n))
done
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$elapsed" "$PROCESSES" "$execs" \
  "$(ls "$long/corpus" | wc -l)" "$result" >> "$long.tsv"
[ -f fuzz/campaigns.tsv ] || printf 'target\tended\tseconds\tprocesses\texecutions\tcorpus\tresult\tcommit\n' > fuzz/campaigns.tsv
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$TARGET" "$(date -u +%FT%TZ)" "$elapsed" "$PROCESSES" "$execs" \
  "$(ls "$long/corpus" | wc -l)" "$result" "$commit" >> fuzz/campaigns.tsv
# The campaign counts the segments that ended without a finding; a failed one is listed, not counted.
total=$(awk -F'\t' -v t="$TARGET" '$1 == t && $7 == "ok" {s += $5} END {printf "%.0f\n", s}' fuzz/campaigns.tsv)
echo "fuzz-long: $TARGET $execs executions in this segment ($result); campaign total $total over" \
  "$(awk -F'\t' -v t="$TARGET" '$1 == t && $7 == "ok"' fuzz/campaigns.tsv | wc -l) segment(s) without a finding" \
  "in fuzz/campaigns.tsv ($(awk -F'\t' -v t="$TARGET" '$1 == t && $7 != "ok"' fuzz/campaigns.tsv | wc -l) failed, not counted)"
if [ "$result" != ok ]; then
  for i in $(seq 1 "$PROCESSES"); do tail -40 "$long/logs/segment-$segment-$i.log"; done
  echo "fuzz-long: $TARGET FAILED (input in $BUILD_DIR/artifacts/)"
  exit 1
fi
