#!/usr/bin/env bash
# tests/ops/cuda/run.sh — the GPU session: run in one device call on the H200
# (the device tool), after `make cuda-tests lab` built the binaries here or there.
#
#   tests/ops/cuda/run.sh [tests|bench|all] [TEST FILTER...]
#
# Prints the GPU state, runs the GPU test runner (last line "N passed,
# N failed, N skipped"; a test whose hardware is missing, e.g. wgmma off
# sm_90, is a SKIP with its reason, never a pass) and every lab program in
# $BUILD/lab/<family>/ (lab/README.md), and leaves the logs in $OUT
# (the device tool brings that folder back).
set -uo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
[ $# -gt 0 ] && shift
B=${BUILD:-build}
OUT=${OUT:-/tmp/deepinfer-gpu-out}
mkdir -p "$OUT"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
    --format=csv 2>&1 | tee "$OUT/gpu.txt"
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
    "$B/test_gpu" --timeout 300 "$@" 2>&1 | tee "$OUT/test_gpu.log"
    rc=${PIPESTATUS[0]}
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    for b in "$B"/lab/*/*; do
        [ -f "$b" ] && [ -x "$b" ] || continue
        fam=$(basename "$(dirname "$b")")
        echo "== $fam/$(basename "$b")"
        "$b" 2>&1 | tee "$OUT/lab-$fam-$(basename "$b").log"
    done
fi
# the test summary last, where the device tool's output tail shows it
[ -f "$OUT/test_gpu.log" ] && tail -1 "$OUT/test_gpu.log"
exit $rc
