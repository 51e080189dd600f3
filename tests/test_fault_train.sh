#!/usr/bin/env bash
# test_fault_train.sh: the real trainer under the fault-tolerant launcher (tp 2 x dp 2,
# checkpoints every step): a killed rank and a hung rank are detected, the job is relaunched
# with --resume auto and finishes with weights bit-identical to a failure-free run, recomputing
# at most one step (the launcher's "resumed" event).
set -u
cd "$(dirname "$0")/.."
M=$PWD/bin/myriad
T=$(mktemp -d /tmp/myriad-fault-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass() { echo "ok $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
if ! command -v mpirun >/dev/null; then echo "skip test_fault_train (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
common="--arch gpt2 --layers 4 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 8 --seq 8 --micro-batch 1 --steps 12 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --tp 2 --dp 2"
$M run -n 4 -- train $common --save "$T/ref" >/dev/null 2>&1

fault() { # NAME SPEC EXTRA-RUN-FLAGS...
    local name=$1 spec=$2; shift 2
    rm -rf "$T/run" "$T/events.jsonl"
    timeout 300 $M run -n 4 --max-restarts 3 --inject "$spec" --events "$T/events.jsonl" "$@" -- \
        train $common --save "$T/run" --save-every 1 --sync-save >"$T/out" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && cmp -s "$T/ref/model.safetensors" "$T/run/model.safetensors" &&
        /usr/bin/python3 - "$T/events.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
res = [e for e in ev if e["event"] == "resumed"]
assert res and all(e["recomputed_steps"] <= 1 for e in res), res
assert ev[-1]["event"] == "finished" and ev[-1]["status"] == "ok", ev[-1]
print("# restarts", ev[-1]["restarts"], "recomputed", [e["recomputed_steps"] for e in res])
PY
    then pass "$name"; else fail "$name" "rc=$rc $(grep -v '^step' $T/out | tail -3)"; fi
}
fault kill_rank_recovers_bitidentical kill@6:1 --hang-timeout 30
fault hang_rank_recovers_bitidentical hang@5:2 --hang-timeout 3
