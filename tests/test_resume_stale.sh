#!/usr/bin/env bash
# test_resume_stale.sh: `--resume auto` never restores an in-memory copy older than the newest disk
# checkpoint. A 2-rank job (dp 2, copies every step) stops after step 6: the disk holds step 6,
# each rank's memory steps 5 and 6. With rank 1's copy of step 6 gone, memory is complete only up
# to step 5, older than the disk: the resume must say so and restore the disk's step 6. (Restoring
# memory's step 5 instead ends bit-identical too: the rolled-back step is recomputed exactly; so
# the resumed step and source are checked, not only the weights; scripts/mutate.sh,
# resume_prefers_stale_memory.) The complement: without that disk checkpoint the same copies are
# used, from step 5. Both runs end bit-identical to an uninterrupted one.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch stale
if ! command -v mpirun >/dev/null; then echo "skip test_resume_stale (mpirun not installed)"; exit 0; fi
mpi_env
export MYRIAD_SHM_DIR=$T/shm # the in-memory copies of these jobs live here, not in /dev/shm
MPI="$MPI -np 2"
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
common="--arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 8 --seq 8 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --steps 10 --dp 2 --mem-ckpt-every 1"
$MPI $M train $common --save "$T/ref" >"$T/ref.out" 2>&1 || fail reference_run "$(tail -3 "$T/ref.out")"

# stop_after_6 DIR: the job stops after step 6 (disk checkpoint step 6, copies of steps 5 and 6
# on each rank), then rank 1's copy of step 6 is removed; prints that copy's path
stop_after_6() {
    rm -rf "$1" "$MYRIAD_SHM_DIR"
    $MPI $M train $common --save "$1" --stop-after 6 >"$1.stop.out" 2>&1
    local copy
    copy=$(ls "$MYRIAD_SHM_DIR"/myriad-*/*/r00001-s000000000006.mem 2>/dev/null)
    [ -n "$copy" ] && [ -d "$1/step-00000006" ] && ls "$MYRIAD_SHM_DIR"/myriad-*/*/r00000-s000000000006.mem >/dev/null 2>&1 &&
        ls "$MYRIAD_SHM_DIR"/myriad-*/*/r00001-s000000000005.mem >/dev/null 2>&1 && rm -f "$copy" && echo "$copy"
}

# 1. the disk's step 6 is newer than memory's newest complete step 5: the disk is restored
copy=$(stop_after_6 "$T/a")
$MPI $M train $common --save "$T/a" --resume auto >"$T/a.out" 2>&1
rc=$?
if [ -n "$copy" ] && [ $rc -eq 0 ] &&
    grep -q "^myriad train: --resume auto: in-memory copies: [0-9]* of steps 5\.\.6 in .*, complete up to step 5: not used, the disk checkpoint of step 6 is newer$" "$T/a.out" &&
    grep -q "^resumed from .*/a/step-00000006 at step 6" "$T/a.out" && ! grep -q "^resumed from memory" "$T/a.out" &&
    grep -q "restore took .* (disk)" "$T/a.out" && cmp -s "$T/ref/model.safetensors" "$T/a/model.safetensors"
then pass "stale_memory_copy_not_used_newer_disk_restored (resumed at step 6 from disk)"
else fail stale_memory_copy_not_used_newer_disk_restored "copy=$copy rc=$rc: $(grep -E '^myriad|^resumed|restore took' "$T/a.out" | head -4)"; fi

# 2. the same copies without that disk checkpoint: memory's step 5 is the newest there is, used
copy=$(stop_after_6 "$T/b")
rm -rf "$T/b/step-00000006" "$T/b/latest"
$MPI $M train $common --save "$T/b" --resume auto >"$T/b.out" 2>&1
rc=$?
if [ -n "$copy" ] && [ $rc -eq 0 ] &&
    grep -q "^myriad train: --resume auto: in-memory copies: [0-9]* of steps 5\.\.6 in .*, complete up to step 5: using them (no disk checkpoint)$" "$T/b.out" &&
    grep -q "^resumed from memory (2 of 2 ranks from their own copy, 0 from a replica on another host; 0 damaged copies rejected) at step 5$" "$T/b.out" &&
    cmp -s "$T/ref/model.safetensors" "$T/b/model.safetensors"
then pass "memory_copy_used_when_no_newer_disk (resumed at step 5 from memory)"
else fail memory_copy_used_when_no_newer_disk "copy=$copy rc=$rc: $(grep -E '^myriad|^resumed|restore took' "$T/b.out" | head -4)"; fi
