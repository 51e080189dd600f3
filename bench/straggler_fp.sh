#!/usr/bin/env bash
# bench/straggler_fp.sh: the straggler detector's false alarms and detection, measured on this
# machine with the real trainer under `myriad run` (the model of tests/test_straggler_run.sh).
#   healthy: RUNS runs of H + SECONDS seconds of steps (default 60: 90 s) for each of 2 and 4 ranks (dp), idle and with both cores
#            busy (two spinning processes beside the job): straggler events (must be 0), the
#            lowest relative and individual scores of any healthy rank over a window and over the
#            horizon (the margin to the threshold), the longest run of windows below for one rank,
#            and how many runs the window rule alone (--straggler-horizon 0: K windows in a row)
#            would have alarmed in;
#   detection: rank 1 slowed FACTOR (default 1.5) from step 1 and from step 20, 2 and 4 ranks,
#            idle and busy, 1.5 H + 10 seconds of steps: the step it was flagged at, the first step whose
#            horizon spans H, and the flag's distance from it (the rule's latency past the horizon).
# Usage: bash bench/straggler_fp.sh [RUNS] [SECONDS] [DETECT_RUNS]   (results: bench/straggler_results.md)
#        RANKS="2 4" LOADS="0 1" FACTOR=1.5 HORIZON=60 select the cases. Step counts come from a 60-step calibration run of each
#        case (its median step time), so every run spans its seconds on any machine; HEALTHY_STEPS and SLOWED_STEPS fix
#        them instead (#28's acceptance: 200-step healthy runs).
#        The model (4 layers, hidden 256: ~80 ms a step on one core) is sized so that a window of W steps outlasts the
#        machine's own noise: a vCPU of this VM ran one bound rank 1.5x slower for 18 steps (0.4 s) of a 13 ms model,
#        long enough for the window rule's K windows; at 80 ms those 0.4 s are 5 steps, under a median's half.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
RUNS=${1:-3} SECONDS_H=${2:-60} DETECT=${3:-1}
RANKS=${RANKS:-2 4} LOADS=${LOADS:-0 1} FACTOR=${FACTOR:-1.5} HORIZON=${HORIZON:-60}
M=$(pwd)/bin/myriad
T=$(mktemp -d /tmp/myriad-straggler-fp-XXXXXX)
spinners=()
stop_load() { local p; for p in "${spinners[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; spinners=(); }
trap 'stop_load; rm -rf "$T"' EXIT
start_load() { # both cores busy: a process spinning on each core beside the job (pinned: two unpinned
    # ones drifted onto one core for tens of steps, slowing that core's ranks 1.1-1.45x against the other's)
    local c
    for c in $(seq 0 $(($(getconf _NPROCESSORS_ONLN) - 1))); do taskset -c "$c" sh -c 'while :; do :; done' & spinners+=($!); done
}
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
model="--arch gpt2 --layers 4 --hidden 256 --heads 4 --ffn 1024 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 16 --seq 64 \
--lr 3e-3 --threads 1 --peak-tflops 1 ${MODEL_EXTRA:-}"
echo "straggler detector: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); " \
     "threshold, K and W: the defaults of myriad run; horizon $HORIZON s; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"

# one run: prints a JSON summary line (events file, case name, slowed rank or -1, slowdown step)
summarize() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, case, slow_rank, slow_from = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])  # argv[5]: H
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
hz = lambda key: [x for w in win for k, x in enumerate(w.get(key) or []) if x is not None and k != slow_rank]
hrel, hind = hz("horizon_relative"), hz("horizon_individual")
full = next((w["last_step"] for w in win if (w.get("horizon_s") or 0) >= float(sys.argv[5])), None)
slow_rel = [w["relative"][slow_rank] for w in win if slow_rank >= 0 and w["relative"][slow_rank] is not None and w["last_step"] >= slow_from + 10]
hit = [e for e in strag if e["rank"] == slow_rank]
false = [e for e in strag if e["rank"] != slow_rank]
out = {"case": case, "windows": len(win), "false_alarms": len(false),
       "lowest_healthy_relative": round(min(healthy_rel), 3) if healthy_rel else None,
       "lowest_healthy_individual": round(min(healthy_ind), 3) if healthy_ind else None,
       "longest_healthy_run_below": longest, "window_rule_alone_alarms": int(longest >= 3),
       "lowest_healthy_horizon_relative": round(min(hrel), 3) if hrel else None,
       "lowest_healthy_horizon_individual": round(min(hind), 3) if hind else None}
