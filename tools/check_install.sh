#!/bin/sh
# check_install.sh — `make install` works for a program outside the tree
# (README.md "Use it from your own C program"):
#   1. `make install PREFIX=<tmp>/prefix` and `make install DESTDIR=<tmp>/stage`
#      put lib/libdeepinfer.a, lib/libdeepinfer.so (+ soname links),
#      include/deepinfer.h and lib/pkgconfig/deepinfer.pc in place;
#   2. libdeepinfer.so exports deepinfer_* symbols only;
#   3. examples/offline_inference.c, copied out of the tree, builds with
#      `cc app.c $(pkg-config --cflags --libs deepinfer)` (the shared library)
#      and against the static archive with the .pc's Libs.private, and both
#      print what build/examples/offline_inference prints on the demo model.
# Usage: tools/check_install.sh [BUILD_DIR]   (default build; run from anywhere)
# Called by tests/tools/test_install.c; needs cc, make, pkg-config, nm.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/deepinfer-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

# a make started from a test inherits none of the outer make's job server
run_make() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$src" BUILD="$build" "$@" >"$tmp/make.log" 2>&1 ||
    { cat "$tmp/make.log" >&2; fail "make $* failed"; }; }

prefix=$tmp/prefix
run_make install PREFIX="$prefix"
run_make install PREFIX=/usr/local DESTDIR="$tmp/stage"
for f in lib/libdeepinfer.a lib/libdeepinfer.so lib/pkgconfig/deepinfer.pc include/deepinfer.h; do
    [ -e "$prefix/$f" ] || fail "PREFIX: $f not installed"
    [ -e "$tmp/stage/usr/local/$f" ] || fail "DESTDIR: $f not installed"
done
grep -q "^prefix=/usr/local$" "$tmp/stage/usr/local/lib/pkgconfig/deepinfer.pc" || fail "DESTDIR leaked into deepinfer.pc"

soname=$(readelf -d "$prefix/lib/libdeepinfer.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ -n "$soname" ] && [ -e "$prefix/lib/$soname" ] || fail "no soname link (soname '$soname')"
extra=$(nm -D --defined-only "$prefix/lib/libdeepinfer.so" | awk '{print $3}' | grep -v '^deepinfer_' || true)
[ -z "$extra" ] || fail "libdeepinfer.so exports more than the public API: $(echo $extra | head -c 300)"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cp "$src/examples/offline_inference.c" "$tmp/app.c"
cd "$tmp"
# shellcheck disable=SC2046 # word splitting of pkg-config's flags is intended
cc -std=c11 -Wall -Werror app.c $(pkg-config --cflags --libs deepinfer) -o app_shared || fail "shared build failed"
libdir=$(pkg-config --variable=libdir deepinfer)
private=$(pkg-config --static --libs deepinfer | tr ' ' '\n' | grep -v -e '^-ldeepinfer$' -e "^-L" | tr '\n' ' ')
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Werror app.c $(pkg-config --cflags deepinfer) "$libdir/libdeepinfer.a" $private -o app_static ||
    fail "static build failed (Libs.private: $private)"

model=$src/models/deepinfer-demo-v41
"$src/$build/examples/offline_inference" "$model" >want.txt 2>/dev/null || fail "the in-tree example failed"
LD_LIBRARY_PATH="$prefix/lib" ./app_shared "$model" >shared.txt 2>/dev/null || fail "the shared-library program failed"
./app_static "$model" >static.txt 2>/dev/null || fail "the static program failed"
cmp -s want.txt shared.txt || fail "the shared-library program's output differs from the in-tree example's"
cmp -s want.txt static.txt || fail "the static program's output differs from the in-tree example's"
echo "check_install: ok (soname $soname, $(nm -D --defined-only "$prefix/lib/libdeepinfer.so" | wc -l) exported symbols)"
