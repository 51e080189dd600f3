#!/usr/bin/env bash
# ckpt_train_bench.sh: what checkpoints cost a training run and what they save on recovery,
# gpt2-124m shape, 2 ranks (dp 2, zero 1), one thread each, random tokens. RANKS=1 runs one
# process instead (one thread: the second core is then free for the copy thread, as a GPU
# node's copy engine is beside its compute); SKIP_RECOVERY=1 runs part 1 only.
#  1. step-time overhead, configurations alternated in the same run (ROUNDS rounds):
#     none (--mem-ckpt-every 0), async disk checkpoints every 10 steps, in-memory copies every
#     step. Per configuration: mean over steps WARMUP+1..STEPS-1 (WARMUP default 3) of the step's wall time including the
#     time it spent saving (ms + ckpt_ms of the JSON log); overhead = mean / mean(none) - 1.
#  2. recovery: a rank killed at step 4 under `myriad run` (disk checkpoints every 3 steps, saved
#     synchronously, so the kill finds step 3 committed), restored from memory vs
#     from disk: the trainer's restore time and the launcher's failure-to-resumed time (events).
# Usage: bash bench/ckpt_train_bench.sh [ROUNDS (2)] [STEPS (20)] [BATCH (8)] [SEQ (128)]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2} STEPS=${2:-20} BATCH=${3:-8} SEQ=${4:-128}
W=$(mktemp -d /tmp/myriad-ckpt-train-bench-XXXXXX) # disk checkpoints: the local disk
# in-memory copies: shared memory, as in production (a directory on the disk would make them
# file-backed pages written back to the disk)
SHM=$(mktemp -d "${SHM_ROOT:-/dev/shm}/myriad-ckpt-train-bench-XXXXXX")
trap 'rm -rf "$W" "$SHM"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive MYRIAD_SHM_DIR=$SHM/shm
RANKS=${RANKS:-2}
MPI="mpirun --oversubscribe --bind-to none --mca btl self,vader -np $RANKS"
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" 400000 50257 1
train="--preset gpt2-124m --data $W/tok.bin --batch $BATCH --seq $SEQ --threads 1 --peak-tflops 1"
[ "$RANKS" -gt 1 ] && train="$train --dp $RANKS --zero 1"

# steady state: steps WARMUP+1..STEPS-1 (the first in-memory copies also provision their shared
# memory, a one-time cost reported apart as the first steps' excess over the steady state; the
# last step is left out because every run saves at its end, which is not the periodic cost)
WARMUP=${WARMUP:-3}
mean_ms() { /usr/bin/python3 -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):-1]
print('%.1f' % (sum(x['ms'] + x.get('ckpt_ms', 0) for x in r) / len(r)))" "$1" "$2"; }
first_ms() { /usr/bin/python3 -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][1:int(sys.argv[2])]
print('%.0f' % sum(x['ms'] + x.get('ckpt_ms', 0) for x in r))" "$1" "$2"; }

declare -A sum first
for cfg in none disk mem; do sum[$cfg]=0; done
echo "| round | none ms/step | disk every 10 ms/step | memory every step ms/step |"
echo "|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    row="| $round"
    for cfg in none disk mem; do
        rm -rf "$W/run" "$SHM/shm"
        case $cfg in
        none) flags="--mem-ckpt-every 0" ;;
        disk) flags="--mem-ckpt-every 0 --save-every 10" ;;
        mem) flags="--mem-ckpt-every 1" ;;
        esac
        $MPI bin/myriad train $train --steps "$STEPS" --save "$W/run" $flags --log "$W/$cfg.jsonl" >/dev/null 2>"$W/err"
        m=$(mean_ms "$W/$cfg.jsonl" "$WARMUP")
        first[$cfg]=$(first_ms "$W/$cfg.jsonl" "$WARMUP")
        sum[$cfg]=$(/usr/bin/python3 -c "print(${sum[$cfg]} + $m)")
        row="$row | $m"
    done
    echo "$row |"
done
/usr/bin/python3 -c "
n, d, m = ${sum[none]}, ${sum[disk]}, ${sum[mem]}
print(f'\noverhead vs none (means over rounds): async disk every 10 steps {100 * (d / n - 1):+.1f}%, in-memory every step {100 * (m / n - 1):+.1f}%')"
echo "steps 2..$WARMUP of the last round, total ms: none ${first[none]}, disk ${first[disk]}, memory ${first[mem]} (the excess of memory over none: provisioning the copies' shared memory, once per job start)"
grep "in-memory checkpoints:" "$W/err" | sed 's/^/last memory run: /' || true

# 2. recovery from memory vs from disk after a rank is killed at step 4
[ "${SKIP_RECOVERY:-0}" = 1 ] && exit 0
echo
echo "| restore source | trainer restore time | launcher: failure to resumed |"
echo "|---|---|---|"
for src in memory disk; do
    rm -rf "$W/rec" "$SHM/shm" "$W/rec.jsonl"
    flags="--save-every 3 --sync-save"
    [ $src = disk ] && flags="$flags --mem-ckpt-every 0"
    bin/myriad run -n 2 --max-restarts 1 --hang-timeout 120 --inject kill@4:1 --events "$W/rec.jsonl" -- \
        train $train --steps 5 --save "$W/rec" $flags >"$W/rec.out" 2>&1
    restore=$(grep -o 'restore took [0-9.]* s' "$W/rec.out" | tail -1 | awk '{print $3}')
    gap=$(/usr/bin/python3 -c "
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
fail = next(e['t'] for e in ev if e['event'] == 'exit')
res = next(e for e in ev if e['event'] == 'resumed')
print('%.2f s (source %s, recomputed %d)' % (res['t'] - fail, res.get('source'), res['recomputed_steps']))" "$W/rec.jsonl")
    echo "| $src | $restore s | $gap |"
done
