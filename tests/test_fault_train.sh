#!/usr/bin/env bash
# test_fault_train.sh: the real trainer under the fault-tolerant launcher. The oracle of every
# case is a failure-free run: the final weights must be bit-identical.
#  - kill a rank / hang a rank (tp 2 x dp 2, disk checkpoints every 4 steps, in-memory copies
#    every step by default): restored from memory, at most one step recomputed (event log);
#    also killed under ZeRO 1 and 2 (the copies hold only each rank's own ZeRO pieces of what data
#    parallelism replicates, also at the default ZeRO 0);
#  - corrupt@ (memory copies off): a bit flipped in the newest disk checkpoint is detected on
#    load and the job falls back to the previous checkpoint, saying so;
#  - a bit flipped in an in-memory copy: rejected, the previous in-memory step used, said so;
#  - a soak of SOAK_FAULTS random kills and hangs (tp 1 x dp 2), one restart each: 10 by default
#    (seed 7: 4 kills and 6 hangs, each kind on both ranks, two hangs drawn for the same step; ~2 s
#    a fault), 30 under `make test-long` (SOAK_FAULTS=30: 18 kills, 12 hangs, ~70 s);
#  - --max-restarts enforced with one clear line and a non-zero exit.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch fault
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export MYRIAD_SHM_DIR=$T/shm # in-memory copies of these jobs live here, not in /dev/shm
SOAK_FAULTS=${SOAK_FAULTS:-10}
if ! command -v mpirun >/dev/null; then echo "skip test_fault_train (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
model="--arch gpt2 --layers 4 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 8 --seq 8 --micro-batch 1 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1"
common="$model --steps 12 --tp 2 --dp 2"
$M run -n 4 -- train $common --save "$T/ref" >/dev/null 2>&1

# check_events FILE SOURCE MAX-RECOMPUTED: every "resumed" event names SOURCE and recomputed <= MAX
check_events() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
res = [e for e in ev if e["event"] == "resumed"]
assert res and all(e.get("source") == sys.argv[2] and e["recomputed_steps"] <= int(sys.argv[3]) for e in res), res
fin = [e for e in ev if e["event"] == "finished"] # the last event is the time ledger's goodput
assert len(fin) == 1 and fin[0]["status"] == "ok" and ev[-1]["event"] == "goodput", ev[-2:]
print("# restarts", fin[0]["restarts"], "sources", [e.get("source") for e in res][:3],
      "recomputed", [e["recomputed_steps"] for e in res], "goodput", fin[0]["goodput"])
PY
}

