#!/usr/bin/env bash
# session.sh [suite|nosuite] [old|noold] [bench|nobench] [TEST FILTER...] — run THERE, in one device call
# (lab/device/README.md): builds the tree for sm_90a (and .dev/old.tar.xz beside it), runs the GPU suite,
# dumps raw logits and generate outputs in both modes (bits.sh) and compares old with new, and runs the
# b1/b64 bench --dummy of each build in its own process.
set -uo pipefail
SUITE=${1:-suite}; OLD=${2:-old}; BENCH=${3:-bench}; shift 3 || true
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; R=$PWD
D=/tmp/devdeps; mkdir -p $D && tar xJf $R/.dev/deps.tar.xz -C $D
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"; done
MK=(PCRE2_CFLAGS=-I$D/inc "PCRE2_LIBS=-L$D/lib -Wl,-rpath,$D/lib -lpcre2-8" "MHD_LIBS=-L$D/lib -Wl,-rpath,$D/lib -lmicrohttpd" "NVCC_ARCH=-gencode arch=compute_90a,code=sm_90a")
t0=$(date +%s)
make -j16 BUILD=build-sm90 "${MK[@]}" all cuda cuda-tests > $OUT/build_new.log 2>&1 || { tail -30 $OUT/build_new.log; exit 1; }
echo "build new $(( $(date +%s) - t0 )) s"
if [ "$OLD" = old ]; then
  mkdir -p /tmp/old && tar xJf .dev/old.tar.xz -C /tmp/old && ln -sfn $R/tests/data /tmp/old/tests/data && ln -sfn $R/models /tmp/old/models
  (cd /tmp/old && make -j16 BUILD=build-old "${MK[@]}" cuda > $OUT/build_old.log 2>&1) || { tail -30 $OUT/build_old.log; exit 1; }
  echo "build old $(( $(date +%s) - t0 )) s"
fi
build-sm90/deepinfer-cuda info 2>&1 | head -8
if [ "$SUITE" = suite ]; then
  t1=$(date +%s)
  env -u DEEPINFER_BATCH_INVARIANT build-sm90/test_gpu --timeout 300 "$@" > $OUT/suite_new.log 2>&1
  echo "suite rc=$? $(( $(date +%s) - t1 )) s: $(tail -1 $OUT/suite_new.log)"
  grep -E "^(FAIL|SKIP)" $OUT/suite_new.log | head -30
fi
bash $R/.dev/bits.sh $R/build-sm90/deepinfer-cuda new $R
[ "$OLD" = old ] && (cd /tmp/old && OUT=$OUT bash $R/.dev/bits.sh /tmp/old/build-old/deepinfer-cuda old $R)
if [ "$OLD" = old ]; then
  paste <(awk '{print $2, $1}' $OUT/bits_old.txt) <(awk '{print $1}' $OUT/bits_new.txt) | awk '{print ($2==$3?"same":"DIFF"), $1}'
fi
tar czf $OUT/bits.tgz -C /tmp bits_new $( [ "$OLD" = old ] && echo bits_old )
if [ "$BENCH" = bench ]; then
  BC="bench --dummy bench/configs/v4-flash.json --layers 4 --backend cuda --prompt 4096 --prefill 1024 --decode 16 --batch 1,64"
  for b in old new; do
    [ $b = old ] && [ "$OLD" != old ] && continue
    BIN=$R/build-sm90/deepinfer-cuda; [ $b = old ] && BIN=/tmp/old/build-old/deepinfer-cuda
    DEEPINFER_BATCH_INVARIANT=0 $BIN $BC > $OUT/bench_$b.log 2>&1
    echo "== $b"; grep -E "^(prefill|decode).*graph|^prefill 1024" $OUT/bench_$b.log
    cat $OUT/bench_$b.log >> $OUT/bench_all.log
  done
fi
echo "total $(( $(date +%s) - t0 )) s"
