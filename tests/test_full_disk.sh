#!/usr/bin/env bash
# test_full_disk.sh: a disk that fills up during a run ends nothing (src/train/ckpt_saves.c, the
# commit's clean-up in src/ckpt/ckpt_commit.c), on a real full file system: a small tmpfs mounted
# here (root; the test is skipped, with the reason, where mounting is not allowed).
#   1. full from the second checkpoint on: each failed save is said (No space left on device) and
#      training goes on (the background save of step 20 may fail only when step 30 saves: then it says
#      so, "the save of this step is tried now"); no step directory or temporary file is left; the last good checkpoint
#      stays valid (a run resumes from it); the final checkpoint goes to a fallback directory
#      (resumable, the same weights as the export); the run ends with one line of status, exit 1;
#   2. full for one save only (a file fills it, removed after the warning): the next interval
#      saves, the run exits 0 with the status line, and its model is bit-identical to a run that
#      never saw a full disk (failed saves change nothing in training);
#   3. the same as 1 with 2 ranks (dp 2): one warning per failed save, not one per rank, no hang.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
test_scratch fulldisk
mpi_env
mounts=()
cleanup() {
    local m
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1 MYRIAD_SHM_DIR=$T/shm
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3 >/dev/null
model="--arch gpt2 --layers 2 --hidden 96 --heads 4 --ffn 384 --vocab 67 --max-seq 32 --data $T/tok.bin --batch 4 --seq 32 --lr 1e-3 --threads 1 --peak-tflops 1 --steps 40"

# small_fs DIR KIB: a tmpfs of KIB KiB at DIR
small_fs() {
    mkdir -p "$1"
    mount -t tmpfs -o "size=${2}k" tmpfs "$1" 2>"$T/mount.err" || return 1
    mounts+=("$1")
}
if ! small_fs "$T/probe" 64; then
    echo "skip full_disk (cannot mount a tmpfs here: $(head -1 "$T/mount.err"); needs root with CAP_SYS_ADMIN)"
    exit 0
fi

# the oracle and the sizes: a run on a roomy disk
"$M" train $model --save "$T/ref" --save-every 10 --sync-save >"$T/ref.out" 2>"$T/ref.err" || fail reference_run "$(tail -2 "$T/ref.err")"
ck=$(du -sk "$T/ref/step-00000010" | cut -f1)   # one checkpoint, KiB
echo "# one checkpoint: $ck KiB"
cd "$T" # fallback directories go to the working directory

# debris DIR GOOD...: a step directory other than the GOOD ones (committed checkpoints), or a
# temporary file anywhere. (Not by modification time: a step directory's own mtime moves when its
# manifest is renamed into place, a tick after the manifest's, so it once counted itself.)
debris() {
    local dir=$1 d; shift
    find "$dir" -name '*.tmp' 2>/dev/null | head -3
    for d in "$dir"/step-*; do
        [ -e "$d" ] || continue
        [[ " $* " == *" $(basename "$d") "* ]] && [ -f "$d/manifest.json" ] || echo "$d"
    done
}

# --- 1. full from the second checkpoint on
small_fs "$T/full1" $((ck * 16 / 10))
"$M" train $model --save "$T/full1/ck" --save-every 10 >"$T/a.out" 2>"$T/a.err"; rc=$?
warned=$(grep -c "^myriad train: warning: the checkpoint of step \(20\|30\|40\) was not saved: .*No space left on device" "$T/a.err")
rescue=$(ls -d "$T"/myriad-rescue-ckpt-* 2>/dev/null | head -1)
left=$(ls "$T/full1/ck" | tr '\n' ' ')
bad=$(debris "$T/full1/ck" step-00000010)
resumed_ok=0
"$M" train $model --save "$T/from10" --resume "$T/full1/ck" --steps 10 >"$T/r10.out" 2>"$T/r10.err" &&
    grep -q "at step 10" "$T/r10.err" && resumed_ok=1
rescue_ok=0
[ -n "$rescue" ] && "$M" train $model --save "$T/from40" --resume "$rescue" >"$T/r40.out" 2>"$T/r40.err" &&
    cmp -s "$T/from40/model.safetensors" "$T/full1/ck/model.safetensors" && rescue_ok=1
if [ $rc -eq 1 ] && [ "$warned" -eq 3 ] && grep -q "checkpoint of step 20 was not saved: .*\(tries again at step 30\|the save of this step is tried now\)$" "$T/a.err" && [ -z "$bad" ] &&
    [ "$left" = "config.json latest model.safetensors step-00000010 " ] && [ $resumed_ok -eq 1 ] && [ $rescue_ok -eq 1 ] &&
    grep -q "^myriad: train: the checkpoint of step 40 is in $rescue instead of $T/full1/ck: resume with --resume $rescue" "$T/a.err" &&
    grep -q "^myriad train: 3 of 4 checkpoint saves failed (steps 20, 30, 40; see the warnings above); the final checkpoint is in $rescue" "$T/a.err"
then pass "full_disk_goes_on_keeps_the_last_good_checkpoint_and_rescues_the_final_one"
else fail full_disk_goes_on_keeps_the_last_good_checkpoint_and_rescues_the_final_one \
    "rc=$rc warned=$warned left='$left' debris='$bad' resumed=$resumed_ok rescue='$rescue' ok=$rescue_ok $(grep -v '^step' "$T/a.err" | tail -3)"; fi

# --- 2. full for one save: a file fills the disk and is removed once the save of step 10 failed.
# The log is a FIFO read by this test, its pipe shrunk to one page, so the run cannot pass step ~13
# (the log's first line holds the whole configuration; the next save is at 20) before the file is
# gone. (Saving every 15 raced that: the run blocked on the log at step 13, before its first save.)
small_fs "$T/full2" $((ck * 26 / 10))
dd if=/dev/zero of="$T/full2/filler" bs=1k count=$((ck * 20 / 10)) 2>/dev/null
mkfifo "$T/b.fifo"
exec 4<>"$T/b.fifo"                                         # opens without a writer
/usr/bin/python3 -c 'import fcntl; fcntl.fcntl(4, 1031, 4096)' # F_SETPIPE_SZ: one page
exec 3<"$T/b.fifo"
"$M" train $model --save "$T/full2/ck" --save-every 10 --keep 1 --sync-save --log "$T/b.fifo" >"$T/b.out" 2>"$T/b.err" &
pid=$!
IFS= read -r -t 300 -u 3 line # the trainer holds the FIFO: from now on EOF means it closed it
exec 4<&-
for _ in $(seq 600); do grep -q "warning: the checkpoint of step 10 was not saved" "$T/b.err" && break; sleep 0.1; done
rm -f "$T/full2/filler"
cat <&3 >/dev/null
exec 3<&-
wait $pid; rc=$?
if [ $rc -eq 0 ] && grep -q "^myriad train: warning: the checkpoint of step 10 was not saved: .*No space left on device.* training goes on and tries again at step 20" "$T/b.err" &&
    grep -q "^myriad train: 1 of 4 checkpoint saves failed (step 10; see the warnings above); the newest checkpoint in $T/full2/ck is step 40" "$T/b.err" &&
    [ -f "$T/full2/ck/step-00000040/manifest.json" ] && [ -z "$(debris "$T/full2/ck" step-00000040)" ] &&
    cmp -s "$T/ref/model.safetensors" "$T/full2/ck/model.safetensors"
then pass "disk_full_once_then_saves_again_and_trains_the_same"
else fail disk_full_once_then_saves_again_and_trains_the_same "rc=$rc $(grep -v '^step' "$T/b.err" | tail -3)"; fi

# --- 3. two ranks: one voice per failed save, the same outcome
small_fs "$T/full3" $((ck * 16 / 10))
rm -rf "$T"/myriad-rescue-ckpt-*
"$M" run -n 2 -- train $model --dp 2 --save "$T/full3/ck" --save-every 10 >"$T/c.out" 2>"$T/c.err"; rc=$?
warned=$(grep -c "warning: the checkpoint of step [0-9]* was not saved" "$T/c.err")
rescue=$(ls -d "$T"/myriad-rescue-ckpt-* 2>/dev/null | head -1)
if [ $rc -ne 0 ] && [ "$warned" -eq 3 ] && [ -n "$rescue" ] && [ -f "$rescue/step-00000040/manifest.json" ] &&
    [ "$(ls "$T/full3/ck" | grep -c '^step-')" -eq 1 ] && grep -q "3 of 4 checkpoint saves failed" "$T/c.err"
then pass "full_disk_two_ranks_one_warning_per_save"
else fail full_disk_two_ranks_one_warning_per_save "rc=$rc warned=$warned rescue='$rescue' $(grep -v '^step' "$T/c.err" | grep -i 'warn\|myriad:' | tail -3)"; fi
