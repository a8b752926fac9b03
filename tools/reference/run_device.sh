#!/bin/bash
# The whole recipe on the GPU machine (one `run` call): golden parity, tokenizer, config, data,
# training, export, evaluation, C-engine vectors. Needs .data/text from prepare_data.py (carried).
# usage: bash tools/reference/run_device.sh TRAIN_MINUTES   (results packed under $OUT)
set -o pipefail
export PYTHONUNBUFFERED=1
MIN=${1:-6}
R=tools/reference
NAME=deepinfer-demo-v41
W=/tmp/work; MD=$W/$NAME; TK=$W/tok
OUT=${OUT:-/tmp/out}
mkdir -p $MD $TK $W/demo $OUT
LOG=$OUT/log.txt
step() { echo "=== $* ($(date +%T))" | tee -a $LOG; }
step golden;    python3 $R/check_golden.py --json $W/golden.json 2>&1 | tee -a $LOG
step quant;     python3 $R/test_quant.py 2>&1 | tee -a $LOG
step tokenizer; python3 $R/train_tokenizer.py --text .data/text/train.txt --vocab 8192 --out $MD 2>&1 | tee -a $LOG || exit 1
step config;    python3 $R/make_config.py $MD 2>&1 | tee -a $LOG || exit 1
step tokenize;  python3 $R/tokenize_data.py $MD .data/text $TK 2>&1 | tee -a $LOG || exit 1
step train;     python3 $R/train.py --model-dir $MD --tokens $TK --minutes $MIN --ckpt $W/ckpt.pt --log $W/loss.csv 2>&1 | tee -a $LOG
step export;    python3 $R/export.py --model-dir $MD --ckpt $W/ckpt.pt --tokens $TK --json $W/export.json 2>&1 | tee -a $LOG
step st-check;  python3 -c "
import safetensors, glob, collections
c=collections.Counter()
for f in sorted(glob.glob('$MD/*.safetensors')):
    with safetensors.safe_open(f, 'pt') as s:
        for k in s.keys(): c[str(s.get_tensor(k).dtype)]+=1
print('safetensors package reads our shards:', dict(c))" 2>&1 | tee -a $LOG
step pack-model
(cd $W && tar cf - $NAME golden.json export.json loss.csv loss_hp.json 2>/dev/null) | split -b 15M - $OUT/model.part.
step evaluate;  python3 $R/evaluate.py --model-dir $MD --tokens $TK --json $W/eval.json --demo-out $W/demo 2>&1 | tee -a $LOG
step pack-eval
(cd $W && tar cf $OUT/eval.tar demo eval.json 2>/dev/null)
ls -la $OUT | tee -a $LOG
