#!/usr/bin/env bash
# bits.sh BIN TAG: raw logits (score) and generate outputs in both modes, sha256 into $OUT/bits_TAG.txt
BIN=$1; TAG=$2; ROOT=${3:-$PWD}; D=/tmp/bits_$TAG; mkdir -p $D
P=3,17,101,250,511,7,900,42,64,128,1000,5,77,300,222,19
for mode in 1 0; do
  for m in tests/data/golden/v4-tiny-a tests/data/golden/v41-tiny-a models/deepinfer-demo-v41; do
    n=$(basename $m); EH=; [ $n = v41-tiny-a ] && EH="--engram-hash $ROOT/$m/expected/manifest.json"
    DEEPINFER_BATCH_INVARIANT=$mode $BIN score --model $ROOT/$m --prompt-ids $P --all-positions --steps 12 $EH \
      --backend cuda --logits-out $D/score_${n}_m$mode.bin --ids-out $D/score_${n}_m$mode.ids > $D/score_${n}_m$mode.log 2>&1 || echo "score $n m$mode rc=$?"
  done
  DEEPINFER_BATCH_INVARIANT=$mode $BIN generate --model $ROOT/models/deepinfer-demo-v41 --accelerator cuda --quiet --prompt "In the beginning God created" \
    --prompt "And Jesus said unto them," --prompt "CYNIC, n. A blackguard whose" --prompt "It was a dark and stormy night" \
    --max-tokens 40 --temperature 0.8 --top-p 0.95 --seed 1 --logprobs 3 --output $D/gen_m$mode.jsonl > $D/gen_m$mode.log 2>&1 || echo "gen m$mode rc=$?"
  DEEPINFER_BATCH_INVARIANT=$mode $BIN generate --model $ROOT/models/deepinfer-demo-v41 --accelerator cuda --quiet --prompt "In the beginning God created" \
    --prompt "The old man said" --max-tokens 40 --temperature 0 --logprobs 2 --output $D/greedy_m$mode.jsonl > $D/greedy_m$mode.log 2>&1 || echo "greedy m$mode rc=$?"
done
(cd $D && sha256sum *.bin *.ids *.jsonl) > $OUT/bits_$TAG.txt
