#!/usr/bin/env bash
# Installs the build into a temporary prefix (cmake --install --strip) and uses it as a person
# would, with nothing of the build tree in reach: `npuscope --version`, a short `npuscope train`
# and `report`, `import npuscope` from the prefix's dist-packages (what Debian's python3 puts on
# sys.path for /usr and /usr/local), the GUI's libraries resolved, the desktop entry and docs in
# place. Usage: test_install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
prefix=$(mktemp -d /tmp/npuscope_install.XXXXXX)
work=$(mktemp -d /tmp/npuscope_install_run.XXXXXX)
trap 'rm -rf "$prefix" "$work"' EXIT
source "$(dirname "$0")/common.sh"

cmake --install "$build" --prefix "$prefix" --strip > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install failed"; }
py_dir=$(ls -d "$prefix"/lib/python3*/dist-packages 2>/dev/null | head -1)
for f in bin/npuscope libexec/npuscope/npuscope-torch bin/npuscope-gui share/applications/npuscope.desktop share/doc/npuscope/README.md \
         share/doc/npuscope/docs/schema.md; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
[ -n "$py_dir" ] && [ -e "$py_dir/npuscope/__init__.py" ] || fail "the npuscope Python package is not installed"
ls "$py_dir"/npuscope/_C*.so > /dev/null || fail "npuscope._C is not installed"

# Nothing may come from the build tree: no RUNPATH into it, every library found.
for bin in "$prefix/bin/npuscope" "$prefix/libexec/npuscope/npuscope-torch" "$prefix/bin/npuscope-gui" \
           "$py_dir"/npuscope/_C*.so; do
  if readelf -d "$bin" | grep -E 'R(UN)?PATH' | grep -q "$build"; then fail "$bin has a RUNPATH into the build tree"; fi
  if ldd "$bin" | grep -q "not found"; then ldd "$bin" | grep "not found" >&2; fail "$bin: libraries not found"; fi
done

# npuscope itself loads no libtorch (it starts npuscope-torch for train, infer, ops and calibrate).
if ldd "$prefix/bin/npuscope" | grep -qE 'libtorch|libc10'; then fail "bin/npuscope loads libtorch"; fi

cd "$work"  # not the source or build tree
env -i PATH=/usr/bin:/bin HOME="$work" "$prefix/bin/npuscope" --version | grep -q "^npuscope " || fail "npuscope --version"
env -i PATH=/usr/bin:/bin HOME="$work" OMP_WAIT_POLICY=PASSIVE "$prefix/bin/npuscope" train --model mlp \
  --dataset synthetic --steps 3 --db "$work/run.db" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "npuscope train"; }
env -i PATH=/usr/bin:/bin HOME="$work" "$prefix/bin/npuscope" report "$work/run.db" > "$work/report.txt" 2>&1 ||
  { cat "$work/report.txt"; fail "npuscope report"; }
grep -q "steps" "$work/report.txt" || fail "the report names no steps"

# Python: the prefix's dist-packages as a site directory (as site.py adds /usr/local's), no PYTHONPATH.
check_import "$py_dir" "$work"
echo "test_install: installed into $prefix: npuscope, npuscope-gui, the Python package, docs, desktop entry; train, report and import ran"
