#!/usr/bin/env bash
# inv.sh [probe] [swapab] [bench] [tests|suite|notests] — run THERE, in one device call (lab/device/README.md; issue #26):
# builds the tree for sm_90a (with .dev/deps.tar.xz from lab/device/prepare.sh when present), then
#   probe: lab/numerics/numerics_probe (which tensor-core families give the same bits; lab/numerics/README.md)
#   swapab: lab/swapab/swapab_bench (the swap-AB wgmma e4m3 decode GEMV draft: bits vs v3, time vs k_gemm_dec)
#   bench: bench --dummy --modes on V4-Flash and V4.1-Flash (4 layers, ctx 4096, prefill 1K / 8K, decode
#          b1 / b8 / b64 / b256): every figure in both modes in one process, invariant / fast per figure
#   tests: the GPU tests the default mode's kernel changes touch (kv post, index select, graphs, forward,
#          engine invariance and CPU equality); suite: the whole GPU suite instead; notests: none.
# Default: probe swapab bench tests. Logs in $OUT: build.log, probe.log, swapab.log, modes_v4.log, modes_v41.log,
# tests.log.
set -uo pipefail
. "$(dirname "$0")/env.sh" # OUT, R, MK, LD_LIBRARY_PATH
WHAT=" ${*:-probe swapab bench tests} "
t0=$(date +%s)
TG=(cuda build-sm90/lab/numerics/numerics_probe build-sm90/lab/swapab/swapab_bench)
case "$WHAT" in *" tests "*|*" suite "*) TG+=(cuda-tests) ;; esac
make -j16 BUILD=build-sm90 "${MK[@]}" "${TG[@]}" > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"; build-sm90/deepinfer-cuda info 2>&1 | head -4
if [[ "$WHAT" == *" probe "* ]]; then
  t1=$(date +%s)
  timeout 300 build-sm90/lab/numerics/numerics_probe > $OUT/probe.log 2>&1; echo "probe rc=$? $(( $(date +%s) - t1 )) s"
  grep -E "^(==|pair|shape)| (yes|no) " $OUT/probe.log
fi
if [[ "$WHAT" == *" swapab "* ]]; then
  t1=$(date +%s)
  timeout 240 build-sm90/lab/swapab/swapab_bench > $OUT/swapab.log 2>&1; echo "swapab rc=$? $(( $(date +%s) - t1 )) s"
  cat $OUT/swapab.log
fi
if [[ "$WHAT" == *" bench "* ]]; then
  for c in v4 v41; do
    t1=$(date +%s)
    env -u DEEPINFER_BATCH_INVARIANT timeout 300 build-sm90/deepinfer-cuda bench --dummy bench/configs/${c}-flash.json \
      --layers 4 --backend cuda --prompt 4096 --prefill 1024,8192 --decode 16 --batch 1,8,64,256 --modes \
      > $OUT/modes_$c.log 2>&1
    echo "== bench --modes ${c}-flash rc=$? $(( $(date +%s) - t1 )) s"
    sed -n '/^# --modes/,$p' $OUT/modes_$c.log
  done
fi
if [[ "$WHAT" == *" suite "* ]]; then
  t1=$(date +%s)
  env -u DEEPINFER_BATCH_INVARIANT build-sm90/test_gpu --timeout 300 > $OUT/tests.log 2>&1
  echo "suite rc=$? $(( $(date +%s) - t1 )) s: $(tail -1 $OUT/tests.log)"; grep -E "^(FAIL|SKIP)" $OUT/tests.log | head -30
elif [[ "$WHAT" == *" tests "* ]]; then
  t1=$(date +%s)
  env -u DEEPINFER_BATCH_INVARIANT build-sm90/test_gpu --timeout 300 gpu_attn_kv_post_bitwise gpu_q_post gpu_index_select \
    gpu_graph_ gpu_forward_ gpu_engine_greedy_near_cpu gpu_engine_together_equal_alone gpu_engine_graphs_equal_eager \
    gpu_compact gpu_mode_switch > $OUT/tests.log 2>&1
  echo "tests rc=$? $(( $(date +%s) - t1 )) s: $(tail -1 $OUT/tests.log)"; grep -E "^(FAIL|SKIP)" $OUT/tests.log | head -30
fi
echo "total $(( $(date +%s) - t0 )) s"
