#!/usr/bin/env bash
# tokenizer_bench.sh — encode speed of deepinfer's tokenizer vs HF tokenizers on
# the same English text, one thread each.
#
#   bench/tokenizer_bench.sh [CHUNK]      (default CHUNK=4096 bytes; 0 = one string)
#
# The corpus (4,000,000 bytes, not committed) is built from files every Debian
# machine has: /usr/share/common-licenses/* then man(1) pages, decompressed, in
# sorted order. The peer needs `npm ci` in tests/oracle (node_modules is ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
CHUNK="${1:-4096}"
CORPUS="${TMPDIR:-/tmp}/deepinfer_bench_en.txt"
if [ ! -s "$CORPUS" ]; then
    {
        cat /usr/share/common-licenses/*
        for f in $(ls /usr/share/man/man1/*.gz | sort | head -400); do zcat "$f" 2>/dev/null || true; done
    } | head -c 4000000 > "$CORPUS"
fi
make -s -j"$(nproc)" build/deepinfer
./build/deepinfer tokenize --tokenizer tests/data/tokenizer --bench "$CORPUS" --repeat 5 --chunk "$CHUNK"
if [ -d tests/oracle/node_modules ]; then
    node tests/oracle/bench_peer.js "$CORPUS" 3 "$CHUNK"
else
    echo "peer skipped: run (cd tests/oracle && npm ci) first"
fi
