#!/usr/bin/env bash
# bench/straggler_fp.sh: the straggler detector's false alarms and detection, measured on this
# machine with the real trainer under `myriad run` (the model of tests/test_straggler_run.sh).
#   healthy: RUNS runs of STEPS steps for each of 2 and 4 ranks (dp), idle and with both cores
#            busy (two spinning processes beside the job): straggler events (must be 0), the
#            lowest relative score of any rank in any window (the margin to the threshold) and the
#            longest run of windows below it for one rank (K in a row make a straggler);
#   detection: rank 1 slowed FACTOR (default 1.5) from step 1 and from step 20, 2 and 4 ranks,
#            idle and busy: the step it was flagged at and the steps since its slowdown (<= 20).
# Usage: bash bench/straggler_fp.sh [RUNS] [STEPS] [DETECT_RUNS]   (results: bench/straggler_results.md)
#        RANKS="2 4" LOADS="0 1" FACTOR=1.5 select the cases.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
RUNS=${1:-5} STEPS=${2:-200} DETECT=${3:-2}
RANKS=${RANKS:-2 4} LOADS=${LOADS:-0 1} FACTOR=${FACTOR:-1.5}
M=$(pwd)/bin/myriad
T=$(mktemp -d /tmp/myriad-straggler-fp-XXXXXX)
spinners=()
stop_load() { local p; for p in "${spinners[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; spinners=(); }
trap 'stop_load; rm -rf "$T"' EXIT
start_load() { # both cores busy: two processes spinning beside the job
    local i
    for i in 1 2; do sh -c 'while :; do :; done' & spinners+=($!); done
}
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
model="--arch gpt2 --layers 2 --hidden 128 --heads 4 --ffn 512 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 16 --seq 64 \
--lr 3e-3 --threads 1 --peak-tflops 1 ${MODEL_EXTRA:-}"
echo "straggler detector: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); " \
     "threshold, K and W: the defaults of myriad run; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"

# one run: prints a JSON summary line (events file, case name, slowed rank or -1, slowdown step)
summarize() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, case, slow_rank, slow_from = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ev = [json.loads(l) for l in open(path)]
win = [e for e in ev if e["event"] == "rank-times"]
strag = [e for e in ev if e["event"] == "straggler"]
thr = 0.75
def median(v):
    v = sorted(v)
    return None if not v else v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])
# below (the rule of src/launch/straggler.h): relative under the threshold, or individual under it
# while the median of the other ranks' individual scores is not
healthy_rel, healthy_ind, run, longest = [], [], {}, 0
for w in win:
    ind = w.get("individual") or []
    for k, r in enumerate(w["relative"]):
        if r is None or k == slow_rank: continue
        i = ind[k] if k < len(ind) else None
        others = median([x for j, x in enumerate(ind) if j != k and x is not None])
        below = r < thr or (i is not None and i < thr and others is not None and others >= thr)
        healthy_rel.append(r)
        if i is not None: healthy_ind.append(i)
        run[k] = run.get(k, 0) + 1 if below else 0
        longest = max(longest, run[k])
slow_rel = [w["relative"][slow_rank] for w in win if slow_rank >= 0 and w["relative"][slow_rank] is not None and w["last_step"] >= slow_from + 10]
hit = [e for e in strag if e["rank"] == slow_rank]
false = [e for e in strag if e["rank"] != slow_rank]
out = {"case": case, "windows": len(win), "false_alarms": len(false),
       "lowest_healthy_relative": round(min(healthy_rel), 3) if healthy_rel else None,
       "lowest_healthy_individual": round(min(healthy_ind), 3) if healthy_ind else None,
       "longest_healthy_run_below": longest}
if slow_rank >= 0:
    at = None
    if hit:  # the step of the verdict: the window's last step
        at = hit[0]["last_step"]
    out.update({"flagged_at": at, "latency": (at - slow_from) if at is not None else None,
                "slowed_relative": round(sum(slow_rel) / len(slow_rel), 3) if slow_rel else None})
print(json.dumps(out))
PY
}

n=0
for load in $LOADS; do
    [ "$load" = 1 ] && start_load
    for ranks in $RANKS; do
        for run in $(seq 1 "$RUNS"); do
            n=$((n + 1))
            "$M" run -n "$ranks" --events "$T/h$n.jsonl" -- train $model --dp "$ranks" --steps "$STEPS" \
                --save "$T/h$n" >"$T/h$n.out" 2>&1 || echo "# run $n exited $?: $(tail -1 "$T/h$n.out")"
            summarize "$T/h$n.jsonl" "healthy ranks=$ranks load=$load run=$run" -1 0 | tee -a "$T/all.jsonl"
            rm -rf "$T/h$n"
        done
        for from in 1 20; do
            for run in $(seq 1 "$DETECT"); do
                n=$((n + 1))
                "$M" run -n "$ranks" --inject "slow@$from:1:$FACTOR" --events "$T/h$n.jsonl" -- train $model \
                    --dp "$ranks" --steps 80 --save "$T/h$n" >"$T/h$n.out" 2>&1 || echo "# run $n exited $?"
                summarize "$T/h$n.jsonl" "slowed ${FACTOR}x from step $from ranks=$ranks load=$load run=$run" 1 "$from" |
                    tee -a "$T/all.jsonl"
                rm -rf "$T/h$n"
            done
        done
    done
    stop_load
done
/usr/bin/python3 - "$T/all.jsonl" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
h = [r for r in rs if r["case"].startswith("healthy")]
d = [r for r in rs if r["case"].startswith("slowed")]
print(f"healthy runs: {len(h)}, false alarms: {sum(r['false_alarms'] for r in h)}, runs with a healthy rank below for "
      f"2+ windows in a row: {sum(1 for r in h if r['longest_healthy_run_below'] >= 2)}, lowest healthy relative: "
      f"{min(r['lowest_healthy_relative'] for r in h if r['lowest_healthy_relative'] is not None)}, lowest healthy "
      f"individual: {min(r['lowest_healthy_individual'] for r in h if r['lowest_healthy_individual'] is not None)}")
lat = [r["latency"] for r in d if r["latency"] is not None]
print(f"slowed runs: {len(d)}, flagged: {len(lat)}, latency {min(lat) if lat else '-'}..{max(lat) if lat else '-'} steps, "
      f"false alarms beside them: {sum(r['false_alarms'] for r in d)}")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
