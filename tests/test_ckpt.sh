#!/usr/bin/env bash
# test_ckpt.sh: checkpoints across real MPI ranks (build/tests/test_ckpt --mpi DIR save|load).
# 4 ranks save row blocks (sync, step 1) then column blocks (async, step 2) of a tensor; 4 and
# 3 ranks load the newest (step 2) in another layout, bit exact, reading at most 1.1x their
# share. Then saves are killed at the k-th crash point on every rank (MYRIAD_CKPT_CRASH_AT):
# the loaders must get the newest step whose manifest was renamed into place, or nothing.
set -u
cd "$(dirname "$0")/.."
P=$PWD/build/tests/test_ckpt
. tests/lib.sh
test_scratch ckpt-sh
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_ckpt.sh (mpirun not installed)"; exit 0; fi
[ -x "$P" ] || { fail ckpt_mpi "build/tests/test_ckpt missing (run make)"; exit 0; }

if timeout 120 $MPI -np 4 $P --mpi "$T/c" save >"$T/out" 2>"$T/err" && grep -q '^ok save' "$T/out"; then
    pass mpi_save_4_ranks_sync_and_async
else fail mpi_save_4_ranks_sync_and_async "$(tail -2 "$T/err")"; fi
for np in 4 3; do
    if timeout 120 $MPI -np $np $P --mpi "$T/c" load >"$T/out" 2>"$T/err" && grep -q '^ok load' "$T/out" &&
        grep -q '^loaded step 2' "$T/out"; then
        pass mpi_load_reshard_${np}_ranks; grep '^#' "$T/out"
    else fail mpi_load_reshard_${np}_ranks "$(cat "$T/out" | head -3) $(tail -2 "$T/err")"; fi
done

# killed saves: the newest step with a manifest is what loads, or no checkpoint at all
bad=""
for k in 2 5 6 7 9 11 13 15 17; do
    d="$T/k$k"
    MYRIAD_CKPT_CRASH_AT=$k timeout 120 $MPI -np 4 $P --mpi "$d" save >/dev/null 2>&1
    want=$(ls "$d"/step-*/manifest.json 2>/dev/null | sort | tail -1 | sed 's|.*/step-0*\([0-9]*\)/manifest.json|\1|')
    timeout 120 $MPI -np 2 $P --mpi "$d" load >"$T/out" 2>"$T/err"
    got=$(grep -m1 '^loaded step' "$T/out" | awk '{print $3}')
    if [ -z "$want" ]; then
        grep -q "no valid checkpoint" "$T/err" || bad="$bad k=$k:expected-none-got-${got:-?}"
    elif [ "$got" != "$want" ] || ! grep -q '^ok load' "$T/out"; then
        bad="$bad k=$k:want-$want-got-${got:-none}"
    fi
    echo "# crash at point $k on every rank: newest committed step ${want:-none}, loaded ${got:-none}"
done
if [ -z "$bad" ]; then pass mpi_killed_saves_load_newest_complete; else fail mpi_killed_saves_load_newest_complete "$bad"; fi
