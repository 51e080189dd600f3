#!/usr/bin/env bash
# bench/sim_own_runs.sh: myriad sim against myriad train's own step time on this machine (issue 17,
# acceptance 5). For each layout (1 rank x 2 threads; dp 2, tp 2, pp 2 on 2 ranks x 1 thread;
# tp 2 x dp 2 on 4 ranks x 1 thread) and each round:
#   1. `myriad bench calibrate` on the same ranks and threads (GEMM rates at the layout's shapes,
#      attention, memory bandwidth, MPI) -> hardware + cluster JSON,
#   2. `myriad train` for STEPS steps (step 1 is warm-up; the median of the others is "measured"),
#   3. calibrate again,
# and `myriad sim --software myriad` with each calibration predicts the step; the prediction is the
# mean of the two (the machine is shared: calibrating right before and after the run keeps both
# under the load the run saw). Prints one line per round and the median per layout, with the load.
# Usage: bash bench/sim_own_runs.sh [ROUNDS] [STEPS] [LAYOUTS]   (LAYOUTS: names, comma-separated)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-4} only=${3:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
B=bin/myriad
W=$(mktemp -d /tmp/myriad-ownruns-XXXXXX); trap 'rm -rf "$W"' EXIT
SHAPE="--arch gpt2 --layers 4 --hidden 384 --heads 6 --vocab 4096"
CAL="--hidden 384 --heads 6 --vocab 4096 --seq 128 --reps 3"
BATCH=8 SEQ=128
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" $(( (steps + 2) * BATCH * SEQ + 1 )) 4096
# name | ranks | threads | train flags | sim flags | calibrate rows (tokens) | calibrate tp | layers per rank |
# more calibrate flags (--group 2: the all-reduce within pairs, the tp and dp groups of tp 2 x dp 2)
LAYOUTS="1rank|1|2||--micro-batch 8|1024|1|4
dp2|2|1|--dp 2 --micro-batch 4|--dp 2 --micro-batch 4|512|1|4
tp2|2|1|--tp 2 --micro-batch 8|--tp 2 --micro-batch 8|1024|2|4
pp2|2|1|--pp 2 --micro-batch 1|--pp 2 --micro-batch 1|128|1|2
tp2dp2|4|1|--tp 2 --dp 2 --micro-batch 4|--tp 2 --dp 2 --micro-batch 4|512|2|4|--group 2"
run() { # RANKS ARGS...: myriad under the launcher (one rank: directly)
    local n=$1; shift
    if [ "$n" = 1 ]; then $B "$@" </dev/null; else $B run -n "$n" -- "$@" </dev/null; fi
}
predict() { # CALPREFIX RANKS SIMFLAGS -> predicted seconds: the step, and its waits (exposed comm + bubble)
    $B sim --gpu "$1.hw.json" --cluster "$1.cluster.json" --software myriad $SHAPE --dropout 0 --seq $SEQ --dtype fp32 \
        --global-batch $BATCH --recompute none --gpus "$2" $3 --json | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin); b = d['breakdown_s']
print(d['step_time_s'], sum(b[k] for k in ('tp_comm', 'cp_comm', 'pp_comm', 'dp_comm', 'ep_comm', 'bubble')))"
}
echo "myriad train vs myriad sim on this machine ($(nproc) cores, $(grep -m1 -o 'avx512f' /proc/cpuinfo || echo avx2)), $(date -u +%F)"
echo "model: $SHAPE, batch $BATCH x $SEQ tokens, fp32; $rounds rounds, steps 2..$steps measured"
echo "waits: predicted exposed communication + pipeline bubble; measured: rank 0's exposed gradient reduction (dp only)"
printf '%-8s %5s %10s %10s %8s %10s %10s  %s\n' layout round "measured" "predicted" "ratio" "wait meas" "wait pred" "load (1/5/15 min)"
echo "$LAYOUTS" >"$W/layouts"
while IFS='|' read -r name ranks threads tflags sflags tokens tps lpr cflags; do
    [ -n "$only" ] && [[ ",$only," != *",$name,"* ]] && continue
    for r in $(seq "$rounds"); do
        run "$ranks" bench calibrate $CAL $cflags --layers "$lpr" --tokens "$tokens" --tp "$tps" --threads "$threads" --name "cpu-$name" \
            --out "$W/cal-a" >/dev/null 2>"$W/err" || { cat "$W/err"; exit 1; }
        run "$ranks" train $SHAPE --max-seq $SEQ --data "$W/tok.bin" --batch $BATCH --seq $SEQ --steps "$steps" \
            --threads "$threads" --no-shuffle --log "$W/log.jsonl" $tflags >/dev/null 2>"$W/err" || { cat "$W/err"; exit 1; }
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        run "$ranks" bench calibrate $CAL $cflags --layers "$lpr" --tokens "$tokens" --tp "$tps" --threads "$threads" --name "cpu-$name" \
            --out "$W/cal-b" >/dev/null 2>"$W/err" || { cat "$W/err"; exit 1; }
        read -r meas wmeas < <(/usr/bin/python3 -c "
import json, statistics, sys
rows = [json.loads(l) for l in open('$W/log.jsonl')][1:]
print(statistics.median(r['ms'] for r in rows) / 1e3, statistics.median(r.get('comm_exposed_ms', 0) for r in rows) / 1e3)")
        read -r pa wa < <(predict "$W/cal-a" "$ranks" "$sflags"); read -r pb wb < <(predict "$W/cal-b" "$ranks" "$sflags")
        pred=$(/usr/bin/python3 -c "print(($pa + $pb) / 2)"); wpred=$(/usr/bin/python3 -c "print(($wa + $wb) / 2)")
        printf '%-8s %5d %9.3fs %9.3fs %8.3f %9.3fs %9.3fs  %s\n' "$name" "$r" "$meas" "$pred" \
            "$(/usr/bin/python3 -c "print($pred / $meas)")" "$wmeas" "$wpred" "$load"
        echo "$name $meas $pred" >>"$W/all"
    done
done <"$W/layouts"
echo
echo "median per layout (predicted / measured):"
/usr/bin/python3 bench/own_runs_median.py "$W/all" 8
