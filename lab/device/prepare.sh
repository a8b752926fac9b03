#!/usr/bin/env bash
# prepare.sh [OLD_COMMIT] — run HERE before a device session (lab/device/README.md): puts into .dev/
# (ignored by nothing, so it travels with the working tree) the PCRE2 and libmicrohttpd headers and
# runtimes that the GPU machine's image lacks, and, with OLD_COMMIT, that commit's code as .dev/old.tar.xz for a
# before/after comparison in one device call.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .dev/inc .dev/lib
cp /usr/include/pcre2.h .dev/inc/
cp -L "$(ldconfig -p | awk '/libpcre2-8.so.0 .*x86-64/ {print $NF; exit}')" .dev/lib/libpcre2-8.so.0
ln -sf libpcre2-8.so.0 .dev/lib/libpcre2-8.so
# libmicrohttpd (deepinfer serve) is missing there too
cp /usr/include/microhttpd.h .dev/inc/
cp -L "$(ldconfig -p | awk '/libmicrohttpd.so.12 .*x86-64/ {print $NF; exit}')" .dev/lib/libmicrohttpd.so.12
ln -sf libmicrohttpd.so.12 .dev/lib/libmicrohttpd.so
# (its own dependencies, GnuTLS and friends, are on that image; the tree's 64 MiB limit leaves no room for them)
if [ $# -ge 1 ]; then
    git archive "$1" src tools include Makefile examples bench/configs tests/runner.c tests/test.h | xz -9 > .dev/old.tar.xz
fi
cp lab/device/bits.sh lab/device/session.sh lab/device/load.sh .dev/
du -sh .dev
