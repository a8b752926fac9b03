#!/usr/bin/env bash
# prepare.sh [OLD_COMMIT] — run HERE before a device session (lab/device/README.md): puts into .dev/
# (ignored by nothing, so it travels with the working tree) the PCRE2 and libmicrohttpd headers and
# runtimes that the GPU machine's image lacks (.dev/deps.tar.xz), and, with OLD_COMMIT, that commit's code as .dev/old.tar.xz for a
# before/after comparison in one device call.
set -euo pipefail
cd "$(dirname "$0")/../.."
# packed as .dev/deps.tar.xz (the working tree the device tool carries is limited to 64 MiB, and the
# tracked files take nearly all of it); session.sh / load.sh unpack it into /tmp/devdeps there
T=$(mktemp -d)
mkdir -p $T/inc $T/lib .dev
cp /usr/include/pcre2.h $T/inc/
cp -L "$(ldconfig -p | awk '/libpcre2-8.so.0 .*x86-64/ {print $NF; exit}')" $T/lib/libpcre2-8.so.0
ln -sf libpcre2-8.so.0 $T/lib/libpcre2-8.so
# libmicrohttpd (deepinfer serve) is missing there too (its own dependencies, GnuTLS and friends, are there)
cp /usr/include/microhttpd.h $T/inc/
cp -L "$(ldconfig -p | awk '/libmicrohttpd.so.12 .*x86-64/ {print $NF; exit}')" $T/lib/libmicrohttpd.so.12
ln -sf libmicrohttpd.so.12 $T/lib/libmicrohttpd.so
tar cJf .dev/deps.tar.xz -C $T inc lib
rm -rf $T
if [ $# -ge 1 ]; then
    git archive "$1" src tools include Makefile examples bench/configs tests/runner.c tests/test.h | xz -9 > .dev/old.tar.xz
fi
cp lab/device/bits.sh lab/device/session.sh lab/device/load.sh .dev/
du -sh .dev
