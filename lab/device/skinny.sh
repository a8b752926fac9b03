#!/usr/bin/env bash
# skinny.sh [tests] [bench] — run THERE, in one device call (lab/device/README.md; issue #26, the mode-1 skinny
# BF16 / FP8B GEMM, docs/kernels/gemm-float.md): builds the tree for sm_90a (with .dev/deps.tar.xz from
# lab/device/prepare.sh when present), then
#   tests: gpu_gemm_inv_skinny_* (skinny = k_mma mode 1 bitwise, rows alone, dispatch at 16 / 17, fused argmax,
#          forced geometries),
#          the other mode-1 float tests and the GPU tests whose paths now run the skinny kernel (mode-1 wo_a,
#          lm_head argmax, blockdiag, graphs, engine invariance and CPU equality, mode switch)
#   bench: gemm_float_bench skinny (skinny vs k_mma mode 1 vs fast AUTO at M = 1, 2, 4, 8, 16; HBM floor)
#   woa8:  gemm_float_bench woa8 (the lab FP8B wo_a variants, lab/gemm/skinny_f8_variants.cu: bits vs the
#          product, graph us, fraction of the floor)
# Default: tests bench. Logs in $OUT: build.log, tests.log, bench.log, woa8.log.
set -uo pipefail
. "$(dirname "$0")/env.sh" # OUT, R, MK, LD_LIBRARY_PATH
WHAT=" ${*:-tests bench} "
t0=$(date +%s)
make -j16 BUILD=build-sm90 "${MK[@]}" cuda cuda-tests build-sm90/lab/gemm/gemm_float_bench > $OUT/build.log 2>&1 ||
  { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
if [[ "$WHAT" == *" tests "* ]]; then
  t1=$(date +%s)
  env -u DEEPINFER_BATCH_INVARIANT build-sm90/test_gpu --timeout 300 gpu_gemm_inv_ gpu_lm_argmax gpu_woa_fp8 \
    gpu_gemm_bf16_f32_mode1 gpu_gemm_blockdiag gpu_graph_ gpu_engine_greedy_equals_cpu gpu_engine_together_equal_alone \
    gpu_mode_switch > $OUT/tests.log 2>&1
  echo "tests rc=$? $(( $(date +%s) - t1 )) s: $(tail -1 $OUT/tests.log)"
  grep -E "^(FAIL|SKIP)|skinny" $OUT/tests.log | head -40
fi
if [[ "$WHAT" == *" bench "* ]]; then
  t1=$(date +%s)
  timeout 400 build-sm90/lab/gemm/gemm_float_bench skinny > $OUT/bench.log 2>&1
  echo "bench rc=$? $(( $(date +%s) - t1 )) s"
  sed -n '/^-- summary/,$p' $OUT/bench.log
fi
if [[ "$WHAT" == *" woa8 "* ]]; then
  t1=$(date +%s)
  timeout 200 build-sm90/lab/gemm/gemm_float_bench woa8 > $OUT/woa8.log 2>&1
  echo "woa8 rc=$? $(( $(date +%s) - t1 )) s"
  cat $OUT/woa8.log
fi
echo "total $(( $(date +%s) - t0 )) s"
