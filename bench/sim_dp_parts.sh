#!/usr/bin/env bash
# bench/sim_dp_parts.sh: what the gradient reduction of the dp 2 own run costs (issue 17,
# acceptance 5). Back to back, ROUNDS times, the model and batch of bench/sim_own_runs.sh:
#   solo:    two independent 1-rank runs at once, each 1 thread and half the batch (a dp 2 rank's
#            compute and optimizer, sharing the cores as dp 2 does, with no communication),
#   overlap: dp 2 (gradients reduced during backward, the default),
#   serial:  dp 2 --no-overlap (reduced after backward).
# overlap - solo is what data parallelism costs on top of the compute; serial vs overlap says whether
# overlapping buys anything when the reduction runs on the same cores (MPI over shared memory).
# Usage: bash bench/sim_dp_parts.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
B=bin/myriad
W=$(mktemp -d /tmp/myriad-dpparts-XXXXXX); trap 'rm -rf "$W"' EXIT
SHAPE="--arch gpt2 --layers 4 --hidden 384 --heads 6 --vocab 4096"
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" $(( (steps + 2) * 8 * 128 + 1 )) 4096
COMMON="$SHAPE --max-seq 128 --data $W/tok.bin --seq 128 --steps $steps --threads 1 --no-shuffle"
med() { /usr/bin/python3 -c "
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print('%.3f' % (statistics.median(r['ms'] for r in rows) / 1e3))" "$1"; }
printf '%5s %8s %8s %8s %8s  %s\n' round solo overlap serial "ovl-solo" "load"
for r in $(seq "$rounds"); do
    $B train $COMMON --batch 4 --log "$W/a.jsonl" </dev/null >/dev/null 2>&1 &
    pa=$!
    $B train $COMMON --batch 4 --log "$W/b.jsonl" </dev/null >/dev/null 2>&1
    wait $pa
    $B run -n 2 -- train $COMMON --batch 8 --dp 2 --micro-batch 4 --log "$W/o.jsonl" </dev/null >/dev/null 2>&1
    $B run -n 2 -- train $COMMON --batch 8 --dp 2 --micro-batch 4 --no-overlap --log "$W/s.jsonl" </dev/null >/dev/null 2>&1
    solo=$(/usr/bin/python3 -c "print(max($(med "$W/a.jsonl"), $(med "$W/b.jsonl")))")
    o=$(med "$W/o.jsonl") s=$(med "$W/s.jsonl")
    printf '%5d %7.3fs %7.3fs %7.3fs %7.3fs  %s\n' "$r" "$solo" "$o" "$s" "$(/usr/bin/python3 -c "print($o - $solo)")" \
        "$(cut -d' ' -f1-3 /proc/loadavg)"
done
