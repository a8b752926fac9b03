#!/usr/bin/env bash
# wg16.sh [quick] — run THERE, in one device call (lab/device/README.md; issue #26): builds the CUDA library and
# lab/gemm16/gemm16_bench for sm_90a only (with .dev/deps.tar.xz from lab/device/prepare.sh when present), then
# runs the bench: the f16 wgmma FP8 GEMM (src/ops/cuda/dic_gemm_f16_wg.cu, k_gemm_dec's bits) on V4-Flash shapes,
# act blocks 128 (V4) and 32 (V4.1), M = 1 .. 8192 (quick: M = 1, 65, 4096), every output bitwise against the row
# alone in fast mode, and its time against dic_gemm's fast and invariant paths. Logs in $OUT: build.log, gemm16.log.
set -uo pipefail
. "$(dirname "$0")/env.sh" # OUT, R, MK, LD_LIBRARY_PATH
t0=$(date +%s)
make -j16 BUILD=build-sm90 "${MK[@]}" build-sm90/lab/gemm16/gemm16_bench > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
grep -E "C75[0-9][0-9]|spill" $OUT/build.log | grep -v " 0 bytes spill" | head -5
echo "build $(( $(date +%s) - t0 )) s"
t1=$(date +%s)
timeout 240 build-sm90/lab/gemm16/gemm16_bench ${1:-} > $OUT/gemm16.log 2>&1; rc=$?
echo "gemm16_bench rc=$rc $(( $(date +%s) - t1 )) s"
cat $OUT/gemm16.log
echo "total $(( $(date +%s) - t0 )) s"
