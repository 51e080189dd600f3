#!/usr/bin/env bash
# bench/sim_cp_own_runs.sh: myriad sim against myriad train's own context-parallel steps on this
# machine (issue 27, acceptance 4), the method of bench/sim_own_runs.sh: for each layout and round,
#   1. `myriad bench calibrate` on the layout's ranks and threads at its shapes (GEMM rows = the
#      rank's tokens; --cp N: the attention measured is ring attention's blocks of one cp rank, the
#      kernels `myriad train --cp N` runs; cp 1: the whole-sequence kernel it runs there),
#   2. `myriad train` for STEPS steps (step 1 is warm-up; the median of the others is "measured"),
#   3. calibrate again,
# and `myriad sim --software myriad` with each calibration predicts the step; the prediction is the
# mean of the two. Nothing is fitted: every rate comes from the calibrations of the same round.
# Layouts: cp1 (1 rank x 2 threads), cp2 (2 ranks x 1 thread), cp4 (4 ranks x 1 thread: two ranks
# per core, as the train run shares them).
# Usage: bash bench/sim_cp_own_runs.sh [ROUNDS] [STEPS] [LAYOUTS] [SEQ]   (defaults 3 4 cp1,cp2 2048)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-4} only=${3:-cp1,cp2} SEQ=${4:-2048}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
B=bin/myriad
W=$(mktemp -d /tmp/myriad-cpownruns-XXXXXX); trap 'rm -rf "$W"' EXIT
SHAPE="--arch gpt2 --layers 2 --hidden 128 --heads 4 --vocab 4096"
CAL="--hidden 128 --heads 4 --vocab 4096 --seq $SEQ --layers 2 --reps 3"
BATCH=1
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" $(( (steps + 2) * BATCH * SEQ + 1 )) 4096
# name | ranks | threads | cp
LAYOUTS="cp1|1|2|1
cp2|2|1|2
cp4|4|1|4"
run() { # RANKS ARGS...: myriad under the launcher (one rank: directly)
    local n=$1; shift
    if [ "$n" = 1 ]; then $B "$@" </dev/null; else $B run -n "$n" -- "$@" </dev/null; fi
}
predict() { # CALPREFIX RANKS CP -> predicted seconds: the step, and its exposed cp communication
    $B sim --gpu "$1.hw.json" --cluster "$1.cluster.json" --software myriad $SHAPE --dropout 0 --seq $SEQ --dtype fp32 \
        --global-batch $BATCH --recompute none --gpus "$2" --cp "$3" --micro-batch 1 --json | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin); b = d['breakdown_s']
print(d['step_time_s'], b['cp_comm'])"
}
echo "myriad train --cp vs myriad sim on this machine ($(nproc) cores), commit $(git rev-parse --short HEAD 2>/dev/null), $(date -u +%F)"
echo "model: $SHAPE, batch $BATCH x $SEQ tokens, fp32; $rounds rounds, steps 2..$steps measured"
printf '%-6s %5s %10s %10s %8s %10s  %s\n' layout round "measured" "predicted" "ratio" "cp pred" "load (1/5/15 min)"
echo "$LAYOUTS" >"$W/layouts"
while IFS='|' read -r name ranks threads cp; do
    [[ ",$only," != *",$name,"* ]] && continue
    tokens=$(( BATCH * SEQ / cp ))
    for r in $(seq "$rounds"); do
        cal() { run "$ranks" bench calibrate $CAL --cp "$cp" --tokens "$tokens" --threads "$threads" --name "cpu-$name" \
            --out "$1" >/dev/null 2>"$W/err" || { cat "$W/err"; exit 1; }; }
        cal "$W/cal-a"
        tflags=""; [ "$cp" -gt 1 ] && tflags="--cp $cp"
        run "$ranks" train $SHAPE --max-seq $SEQ --data "$W/tok.bin" --batch $BATCH --seq $SEQ --steps "$steps" \
            --threads "$threads" --no-shuffle --log "$W/log.jsonl" $tflags >/dev/null 2>"$W/err" || { cat "$W/err"; exit 1; }
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        cal "$W/cal-b"
        meas=$(/usr/bin/python3 -c "
import json, statistics
rows = [json.loads(l) for l in open('$W/log.jsonl')][1:]
print(statistics.median(r['ms'] for r in rows) / 1e3)")
        read -r pa ca < <(predict "$W/cal-a" "$ranks" "$cp"); read -r pb cb < <(predict "$W/cal-b" "$ranks" "$cp")
        pred=$(/usr/bin/python3 -c "print(($pa + $pb) / 2)"); cpred=$(/usr/bin/python3 -c "print(($ca + $cb) / 2)")
        printf '%-6s %5d %9.3fs %9.3fs %8.3f %9.4fs  %s\n' "$name" "$r" "$meas" "$pred" \
            "$(/usr/bin/python3 -c "print($pred / $meas)")" "$cpred" "$load"
        echo "$name $meas $pred" >>"$W/all"
    done
done <"$W/layouts"
echo
echo "median per layout (predicted / measured):"
/usr/bin/python3 bench/own_runs_median.py "$W/all" 6