if slow_rank >= 0:
    at = None
    if hit:  # the step of the verdict: the window's last step
        at = hit[0]["last_step"]
    out.update({"flagged_at": at, "latency": (at - slow_from) if at is not None else None, "horizon_full_at": full,
                "past_horizon": (at - full) if at is not None and full is not None else None,
                "slowed_relative": round(sum(slow_rel) / len(slow_rel), 3) if slow_rel else None})
print(json.dumps(out))
PY
}

n=0
for load in $LOADS; do
    [ "$load" = 1 ] && start_load
    for ranks in $RANKS; do
        # the steps that span the runs' seconds here: a 60-step run's median step time
        "$M" run -n "$ranks" --events "$T/cal.jsonl" -- train $model --dp "$ranks" --steps 60 >"$T/cal.out" 2>&1
        step_s=$(jq -s '[.[] | select(.event == "rank-times") | .step_s[] | select(. != null)] | sort | .[length / 2 | floor] // 0.05' "$T/cal.jsonl")
        STEPS=${HEALTHY_STEPS:-$(/usr/bin/python3 -c "print(int(($HORIZON + $SECONDS_H) / $step_s))")}
        DETECT_STEPS=${SLOWED_STEPS:-$(/usr/bin/python3 -c "print(int((1.5 * $HORIZON + 10) / $step_s))")}
        echo "# ranks=$ranks load=$load: step ${step_s} s: healthy runs $STEPS steps, slowed runs $DETECT_STEPS"
        for run in $(seq 1 "$RUNS"); do
            n=$((n + 1))
            "$M" run -n "$ranks" --straggler-horizon "$HORIZON" --events "$T/h$n.jsonl" -- train $model --dp "$ranks" --steps "$STEPS" \
                --save "$T/h$n" >"$T/h$n.out" 2>&1 || echo "# run $n exited $?: $(tail -1 "$T/h$n.out")"
            summarize "$T/h$n.jsonl" "healthy ranks=$ranks load=$load run=$run" -1 0 "$HORIZON" | tee -a "$T/all.jsonl"
            rm -rf "$T/h$n"
        done
        for from in 1 20; do
            for run in $(seq 1 "$DETECT"); do
                n=$((n + 1))
                "$M" run -n "$ranks" --straggler-horizon "$HORIZON" --inject "slow@$from:1:$FACTOR" --events "$T/h$n.jsonl" \
                    -- train $model --dp "$ranks" --steps "$DETECT_STEPS" --save "$T/h$n" >"$T/h$n.out" 2>&1 || echo "# run $n exited $?"
                summarize "$T/h$n.jsonl" "slowed ${FACTOR}x from step $from ranks=$ranks load=$load run=$run" 1 "$from" "$HORIZON" |
                    tee -a "$T/all.jsonl"
                rm -rf "$T/h$n"
            done
        done
    done
    stop_load
done
/usr/bin/python3 - "$T/all.jsonl" "$HORIZON" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
h = [r for r in rs if r["case"].startswith("healthy")]
d = [r for r in rs if r["case"].startswith("slowed")]
print(f"healthy runs: {len(h)}, false alarms: {sum(r['false_alarms'] for r in h)}, runs with a healthy rank below for "
      f"2+ windows in a row: {sum(1 for r in h if r['longest_healthy_run_below'] >= 2)}, lowest healthy relative: "
      f"{min(r['lowest_healthy_relative'] for r in h if r['lowest_healthy_relative'] is not None)}, lowest healthy "
      f"individual: {min(r['lowest_healthy_individual'] for r in h if r['lowest_healthy_individual'] is not None)}; "
      f"runs the window rule alone would have alarmed in: {sum(r['window_rule_alone_alarms'] for r in h)}; lowest healthy "
      f"horizon relative: {min((r['lowest_healthy_horizon_relative'] for r in h if r['lowest_healthy_horizon_relative'] is not None), default=None)}, "
      f"individual: {min((r['lowest_healthy_horizon_individual'] for r in h if r['lowest_healthy_horizon_individual'] is not None), default=None)}")
lat = [r["latency"] for r in d if r["latency"] is not None]
past = [r["past_horizon"] for r in d if r.get("past_horizon") is not None]
print(f"slowed runs: {len(d)}, flagged: {len(lat)}, latency {min(lat) if lat else '-'}..{max(lat) if lat else '-'} steps, "
      f"{min(past) if past else '-'}..{max(past) if past else '-'} steps after the horizon first spanned {sys.argv[2]} s, "
      f"false alarms beside them: {sum(r['false_alarms'] for r in d)}")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
