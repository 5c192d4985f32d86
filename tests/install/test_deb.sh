#!/usr/bin/env bash
# Builds the .deb (cpack -G DEB) into a temporary folder and checks what apt-get would act on:
# its dependencies are Debian package names (the libraries' packages as dpkg-shlibdeps names them,
# python3-torch, OpenBLAS's OpenMP build), its files are the CLI, the GUI, the Python package, the
# docs and the desktop entry under /usr, and the unpacked tree runs (`npuscope --version`,
# `import npuscope`) with nothing of the build tree in reach. Usage: test_deb.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
out=$(mktemp -d /tmp/npuscope_deb.XXXXXX)
trap 'rm -rf "$out"' EXIT
source "$(dirname "$0")/common.sh"

(cd "$build" && cpack -G DEB -B "$out" > "$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$out"/npuscope_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no npuscope_*.deb in $out"
depends=$(dpkg-deb -f "$deb" Depends)
for p in libtorch1.13 python3-torch libopenblas0-openmp libsqlite3-0 libzstd1 libqt5widgets5 libqt5charts5 \
         libprotobuf32 libsimdjson14; do
  echo "$depends" | tr ',' '\n' | grep -q "^ *$p\b" || fail "Depends lacks $p: $depends"
done
files=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/npuscope ./usr/libexec/npuscope/npuscope-torch ./usr/bin/npuscope-gui ./usr/lib/libnpuscope_device.so \
         ./usr/share/applications/npuscope.desktop ./usr/share/doc/npuscope/README.md; do
  echo "$files" | grep -qx "$f" || fail "$f is not in the package"
done
echo "$files" | grep -q '^./usr/lib/python3[^/]*/dist-packages/npuscope/_C.*\.so$' || fail "npuscope._C is not in the package"
dpkg-deb -I "$deb" prerm 2>/dev/null | grep -q "py3clean -p npuscope" || fail "no prerm removing the Python byte-code"
size=$(dpkg-deb -f "$deb" Installed-Size)
[ "$size" -lt 50000 ] || fail "installed size $size KiB: are the binaries stripped?"

root="$out/root"
dpkg-deb -x "$deb" "$root"
env -i PATH=/usr/bin:/bin HOME="$out" "$root/usr/bin/npuscope" --version | grep -q "^npuscope " ||
  fail "the packaged npuscope does not run"
py_dir=$(ls -d "$root"/usr/lib/python3*/dist-packages)
check_import "$py_dir" "$out"
echo "test_deb: $(basename "$deb"), $size KiB installed; Depends: $depends"
