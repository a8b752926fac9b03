#!/usr/bin/env bash
# fuzz/run_all.sh — a time-boxed run of every libFuzzer target on its seed
# corpus (CI: .ci/run; CONTRIBUTING.md "Fuzzing").
#
#   fuzz/run_all.sh [SECONDS_PER_TARGET [PARALLEL]]     (defaults 60 and 2)
#
# Needs the targets built (`make fuzz`, into build-fuzz/). Seeds come from
# fuzz/make_seeds.py, written fresh under build-fuzz/seeds/; each target
# writes the inputs it finds into its own scratch corpus, so the seeds stay
# as generated. Runs PARALLEL targets at a time. Exits 1 if any target
# reports a finding (crash, leak, timeout, out-of-memory: libFuzzer's exit
# status, or an artifact file) or does not start; the findings are left in
# build-fuzz/findings/ and each target's log in build-fuzz/logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
par=${2:-2}
B=build-fuzz
rm -rf "$B/seeds" "$B/scratch" "$B/findings" "$B/logs"
mkdir -p "$B/scratch" "$B/findings" "$B/logs"
python3 fuzz/make_seeds.py "$B/seeds" >/dev/null || { echo "fuzz: make_seeds.py failed" >&2; exit 1; }

# target -> seed directory and its own options (CONTRIBUTING.md's table)
declare -A seeds=(
    [fuzz_safetensors]="safetensors -max_len=65536 -dict=fuzz/safetensors.dict"
    [fuzz_config]="config -max_len=8192 -dict=fuzz/config.dict"
    [fuzz_json]="json"
    [fuzz_regex]="regex -timeout=10"
    [fuzz_schema]="schema -timeout=10"
    [fuzz_gbnf]="gbnf -timeout=10"
    [fuzz_chat]="chat"
    [fuzz_tokenizer]="tokenizer -timeout=10"
    [fuzz_tokenizer_load]="tokenizer_load -timeout=10"
    [fuzz_oai_request]="oai_request"
)

run_one() {
    local t=$1 spec=${seeds[$1]:-}
    if [ -z "$spec" ]; then
        echo "fuzz: $t has no seed corpus in fuzz/run_all.sh" >&2
        return 1
    fi
    local dir=${spec%% *} opts=""
    [ "$spec" != "$dir" ] && opts=${spec#* }
    mkdir -p "$B/scratch/$t"
    # shellcheck disable=SC2086
    "$B/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$B/findings/$t-" $opts \
        "$B/scratch/$t" "$B/seeds/$dir" >"$B/logs/$t.log" 2>&1
    echo $? >"$B/logs/$t.rc"
}

targets=()
for src in fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    [ -x "$B/$t" ] || { echo "fuzz: $B/$t is not built (make fuzz)" >&2; exit 1; }
    targets+=("$t")
done

fail=0
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
    run_one "$t" &
done
wait
for t in "${targets[@]}"; do
    st=$(cat "$B/logs/$t.rc" 2>/dev/null || echo 127)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/logs/$t.log")
    if [ "$st" -ne 0 ] || compgen -G "$B/findings/$t-*" >/dev/null; then
        echo "FUZZ FAIL $t (exit $st, ${execs:-?} runs): $(grep -m1 -E 'ERROR|SUMMARY|deadly signal|Timeout|out-of-memory' "$B/logs/$t.log")"
        fail=1
    else
        echo "fuzz ok   $t: ${execs:-?} runs in ${secs}s"
    fi
done
[ "$fail" -eq 0 ] || echo "fuzz: findings in $B/findings/, logs in $B/logs/" >&2
exit "$fail"