fault() { # NAME SPEC SOURCE MAX-RECOMPUTED EXTRA-RUN-FLAGS... -- EXTRA-TRAIN-FLAGS...
    local name=$1 spec=$2 source=$3 maxre=$4; shift 4
    local run=() train=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do run+=("$1"); shift; done
    [ $# -gt 0 ] && shift && train=("$@")
    rm -rf "$T/run" "$T/events.jsonl"
    timeout 300 $M run -n 4 --max-restarts 3 --inject "$spec" --events "$T/events.jsonl" "${run[@]}" -- \
        train $common --save "$T/run" "${train[@]}" >"$T/out" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && cmp -s "${REF:-$T/ref}/model.safetensors" "$T/run/model.safetensors" &&
        check_events "$T/events.jsonl" "$source" "$maxre" && [ -z "$(ls -A "$MYRIAD_SHM_DIR" 2>/dev/null)" ]
    then pass "$name"; else fail "$name" "rc=$rc $(grep -v '^step' $T/out | tail -3)"; fi
}
# memory copies every step (the default under `myriad run` with --save), disk every 4 steps
fault kill_rank_recovers_from_memory_bitidentical kill@6:1 memory 1 --hang-timeout 30 -- --save-every 4
# the restarted ranks write their next copies over their earlier ones (no new shared memory)
if grep -q "rank 0 writes its next copies over 2 of its earlier ones" "$T/out"; then pass restart_reuses_copy_memory
else fail restart_reuses_copy_memory "$(grep 'in-memory' "$T/out" | head -2)"; fi
# the fault lands exactly after the step asked for (the ranks wait for the launcher's GO there)
if grep -q '"event":"exit","rank":1,.*"step":6,' "$T/events.jsonl"; then pass kill_lands_exactly_after_its_step
else fail kill_lands_exactly_after_its_step "$(grep '"event":"exit"' "$T/events.jsonl" | head -1)"; fi
fault hang_rank_recovers_from_memory_bitidentical hang@5:2 memory 1 --hang-timeout 3 -- --save-every 4
# the stopped rank is the one declared dead (the others waited for it at the fault step, then in
# its collectives: they are not the ones that went silent first)
if grep -q '"event":"heartbeat-timeout","rank":2,' "$T/events.jsonl"; then pass hang_blames_the_stopped_rank
else fail hang_blames_the_stopped_rank "$(grep heartbeat-timeout "$T/events.jsonl" | head -1)"; fi
# ZeRO 1 and 2 (ZeRO 0 above): the copies keep only each rank's own pieces of what data parallelism
# replicates (all-gathered on restore); the oracle is a failure-free run of the same stage
for z in 1 2; do
    $M run -n 4 -- train $common --zero $z --save "$T/ref$z" >/dev/null 2>&1
    REF=$T/ref$z fault kill_rank_zero${z}_recovers_from_memory_bitidentical kill@6:1 memory 1 --hang-timeout 30 -- \
        --save-every 4 --zero $z
done
# a bit flipped in a shard of the newest disk checkpoint (step 6) just before a kill at step 7:
# the load detects it, every rank falls back to step 3, and stdout and the event log say so
fault corrupt_shard_detected_falls_back corrupt@7,kill@7:1 disk-fallback 8 --hang-timeout 30 --ckpt-dir "$T/run" -- \
    --save-every 3 --sync-save --mem-ckpt-every 0
# (the ranks wait for the launcher at step 7, so the flip lands in step 6's checkpoint exactly)
hit=$(grep -o '"event":"inject","fault":"corrupt".*step-0*\([0-9]*\)/' "$T/events.jsonl" | grep -o 'step-0*[0-9]*' | head -1)
if [ "$hit" = step-00000006 ] && grep -q "failed verification: falling back to the previous one" "$T/out" &&
    grep -q "checksum mismatch in .*rank-0000[0-9].bin" "$T/out" &&
    grep -q "resumed from .*step-00000003 at step 3" "$T/out"; then
    pass corrupt_shard_fallback_reported
else fail corrupt_shard_fallback_reported "flipped in $hit; $(grep -i 'corrupt\|resumed\|checksum' "$T/out" | head -3)"; fi

# a damaged in-memory copy: stop after step 6 (copies of steps 5 and 6 stay in shared memory),
# flip one bit in rank 1's copy of step 6, resume: the copy is rejected by its checksum, every
# rank restores step 5 from memory instead (saying so), and the run ends bit-identical
rm -rf "$T/mc" "$MYRIAD_SHM_DIR"
MPI="mpirun --oversubscribe --bind-to none --mca btl self,vader -np 4"
$MPI $M train $common --save "$T/mc" --mem-ckpt-every 1 --stop-after 6 >/dev/null 2>&1
# (--stop-after also writes the disk checkpoint step-6, which a resume would rightly prefer to
# the in-memory step 5: it goes, so that the choice is between the in-memory copies)
rm -rf "$T/mc/step-00000006" "$T/mc/latest"
copy=$(ls "$MYRIAD_SHM_DIR"/myriad-*/*/r00001-s000000000006.mem 2>/dev/null)
if [ -n "$copy" ]; then
    /usr/bin/python3 -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek(5000); b = f.read(1); f.seek(5000); f.write(bytes([b[0] ^ 4]))" "$copy"
fi
$MPI $M train $common --save "$T/mc" --mem-ckpt-every 1 --resume auto >"$T/mc.out" 2>&1
if [ -n "$copy" ] && cmp -s "$T/ref/model.safetensors" "$T/mc/model.safetensors" &&
    grep -q "rank 1: in-memory copy of step 6 from its own memory rejected: payload checksum mismatch" "$T/mc.out" &&
    grep -q "resumed from memory (4 of 4 ranks from their own copy, 0 from a replica on another host; 1 damaged copies rejected) at step 5" "$T/mc.out"
then pass corrupt_memory_copy_rejected_previous_step_used
else fail corrupt_memory_copy_rejected_previous_step_used "copy=$copy $(grep -i 'memory\|myriad:' "$T/mc.out" | head -3)"; fi

# soak: SOAK_FAULTS random kills/hangs drawn over steps 1..29 of a 40-step 2-rank run, each costing
# one restart. Steps of ~60 ms (a wider model than above), so a fault lands within a step or two
# of the step it was drawn for and all of them fire before the run ends. The hang timeout is 3 s, not 1:
# on a loaded 2-core machine one honest step can take over a second, and a false hang verdict costs
# a restart the count below does not allow.
soak="--arch gpt2 --layers 4 --hidden 64 --heads 4 --ffn 256 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 32 --seq 64 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --steps 40 --dp 2"
$M run -n 2 -- train $soak --save "$T/soakref" >/dev/null 2>&1
rm -rf "$T/soak"
start=$(date +%s)
timeout 600 $M run -n 2 --max-restarts "$SOAK_FAULTS" --hang-timeout 3 --inject "random:7:$SOAK_FAULTS:30" \
    --events "$T/soak.jsonl" -- train $soak --save "$T/soak" --save-every 10 >"$T/soak.out" 2>&1
rc=$?
restarts=$(/usr/bin/python3 -c "import json,sys; print([e for e in map(json.loads, open(sys.argv[1])) if e['event'] == 'finished'][-1].get('restarts'))" "$T/soak.jsonl" 2>/dev/null)
injected=$(grep -c '"event":"inject"' "$T/soak.jsonl")
# both kinds of fault fired (seed 7 draws both for any SOAK_FAULTS >= 3)
kills=$(grep '"event":"inject"' "$T/soak.jsonl" | grep -c '"fault":"kill"')
hangs=$(grep '"event":"inject"' "$T/soak.jsonl" | grep -c '"fault":"hang"')
if [ $rc -eq 0 ] && cmp -s "$T/soakref/model.safetensors" "$T/soak/model.safetensors" && [ "$restarts" = "$SOAK_FAULTS" ] &&
    [ "$injected" -eq "$SOAK_FAULTS" ] && { [ "$SOAK_FAULTS" -lt 3 ] || { [ "$kills" -ge 1 ] && [ "$hangs" -ge 1 ]; }; }; then
    pass "random_soak_bitidentical ($SOAK_FAULTS faults: $kills kills, $hangs hangs; $restarts restarts, $(( $(date +%s) - start )) s)"
else fail random_soak_bitidentical "rc=$rc restarts=$restarts injected=$injected kills=$kills hangs=$hangs $(grep myriad: "$T/soak.out" | tail -2)"; fi

# --max-restarts: a second failure after one allowed restart ends the run with one clear line
rm -rf "$T/maxr"
$M run -n 2 --max-restarts 1 --hang-timeout 30 --inject kill@3:0,kill@6:1 --events "$T/maxr.jsonl" -- \
    train $model --dp 2 --steps 12 --save "$T/maxr" >"$T/maxr.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c '^myriad: run: giving up after 1 restart (--max-restarts 1)' "$T/maxr.out")" -eq 1 ] &&
    [ "$(grep -c '"event":"launch"' "$T/maxr.jsonl")" -eq 2 ]; then pass max_restarts_enforced
else fail max_restarts_enforced "rc=$rc $(grep 'giving up' "$T/maxr.out")"; fi
