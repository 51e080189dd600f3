#!/usr/bin/env bash
# bench/straggler_fp.sh: does the straggler detector stay quiet on a healthy but noisy machine?
# RUNS runs (default 3) of STEPS steps (default 200) of the real trainer on 4 ranks (dp 4, the
# model of tests/test_straggler_run.sh) under `myriad run`, no fault injected. Prints, per run,
# the straggler events (must be 0), the windows evaluated, and the lowest relative and individual
# scores any rank had in any window (their margin to the threshold, 0.75), then the load average.
# Usage: bash bench/straggler_fp.sh [RUNS] [STEPS]        (results: bench/straggler_results.md)
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
RUNS=${1:-3} STEPS=${2:-200}
M=$(pwd)/bin/myriad
T=$(mktemp -d /tmp/myriad-straggler-fp-XXXXXX)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
model="--arch gpt2 --layers 2 --hidden 128 --heads 4 --ffn 512 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 16 --seq 64 \
--lr 3e-3 --threads 1 --peak-tflops 1 --dp 4 ${MODEL_EXTRA:-}"
echo "straggler false positives: $RUNS runs x $STEPS steps, 4 ranks (dp 4) on $(getconf _NPROCESSORS_ONLN) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
total=0
for run in $(seq 1 "$RUNS"); do
    start=$(date +%s.%N)
    "$M" run -n 4 --events "$T/run$run.jsonl" -- train $model --steps "$STEPS" --save "$T/run$run" >"$T/run$run.out" 2>&1
    rc=$?
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    /usr/bin/python3 - "$T/run$run.jsonl" "$run" "$rc" "$wall" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
win = [e for e in ev if e["event"] == "rank-times"]
strag = [e for e in ev if e["event"] == "straggler"]
rel = [x for w in win for x in w["relative"] if x is not None]
ind = [x for w in win for x in w["individual"] if x is not None]
# windows in which some rank had both compute scores under 0.75, and the longest run of such
# windows for one rank (K = 3 in a row make a straggler: this is the margin that matters)
below = sum(1 for w in win if any(r is not None and i is not None and r < 0.75 and i < 0.75 for r, i in zip(w["relative"], w["individual"])))
run, longest = {}, 0
for w in win:
    for k, (r, i) in enumerate(zip(w["relative"], w["individual"])):
        run[k] = run.get(k, 0) + 1 if r is not None and i is not None and r < 0.75 and i < 0.75 else 0
        longest = max(longest, run[k])
print(f"run {sys.argv[2]}: exit {sys.argv[3]}, {float(sys.argv[4]):.0f} s, {len(win)} windows x 4 ranks, straggler events {len(strag)}, "
      f"lowest relative {min(rel):.3f}, lowest individual {min(ind):.3f}, windows with a rank below on both: {below}, "
      f"longest run of them for one rank: {longest} (3 flag)")
PY
    total=$((total + $(grep -c '"event":"straggler"' "$T/run$run.jsonl")))
done
echo "straggler events in all runs: $total; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
