#!/usr/bin/env bash
# spec_bench.sh [BIN] [ACCELERATOR] [BATCHES] [MAX_TOKENS] — speculative decoding on the demo model in one
# script (docs/speculative.md): for each batch size B, the first B lines of eval/demo/heldout.txt as
# prompts, `BIN generate --max-tokens MAX_TOKENS --temperature 0 --ignore-eos` with speculation off,
# `--nextn-decode 5` (fixed drafts of 5) and `--mtp-varlen 1` (confidence-scheduled), each in its own
# process on the same machine; prints one line per run: batch, mode, TPOT p50 (ms), decode tokens/s per
# request (1000 / TPOT p50), tau and the speed-up over off. Each run serves the B prompts twice, one wave
# after the other (--max-num-seqs B): the first wave takes the lazy module loads and the graph captures of
# the target and the drafter, and TPOT p50 is the second wave's (the steady state; the summary's own TPOT
# covers both waves). Logs in $OUT (default /tmp/spec_bench).
#   GPU:  lab/device/spec_bench.sh build-sm90/deepinfer-cuda cuda 1,8,64
#   CPU:  lab/device/spec_bench.sh build/deepinfer cpu 1,32
# The host split of each verify step (engine host work, plan build + launch, wait for sampled ids,
# acceptance + drafter; src/engine/devq_split.h) needs a binary built apart with the lab flag:
#   make -j16 BUILD=build-split OPT="-O2 -DDI_LAB_SPEC_SPLIT" cuda
#   lab/device/spec_bench.sh build-split/deepinfer-cuda cuda 1   (prints a "lab spec split" line per run)
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/deepinfer-cuda}; ACC=${2:-cuda}; BATCHES=${3:-1,8,64}; MAXT=${4:-128}
OUT=${OUT:-/tmp/spec_bench}; mkdir -p "$OUT"
MODEL=models/deepinfer-demo-v41
echo "# $(date -u +%F) $(git rev-parse --short HEAD 2>/dev/null) $BIN --accelerator $ACC, demo model, $MAXT greedy tokens"
printf "%-6s %-8s %10s %12s %6s %8s\n" batch mode "TPOT p50" "tok/s/req" tau speedup
for B in ${BATCHES//,/ }; do
    P=$OUT/prompts_$B.jsonl
    for wave in 1 2; do head -n "$B" eval/demo/heldout.txt; done | sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$/"/' > "$P"
    off=""
    for mode in off nextn5 varlen; do
        case $mode in off) F="" ;; nextn5) F="--nextn-decode 5" ;; varlen) F="--mtp-varlen 1" ;; esac
        L=$OUT/b${B}_$mode.log
        "$BIN" generate --model $MODEL --accelerator "$ACC" --prompts "$P" --max-tokens "$MAXT" --temperature 0 \
            --ignore-eos --max-num-seqs "$B" $F --output "$OUT/b${B}_$mode.jsonl" > "$L" 2>&1 || { echo "b$B $mode failed:"; tail -5 "$L"; continue; }
        tpot=$(python3 -c 'import json, sys
b = int(sys.argv[2])
t = sorted(json.loads(l)["metrics"]["tpot_s"] for l in open(sys.argv[1]) if json.loads(l)["index"] >= b)
print("%.4f" % (1e3 * t[(len(t) - 1) // 2]) if t else "nan")' "$OUT/b${B}_$mode.jsonl" "$B")
        tau=$(grep -o 'tau [0-9.]*\|τ [0-9.]*' "$L" | head -1 | awk '{print $2}')
        [ $mode = off ] && off=$tpot
        awk -v b="$B" -v m=$mode -v t="$tpot" -v tau="${tau:--}" -v o="$off" \
            'BEGIN { printf "%-6s %-8s %10.3f %12.1f %6s %7.2fx\n", b, m, t, 1000 / t, tau, o / t }'
        grep '^lab spec split' "$L" | sed 's/^/    /'
    done
done
