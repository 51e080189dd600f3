#!/usr/bin/env bash
# test_calibrate.sh: `myriad bench calibrate` writes a hardware and a cluster file that
# `myriad sim` reads: one GEMM row per product of the replayed step (forward, input gradient,
# weight gradient of QKV, projection, MLP up and down, lm_head) for every --tokens x --tp, in the
# simulator's (M, N, K) convention; --cp 2 (ring attention's blocks) feeds a cp 2 prediction; bad
# options are refused. Rates are not asserted (timing).
set -u
cd "$(dirname "$0")/.."
B=./bin/myriad
T=$(mktemp -d /tmp/myriad-calibrate.XXXXXX)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ok() { echo "ok $1"; }
fail() { echo "FAIL $1"; shift; echo "  $*" >&2; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name" "$*"; fi; }

SHAPE="--hidden 64 --heads 2 --vocab 256 --seq 32 --reps 1 --window 0.01"
if $B bench calibrate $SHAPE --layers 2 --tokens 64,32 --tp 1,2 --out "$T/cal" >"$T/out" 2>"$T/err"; then
    check calibrate_gemm_rows python3 - "$T/cal.hw.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["gemm_table"]
C, F, V = 64, 256, 256
want = []
for tp in (1, 2):
    for n in (64, 32):
        for ic, oc in ((C, 3 * C // tp), (C // tp, C), (C, F // tp), (F // tp, C), (C, V // tp)):
            want += [[n, oc, ic], [n, ic, oc], [ic, oc, n]]
got = [r[:3] for r in rows]
assert got == want, (got, want)
assert all(r[3] > 0 for r in rows), rows
assert abs(d["peak_tflops"]["fp32"] * 1e3 - max(r[3] for r in rows)) < 1e-3 * max(r[3] for r in rows)
assert 0 < d["attn_eff"] <= 1 and d["hbm_tbps"] > 0 and d["ce_ns_per_logit"] > 0
PY
    check calibrate_feeds_sim bash -c "$B sim --gpu $T/cal.hw.json --cluster $T/cal.cluster.json --software myriad \
        --arch gpt2 --layers 2 --hidden 64 --heads 2 --vocab 256 --seq 32 --dtype fp32 --global-batch 2 \
        --micro-batch 2 --recompute none --gpus 1 --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"step_time_s\"] > 0'"
else
    fail calibrate_gemm_rows "$(cat "$T/err")"
    fail calibrate_feeds_sim "calibrate failed"
fi
# --cp 2: the attention timed is ring attention's blocks of one cp rank (--tokens = its rows), and
# sim predicts a cp 2 step from the file
if $B run -n 2 -- bench calibrate $SHAPE --layers 1 --tokens 16 --cp 2 --out "$T/cp2" >"$T/outcp" 2>"$T/errcp" </dev/null; then
    check calibrate_cp2_feeds_sim bash -c "python3 -c \"import json; d = json.load(open('$T/cp2.hw.json')); assert 0 < d['attn_eff'] <= 1, d\" &&
        $B sim --gpu $T/cp2.hw.json --cluster $T/cp2.cluster.json --software myriad --arch gpt2 --layers 1 --hidden 64 \
        --heads 2 --vocab 256 --seq 32 --dtype fp32 --global-batch 1 --micro-batch 1 --recompute none --gpus 2 --cp 2 --json |
        python3 -c 'import json,sys; d = json.load(sys.stdin); assert d[\"step_time_s\"] > 0 and d[\"breakdown_s\"][\"cp_comm\"] > 0, d'"
else
    fail calibrate_cp2_feeds_sim "$(cat "$T/errcp")"
fi
err=$($B bench calibrate $SHAPE --cp 3 --out "$T/bad" 2>&1); rc=$?
check calibrate_rejects_cp_not_dividing_seq bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q -- '--cp 3 needs --seq divisible by 2 x cp = 6'"
err=$($B bench calibrate $SHAPE --layers 0 --out "$T/bad" 2>&1); rc=$?
check calibrate_rejects_layers_0 bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q -- '--layers' && [ ! -e $T/bad.hw.json ]"
err=$($B bench calibrate $SHAPE --hidden 63 --out "$T/bad" 2>&1); rc=$?
check calibrate_rejects_indivisible_heads bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q 'not a multiple of --heads'"
# two ranks: MPI figures in the cluster file; --group must divide the rank count
if $B run -n 2 -- bench calibrate $SHAPE --layers 1 --tokens 32 --group 2 --out "$T/two" >"$T/out2" 2>"$T/err2" </dev/null; then
    check calibrate_two_ranks_mpi python3 -c "
import json; c = json.load(open('$T/two.cluster.json'))
assert c['gpus'] == 2 and c['scaleup_gbps'] > 0 and 'groups of 2 ranks' in c['sources'][0], c"
else
    fail calibrate_two_ranks_mpi "$(cat "$T/err2")"
fi
err=$($B run -n 2 -- bench calibrate $SHAPE --group 3 --out "$T/bad" 2>&1 </dev/null); rc=$?
check calibrate_rejects_group bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q -- '--group 3 does not divide the 2 ranks'"
err=$($B bench calibrate $SHAPE --tokens 8,16,32 --tp 1,2 --out "$T/bad" 2>&1); rc=$?
check calibrate_rejects_too_many_shapes bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q 'asks for 6 shapes of 15 products; at most 4'"
