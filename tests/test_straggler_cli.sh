#!/usr/bin/env bash
# tests/test_straggler_cli.sh: the straggler detector end to end with the real trainer under
# `myriad run` on this machine (no namespaces: every rank on localhost), #28 item 5:
#   - 2 ranks, rank 1 slowed 1.5x from its first step (--inject slow@1:1:1.5): flagged (its
#     individual score stays ~1, which the earlier rule also required to be low, so it was never
#     flagged), rank 0 never;
#   - 4 ranks, rank 1 slowed 1.5x from step 20: flagged, no other.
# Both with the default horizon (60 s): no verdict before the first window whose horizon spans
# 60 s of steps, the flag within 2 windows (10 steps) of it, its horizon scores under 0.75.
# The healthy runs' silence is measured by bench/straggler_fp.sh (bench/straggler_results.md).
set -u
cd "$(dirname "$0")/.."
# Minutes long (the horizon needs 1,500-4,000 steps here): make test-long runs it (STRAGGLER_CLI=1).
if [ "${STRAGGLER_CLI:-0}" != 1 ]; then
    echo "skip straggler_slow_from_step_1_two_ranks (minutes long: make test-long runs it)"
    echo "skip straggler_slow_from_step_20_four_ranks (minutes long: make test-long runs it)"
    exit 0
fi
. tests/lib.sh
test_scratch stragcli
mpi_env
export OMP_NUM_THREADS=1 MYRIAD_SHM_DIR="$T/shm"
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
# the model of bench/straggler_fp.sh and tests/test_straggler_run.sh
train="--arch gpt2 --layers 2 --hidden 128 --heads 4 --ffn 512 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 16 --seq 64 \
--lr 3e-3 --threads 1 --peak-tflops 1"

# flagged NAME RANKS FROM STEPS: rank 1 slowed 1.5x from step FROM is the only straggler, flagged within
# 10 steps of the first window whose horizon spans 60 s, not before
flagged() {
    local name=$1 n=$2 from=$3 steps=$4
    timeout 900 "$M" run -n "$n" --inject "slow@$from:1:1.5" --events "$T/$name.jsonl" -- train $train --dp "$n" \
        --steps "$steps" >"$T/$name.out" 2>&1
    local rc=$?
    local got
    got=$(/usr/bin/python3 - "$T/$name.jsonl" "$from" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
s = [e for e in ev if e["event"] == "straggler"]
full = next((e["last_step"] for e in ev if e["event"] == "rank-times" and (e.get("horizon_s") or 0) >= 60), None)
ok = (len(s) == 1 and s[0]["rank"] == 1 and min(s[0]["horizon_relative"] or 1, s[0]["horizon_individual"] or 1) < 0.75
      and full is not None and full <= s[0]["last_step"] <= full + 10)
print(("ok " if ok else "bad ") + "horizon full at %s; " % full + json.dumps([{k: e.get(k) for k in (
    "rank", "last_step", "relative", "individual", "horizon_relative", "horizon_individual", "horizon_s")} for e in s]))
PY
)
    if [ $rc -eq 0 ] && [[ "$got" == ok* ]]; then pass "$name (${got#ok })"
    else fail "$name" "exit $rc; stragglers: $got $(tail -2 "$T/$name.out")"; fi
}
flagged straggler_slow_from_step_1_two_ranks 2 1 6000
flagged straggler_slow_from_step_20_four_ranks 4 20 6000
