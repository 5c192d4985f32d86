#!/usr/bin/env bash
# Shows that the `npuscope` command-line tool prints byte-identical output before and after a code
# restructuring: record the outputs of a fixed list of read-only commands with the old binary, again
# with the new one, then diff the two folders.
#
# Usage:
#   scripts/compare-cli-outputs.sh OUT_DIR NPUSCOPE_BINARY RECORDED_DB IMPORTED_DB
#   scripts/compare-cli-outputs.sh --diff [--ignore NAME[,NAME...]] DIR_A DIR_B
#
# Record mode: OUT_DIR must not exist or be empty. RECORDED_DB is a trace file written by
# `npuscope train` holding at least two runs with tensor dumps (the latest against the one before
# it is `compare.self`); IMPORTED_DB one written by `npuscope import` (e.g. of a torch_npu
# *_ascend_pt folder). For example:
#   mkdir -p /tmp/cmpcli && cd /tmp/cmpcli
#   echo '{"dump": {"dump_mode": "all", "dump_list": [], "dump_step": "1", "dump_data": "tensor"}}' > acl.json
#   ACL_DUMP_DATA=1 npuscope train --model mlp --dataset synthetic --steps 20 --opt-level O0 --db rec.db
#   ACL_DUMP_DATA=1 npuscope train --model mlp --dataset synthetic --steps 20 --opt-level O2 --db rec.db
#   npuscope import tests/data/traces/ascend_alexnet_rank0_ascend_pt --db imp.db
#   scripts/compare-cli-outputs.sh /tmp/before build-old/profiler/npuscope rec.db imp.db
#   scripts/compare-cli-outputs.sh /tmp/after  build/cli/npuscope         rec.db imp.db
#   scripts/compare-cli-outputs.sh --diff --ignore version.txt /tmp/before /tmp/after
#
# Each command's stdout, stderr and exit code go to one file OUT_DIR/NAME (NAME after the
# command: report.txt, report.json.txt, advise.txt, help.dump.list.txt, ...); files the
# commands write (export.chrome.json, export.csv, compare.self.csv, dump.export.npy/, ...) are
# kept beside them and compared too. Run `ls OUT_DIR` for the full list.
#
# What keeps two recordings of the same binary identical:
#  - The two trace files are copied into OUT_DIR as recorded.db and imported.db, and every
#    command runs with OUT_DIR as its working directory on those relative names and writes its
#    output files there under fixed relative names, so the paths the commands print are the
#    same in every OUT_DIR (and the originals are never touched). inputs.txt holds the copies'
#    SHA-256 and whether they were still unchanged after all the commands: a diff there means
#    the two recordings did not read the same trace files (or a command wrote to one).
#  - The binary runs as argv[0] "npuscope" (CLI11 prints argv[0] in its usage lines) in a clean
#    environment (env -i: PATH, HOME, LC_ALL=C, TZ=UTC - report prints run start times in local
#    time), so neither the binary's path nor the caller's NPUSCOPE_* / ACL_* / ASCEND_* variables
#    show up in the output.
#  - Everything else the commands print comes from the trace files (run start times, step
#    times, throughput are the recorded ones), so no output needed normalizing: two recordings
#    with the same binary were byte-identical, and so was a third pinned to one CPU, started
#    from another folder, through a symlink to the binary, with TZ, NPUSCOPE_NUM_THREADS,
#    NPUSCOPE_NPU_COUNT and ACL_DUMP_DATA set by the caller. normalize() below passes output
#    through unchanged; should a command ever print the wall clock or a timing of its own,
#    rewrite it there.
#  - SQLite readers make recorded.db-shm / -wal beside the copies; --diff skips them.
#
# Diff mode: compares every file of DIR_A and DIR_B (the copied trace files excepted, and
# _run-info.txt, which only says which binary made the folder). --ignore skips files by name
# (a file name or a path relative to the folder; shell globs allowed), e.g. --ignore version.txt
# while `--version` is expected to change. Exits 0 when all compared files are identical, 1 with
# a summary (and the start of each text diff) otherwise, 2 on bad usage.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---------------------------------------------------------------------------------- diff mode
diff_mode() {
  local ignore=() dirs=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --ignore)
        [[ $# -ge 2 ]] || usage
        IFS=, read -r -a more <<<"$2"
        ignore+=("${more[@]}")
        shift 2
        ;;
      --ignore=*)
        IFS=, read -r -a more <<<"${1#--ignore=}"
        ignore+=("${more[@]}")
        shift
        ;;
      -h|--help) usage ;;
      -*) echo "$0: unknown option $1" >&2; usage ;;
      *) dirs+=("$1"); shift ;;
    esac
  done
  [[ ${#dirs[@]} -eq 2 ]] || usage
  local a=${dirs[0]} b=${dirs[1]}
  for d in "$a" "$b"; do
    if [[ ! -d "$d" ]]; then
      echo "$0: $d is not a directory" >&2
      exit 2
    fi
  done
  # Always skipped: the copied inputs (inputs.txt compares them) and the run's notes.
  ignore+=(recorded.db imported.db 'recorded.db-*' 'imported.db-*' _run-info.txt)

  is_ignored() {
    local rel=$1 base=${1##*/} pat
    for pat in "${ignore[@]}"; do
      [[ -n "$pat" ]] || continue
      # shellcheck disable=SC2053  # glob match on purpose
      if [[ "$rel" == $pat || "$base" == $pat || "$rel" == $pat/* ]]; then return 0; fi
    done
    return 1
  }

  local rel compared=0 skipped=0 differ=() only_a=() only_b=()
  while IFS= read -r rel; do
    if is_ignored "$rel"; then
      skipped=$((skipped + 1))
      continue
    fi
    if [[ ! -e "$a/$rel" ]]; then
      only_b+=("$rel")
    elif [[ ! -e "$b/$rel" ]]; then
      only_a+=("$rel")
    else
      compared=$((compared + 1))
      cmp -s "$a/$rel" "$b/$rel" || differ+=("$rel")
    fi
  done < <({ (cd "$a" && find . -type f -printf '%P\n'); (cd "$b" && find . -type f -printf '%P\n'); } | LC_ALL=C sort -u)

  local bad=$((${#differ[@]} + ${#only_a[@]} + ${#only_b[@]}))
  if [[ $bad -eq 0 ]]; then
    echo "identical: $compared files compared ($skipped ignored) in $a and $b"
    return 0
  fi
  for rel in "${differ[@]}"; do
    echo "=== differs: $rel"
    if grep -Iq . "$a/$rel" 2>/dev/null || [[ ! -s "$a/$rel" ]]; then
      diff -u --label "$a/$rel" --label "$b/$rel" "$a/$rel" "$b/$rel" | head -n 40 || true
      local total
      total=$(diff -u "$a/$rel" "$b/$rel" | wc -l || true)
      [[ $total -le 40 ]] || echo "... ($total diff lines in all)"
    else
      echo "(binary files differ)"
    fi
  done
  echo
  echo "SUMMARY: $compared files compared, $skipped ignored"
  [[ ${#differ[@]} -eq 0 ]] || printf '  differ:       %s\n' "${differ[@]}"
  [[ ${#only_a[@]} -eq 0 ]] || printf '  only in %s: %s\n' "$a" "${only_a[@]}"
  [[ ${#only_b[@]} -eq 0 ]] || printf '  only in %s: %s\n' "$b" "${only_b[@]}"
  echo "DIFFERENT: $bad file(s)"
  return 1
}

if [[ $# -ge 1 && "$1" == "--diff" ]]; then
  shift
  diff_mode "$@"
  exit $?
fi

# -------------------------------------------------------------------------------- record mode
[[ $# -eq 4 ]] || usage
OUT=$1
BIN=$2
REC_DB=$3
IMP_DB=$4
for f in "$BIN" "$REC_DB" "$IMP_DB"; do
  if [[ ! -f "$f" ]]; then
    echo "$0: $f: no such file" >&2
    exit 2
  fi
done
[[ -x "$BIN" ]] || { echo "$0: $BIN is not executable" >&2; exit 2; }
if [[ -e "$OUT" && -n "$(ls -A "$OUT" 2>/dev/null)" ]]; then
  echo "$0: $OUT exists and is not empty (give a new folder)" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# The trace files, copied under fixed names (with a -wal holding not yet checkpointed pages).
copy_db() {
  cp "$1" "$OUT/$2"
  [[ ! -f "$1-wal" ]] || cp "$1-wal" "$OUT/$2-wal"
}
copy_db "$REC_DB" recorded.db
copy_db "$IMP_DB" imported.db
inputs_sha() { (cd "$OUT" && sha256sum recorded.db imported.db); }
SHA_BEFORE=$(inputs_sha)

{
  echo "binary:      $BIN"
  echo "binary sha:  $(sha256sum "$BIN" | cut -d' ' -f1)"
  echo "recorded db: $(cd "$(dirname "$REC_DB")" && pwd)/$(basename "$REC_DB")"
  echo "imported db: $(cd "$(dirname "$IMP_DB")" && pwd)/$(basename "$IMP_DB")"
  echo "made:        $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
} >"$OUT/_run-info.txt"

# Rewrites output that legitimately changes from one invocation to the next (see the header):
# none does today. Reads stdin, writes stdout; $1 is the output's name (e.g. report.txt).
normalize() {
  cat
}

# run NAME ARGS...: runs `npuscope ARGS...` in OUT with a clean environment; writes OUT/NAME.
run() {
  local name=$1
  shift
  local out_f err_f rc=0
  out_f=$(mktemp)
  err_f=$(mktemp)
  (
    cd "$OUT"
    # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="${HOME:-/root}" LC_ALL=C TZ=UTC OMP_WAIT_POLICY=PASSIVE \
      timeout 900 bash -c 'exec -a npuscope "$0" "$@"' "$BIN" "$@"
  ) </dev/null >"$out_f" 2>"$err_f" || rc=$?
  {
    printf '$ npuscope'
    [[ $# -eq 0 ]] || printf ' %q' "$@"
    printf '\n'
    section() {  # section TITLE FILE
      printf -- '--- %s (%d lines)\n' "$1" "$(normalize "$name" <"$2" | wc -l)"
      normalize "$name" <"$2"
      if [[ -s "$2" && "$(tail -c1 "$2" | od -An -c | tr -d ' ')" != '\n' ]]; then
        printf '\n[no newline at the end of %s]\n' "$1"
      fi
    }
    section stdout "$out_f"
    section stderr "$err_f"
    printf -- '--- exit code %d\n' "$rc"
  } >"$OUT/$name"
  rm -f "$out_f" "$err_f"
  printf '%-34s exit %d\n' "$name" "$rc"
}

R=recorded.db
I=imported.db

# Version and help of the app and of every subcommand.
run version.txt --version
run help.txt --help
for sub in train infer report export advise ops run import dump compare; do
  run "help.$sub.txt" "$sub" --help
done
for sub in list show export; do
  run "help.dump.$sub.txt" dump "$sub" --help
done

# report
run report.txt report "$R"
run report.json.txt report "$R" --json
run report.csv.txt report "$R" --csv
run report.sort-total.txt report "$R" --sort total
run report.sort-name.txt report "$R" --sort name --top 0
run report.group-by-shape.txt report "$R" --group-by-shape
run report.run1.txt report "$R" --run 1
run report.imported.txt report "$I"
run report.imported.json.txt report "$I" --json
run report.imported.group-by-shape.txt report "$I" --group-by-shape --sort device
run report.cluster.imported.txt report --cluster "$I"
run report.cluster.imported.json.txt report --cluster "$I" --json

# advise
run advise.txt advise "$R"
run advise.json.txt advise "$R" --json
run advise.imported.txt advise "$I"
run advise.imported.json.txt advise "$I" --json

# ops: of a trace file's run, and of a built-in model's training step (runs the step; writes nothing)
run ops.file.txt ops "$R"
run ops.file.csv.txt ops "$R" --csv
run ops.imported.txt ops "$I"
run ops.model-mlp.txt ops --model mlp
run ops.model-cnn-fp16.csv.txt ops --model cnn --dtype float16 --csv

# export (the written files are compared too)
run export.chrome.txt export "$R" --chrome export.chrome.json
run export.csv.txt export "$R" --csv export.csv
run export.run1.txt export "$R" --run 1 --chrome export.run1.chrome.json --csv export.run1.csv
run export.imported.txt export "$I" --chrome export.imported.chrome.json --csv export.imported.csv

# tensor dumps
run dump.list.txt dump list "$R"
run dump.list.run1.txt dump list "$R" --run 1 --step 1 --op addmm
run dump.show.txt dump show "$R" addmm.0.forward.output.0
run dump.show.id.txt dump show "$R" 1 --run 1 --bins 8
run dump.export.npy.txt dump export "$R" --out dump.export.npy --format npy
run dump.export.ascend.txt dump export "$R" --run 1 --out dump.export.ascend

# compare
run compare.perf.txt compare --perf "$I" "$R"
run compare.perf.all.txt compare --perf "$R" "$R" --top 0 --csv compare.perf.csv
run compare.self.txt compare "$R" "$R"
run compare.self.all.txt compare "$R" "$R" --all --csv compare.self.csv

# Errors: one clear line and the exit code.
run error.report.missing-file.txt report missing.db
run error.report.csv-and-json.txt report "$R" --csv --json
run error.report.bad-run.txt report "$R" --run 999
run error.dump.show.unknown.txt dump show "$R" no.such.tensor
run error.compare.imported-self.txt compare "$I" "$I"
run error.no-subcommand.txt

SHA_AFTER=$(inputs_sha)
{
  echo "$SHA_BEFORE"
  if [[ "$SHA_AFTER" == "$SHA_BEFORE" ]]; then
    echo "unchanged by the commands: yes"
  else
    echo "unchanged by the commands: NO, afterwards:"
    echo "$SHA_AFTER"
  fi
} >"$OUT/inputs.txt"
if [[ "$SHA_AFTER" != "$SHA_BEFORE" ]]; then
  echo "$0: warning: a command changed a copied trace file (see $OUT/inputs.txt)" >&2
fi
echo "wrote $(find "$OUT" -type f | wc -l) files to $OUT"
