#!/usr/bin/env bash
# load.sh [big|disk|all|final] — run THERE (lab/device/README.md): the loading-at-scale measurements of
# docs/loading.md in one device call. big: bench --dummy at depths that need the streaming loader
# (V4-Flash 24 layers, V4.1-Flash 10 layers, V4-Flash 43 layers with 64 routed experts) and the
# refusals (V4-Flash 43 layers on the device, V4.1-Flash 40 layers on the CPU); disk: a dummy
# checkpoint written to local disk, its cold sequential read rate and a load of it (bench --load).
set -uo pipefail
WHAT=${1:-all}
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; R=$PWD
D=/tmp/devdeps; mkdir -p $D && tar xJf $R/.dev/deps.tar.xz -C $D
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"; done
MK=(PCRE2_CFLAGS=-I$D/inc "PCRE2_LIBS=-L$D/lib -Wl,-rpath,$D/lib -lpcre2-8" "MHD_LIBS=-L$D/lib -Wl,-rpath,$D/lib -lmicrohttpd" "NVCC_ARCH=-gencode arch=compute_90a,code=sm_90a")
t0=$(date +%s)
[ -x build-sm90/deepinfer-cuda ] || make -j16 BUILD=build-sm90 "${MK[@]}" cuda > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; $(free -g | awk '/Mem:/ {print "host RAM " $2 " GB, available " $7 " GB"}'); disk $(df -h /tmp | awk 'NR==2 {print $4}') free"
B=$R/build-sm90/deepinfer-cuda
BENCH="--backend cuda --prompt 1024 --prefill 1024 --decode 8 --batch 1,8"
run() { # name, args...
  local n=$1; shift; local t=$(date +%s)
  /usr/bin/time -v "$B" "$@" > $OUT/$n.log 2> $OUT/$n.err; local rc=$?
  echo "== $n rc=$rc $(( $(date +%s) - t )) s  maxrss $(awk -F: '/Maximum resident/ {printf "%.2f GB", $2/1048576}' $OUT/$n.err)"
  grep -E "plan|weights|device|host|VmHWM|refus|does not fit|needs|loaded|load|read|first token|error|decode b|prefill 1024" $OUT/$n.err $OUT/$n.log | grep -v "^\s*$" | cut -c1-220 | head -24
}
if [ "$WHAT" = final ]; then # after a change: the two acceptance depths only
  run v4_24 bench --dummy bench/configs/v4-flash.json --layers 24 $BENCH
  run v41_10 bench --dummy bench/configs/v41-flash.json --layers 10 $BENCH
fi
if [ "$WHAT" = big ] || [ "$WHAT" = all ]; then
  run v4_24 bench --dummy bench/configs/v4-flash.json --layers 24 $BENCH
  run v41_10 bench --dummy bench/configs/v41-flash.json --layers 10 $BENCH
  run v4_43e64 bench --dummy bench/configs/v4-flash.json --layers 43 --experts 64 $BENCH
  run v4_43_refused bench --dummy bench/configs/v4-flash.json --layers 43 --backend cuda --plan
  run v41_40_cpu_refused bench --dummy bench/configs/v41-flash.json --layers 40 --backend cpu --plan
fi
if [ "$WHAT" = disk ] || [ "$WHAT" = all ] || [ "$WHAT" = final ]; then
  rm -rf /tmp/ck; t=$(date +%s)
  "$B" dummy bench/configs/v4-flash.json --layers 8 --out /tmp/ck > $OUT/write.log 2>&1; echo "== write rc=$? $(( $(date +%s) - t )) s: $(du -sh /tmp/ck | cut -f1)"
  tail -3 $OUT/write.log
  run load_cuda bench --load /tmp/ck --backend cuda
  rm -rf /tmp/ck
fi
echo "total $(( $(date +%s) - t0 )) s"
