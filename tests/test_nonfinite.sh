#!/usr/bin/env bash
# test_nonfinite.sh: non-finite values stop a run at the step they appear, on every rank, with
# one message, exit code 3 and nothing saved over the last good state; --on-nan skip drops that
# step's update and equals the run whose data skipped it. The oracle of a skip is the run that
# resumes the state after step S-1 as if it were step S's (tests/py/relabel_ckpt.py: the same
# checkpoint, relabelled): bit-identical losses and final weights. Faults come from
# `train --inject-nan STEP[:RANK]` (a gradient element of RANK set to NaN at STEP) and
# `myriad run --inject nan@STEP:RANK`; a real divergence from --lr 1e4 --clip 0.
# Also: the JSON log stays valid JSON (null), eval of a NaN model exits 3, --init of one is refused.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch nonfinite
mpi_env
export MYRIAD_SHM_DIR=$T/shm
PY=/usr/bin/python3
$PY bench/make_tokens.py "$T/tok.bin" 20000 67 3
common="--arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 4 --seq 16 --steps 8 --lr 3e-3 --threads 1 --peak-tflops 1"
json_ok() { $PY -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$1"; }

# 1. a diverging run stops at the first non-finite step: exit 3, the step named, a good model in
#    --save untouched, the log valid JSON with null where the number is not finite
$M train $common --save "$T/good" >/dev/null 2>&1
before=$(md5sum <"$T/good/model.safetensors")
$M train $common --lr 1e4 --clip 0 --save "$T/good" --log "$T/div.jsonl" >/dev/null 2>"$T/err"; rc=$?
line=$(grep '^myriad: ' "$T/err")
if [ $rc = 3 ] && [ "$(grep -c '^myriad: ' "$T/err")" = 1 ] && echo "$line" | grep -q "step [0-9]*: the loss is" &&
    [ "$(md5sum <"$T/good/model.safetensors")" = "$before" ] && json_ok "$T/div.jsonl" && grep -q ': null' "$T/div.jsonl"
then pass "diverging_run_stops_at_the_step"; echo "# $line"
else fail "diverging_run_stops_at_the_step" "rc=$rc $(tail -2 "$T/err")"; fi

# 2. skip: the run finishes, the injected step is logged as skipped, and it equals the oracle
$M train $common --on-nan skip --inject-nan 4 --log "$T/skip.jsonl" --save "$T/skip" >/dev/null 2>"$T/err"; rc=$?
$M train $common --stop-after 3 --save "$T/orc" --sync-save >/dev/null 2>&1 &&
    $PY tests/py/relabel_ckpt.py "$T/orc" 3 4 &&
    $M train $common --resume "$T/orc/step-00000004" --save "$T/orc" --log "$T/orc.jsonl" >/dev/null 2>&1
$M train $common --save "$T/plain" >/dev/null 2>&1
if [ $rc = 0 ] && cmp -s "$T/skip/model.safetensors" "$T/orc/model.safetensors" &&
    ! cmp -s "$T/skip/model.safetensors" "$T/plain/model.safetensors" &&
    $PY - "$T/skip.jsonl" "$T/orc.jsonl" <<'PY'
import json, sys
skip = [json.loads(l) for l in open(sys.argv[1])]
orc = [json.loads(l) for l in open(sys.argv[2])]
assert [r["step"] for r in skip] == list(range(1, 9))
assert skip[3].get("skipped") is True and skip[3]["grad_norm"] is None, skip[3]
assert not any(r.get("skipped") for i, r in enumerate(skip) if i != 3)
tail = [(r["loss"], r["grad_norm"]) for r in skip[4:]]
assert tail == [(r["loss"], r["grad_norm"]) for r in orc], (tail, orc)
PY
then pass "skip_equals_the_run_without_that_update"
else fail "skip_equals_the_run_without_that_update" "rc=$rc $(tail -2 "$T/err")"; fi

# 3. skips are limited: a run that stays non-finite stops after --max-nan-skips in a row (the log:
# two steps skipped, the third stopped, #28 item 7)
$M train $common --lr 1e4 --clip 0 --on-nan skip --max-nan-skips 2 --log "$T/ms.jsonl" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -q "^myriad: train: step [0-9]*: .*the 3rd non-finite step in a row (--max-nan-skips 2)" "$T/err" &&
    [ "$(grep -c '"skipped": true' "$T/ms.jsonl")" = 2 ] && [ "$(grep -c '"stopped": true' "$T/ms.jsonl")" = 1 ] &&
    json_ok "$T/ms.jsonl" &&
    pass "max_nan_skips_then_stop" || fail "max_nan_skips_then_stop" "rc=$rc $(tail -1 "$T/err")"

# 4. stop keeps the last good checkpoint, which then continues the run
$M train $common --inject-nan 6 --save-every 2 --save "$T/ck" --log "$T/ck.jsonl" >/dev/null 2>"$T/err"; rc=$?
if [ $rc = 3 ] && grep -q "^myriad: train: step 6: .*step-00000004" "$T/err" && [ "$(wc -l <"$T/ck.jsonl")" = 6 ] &&
    [ ! -e "$T/ck/step-00000006" ] && $M train $common --save "$T/ck" --resume auto >/dev/null 2>"$T/err2"
then pass "stop_keeps_last_good_checkpoint"
else fail "stop_keeps_last_good_checkpoint" "rc=$rc $(tail -1 "$T/err") $(tail -1 "$T/err2" 2>/dev/null)"; fi

# 5. a model holding a NaN: eval prints valid JSON and exits 3; training from it is refused
mkdir -p "$T/nan" && cp "$T/plain/config.json" "$T/nan/" && $PY - "$T/plain/model.safetensors" "$T/nan/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); k = next(k for k in h if k != "__metadata__")
off = 8 + n + h[k]["data_offsets"][0]; b[off:off + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(b)
PY
out=$($M eval --init "$T/nan" --data "$T/tok.bin" --batch 2 --seq 16 --batches 2 2>"$T/err"); rc=$?
if [ $rc = 3 ] && [ "$out" = '{"loss": null, "tokens": 64}' ] && grep -q "non-finite weights" "$T/err"
then pass "eval_of_nan_model_exits_3"; else fail "eval_of_nan_model_exits_3" "rc=$rc $out $(cat "$T/err")"; fi
$M train --init "$T/nan" --data "$T/tok.bin" --batch 4 --seq 16 --steps 2 >/dev/null 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -q "non-finite values" "$T/err" && ! grep -q '^step ' "$T/err" &&
    pass "training_from_nan_weights_refused" || fail "training_from_nan_weights_refused" "rc=$rc $(tail -1 "$T/err")"

if ! command -v mpirun >/dev/null; then echo "skip distributed cases (mpirun not installed)"; exit 0; fi
# 6. two ranks, a NaN on rank 1 only (through the launcher): both stop at that step, one
#    message, exit 3, not restarted, the checkpoint before it intact; the launcher says where the
#    job's in-memory copies remain and how to free them
dp="$common --dp 2 --save-every 2"
$M run -n 2 --max-restarts 2 --events "$T/ev.jsonl" --inject nan@5:1 -- train $dp --save "$T/d" --log "$T/d.jsonl" \
    >/dev/null 2>"$T/err"; rc=$?
if [ $rc = 3 ] && [ "$(grep -c '^myriad: train: ' "$T/err")" = 1 ] && grep -q "^myriad: train: step 5: " "$T/err" &&
    grep -q "not restarting" "$T/err" && [ "$(wc -l <"$T/d.jsonl")" = 5 ] && [ -e "$T/d/step-00000004/manifest.json" ] &&
    ! grep -q '"event": *"restart"' "$T/ev.jsonl" && grep -q "in-memory copies remain in $T/shm/myriad-.* frees them" "$T/err" &&
    ls -d "$T"/shm/myriad-* >/dev/null 2>&1
then pass "dp2_nan_on_one_rank_stops_every_rank"
else fail "dp2_nan_on_one_rank_stops_every_rank" "rc=$rc $(grep myriad "$T/err" | head -3)"; fi

# 7. two ranks, skip: equals the relabelled-checkpoint oracle in the same layout
$MPI -np 2 $M train $common --dp 2 --on-nan skip --inject-nan 4:1 --save "$T/ds" --log "$T/ds.jsonl" >/dev/null 2>"$T/err"; rc=$?
$MPI -np 2 $M train $common --dp 2 --stop-after 3 --save "$T/do" --sync-save >/dev/null 2>&1 &&
    $PY tests/py/relabel_ckpt.py "$T/do" 3 4 &&
    $MPI -np 2 $M train $common --dp 2 --resume "$T/do/step-00000004" --save "$T/do" >/dev/null 2>&1
[ $rc = 0 ] && cmp -s "$T/ds/model.safetensors" "$T/do/model.safetensors" && grep -q '"skipped": true' "$T/ds.jsonl" &&
    pass "dp2_skip_equals_oracle" || fail "dp2_skip_equals_oracle" "rc=$rc $(tail -2 "$T/err")"
