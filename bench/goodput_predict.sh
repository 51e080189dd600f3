#!/usr/bin/env bash
# bench/goodput_predict.sh: predicted vs measured effective training time of a fault soak at two
# fault rates (issue 30, acceptance 4; docs/SIMULATOR.md "Goodput of a fault soak").
#   1. the soaks: the job under `myriad run --inject-rate kill+hang:MTBF,seed=SEED` for each MTBF
#      in MTBFS (default 10 and 30 s of up time; STEPS 15,000: ~20 and ~7 faults in 3-4 minutes of steps on a quiet 2-core machine), one after the other;
#   2. calibration runs beside each soak, back to back from its start to its end: the same job with
#      CAL_KILLS kills and CAL_HANGS hangs at fixed steps (--inject kill@/hang@, no Poisson clock),
#      where the step time, the start and finish, and the down time of one kill and of one hang
#      are measured. Beside, not before or after: on this shared 2-core machine the load of other
#      work moves the step time by 30% or more from one minute to the next, and a calibration at
#      another time measures another machine; beside the soak it shares the soak's load (and adds
#      its own, which the soak shares in turn);
#   3. for each soak `myriad sim goodput` with the soak's clock and steps and the event logs of its
#      calibration runs (never the soak's own) predicts the effective time (productive / wall):
#      the expectation over fault schedules (with its spread, +-1 sigma) and the replay of the
#      seed's own schedule; the measured figure is the soak's goodput event. Prints both and the
#      differences in percentage points; writes OUT/results.md (bench/goodput_predict_results.md).
# The job: the real trainer, GPT-2 shape (2 layers, hidden 64), dp 4 on this machine, in-memory
# copies every step (myriad run's default), disk saves every 50 steps, --hang-timeout HANG.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
M=${MYRIAD:-$PWD/bin/myriad}
OUT=${OUT:-/tmp/myriad-goodput-predict}
MTBFS=${MTBFS:-"10 30"}
SEED=${SEED:-1}
STEPS=${STEPS:-15000}
HANG=${HANG:-3}
CAL_KILLS=${CAL_KILLS:-2}
CAL_HANGS=${CAL_HANGS:-2}
CAL_EVERY=${CAL_EVERY:-300} # steps between the calibration's faults: a stretch of steps like the soak's between faults
CAL_STEPS=${CAL_STEPS:-$(( CAL_EVERY * (CAL_KILLS + CAL_HANGS + 1) ))}
rm -rf "$OUT" && mkdir -p "$OUT"
/usr/bin/python3 bench/make_tokens.py "$OUT/tok.bin" 100000 67 5 >/dev/null
train="--arch gpt2 --layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 67 --max-seq 32 --data $OUT/tok.bin --batch 16 --seq 32 \
--lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --dp 4 --save-every 50"
load() { cut -d' ' -f1-3 /proc/loadavg; }

run() { # NAME STEPS FAULT-FLAGS...
    local name=$1 steps=$2
    shift 2
    rm -rf "$OUT/$name" "$OUT/shm-$name"
    local l0; l0=$(load)
    MYRIAD_SHM_DIR="$OUT/shm-$name" timeout 1800 "$M" run -n 4 --max-restarts 1000 --hang-timeout "$HANG" "$@" \
        --events "$OUT/$name.jsonl" -- train $train --steps "$steps" --save "$OUT/$name" >"$OUT/$name.out" 2>&1
    local rc=$?
    rm -rf "$OUT/shm-$name"
    echo "$name: exit $rc, load before $l0, after $(load)" >>"$OUT/load.txt"
    [ $rc -eq 0 ] || { echo "$name failed (exit $rc):"; tail -5 "$OUT/$name.out"; return 1; }
}

# the calibration's faults: the kills first, then the hangs, every CAL_EVERY steps, ranks 1, 2, 3, 0, ...
faults=""
for i in $(seq 1 $(( CAL_KILLS + CAL_HANGS ))); do
    kind=kill; [ "$i" -gt "$CAL_KILLS" ] && kind=hang
    faults="$faults${faults:+,}$kind@$(( CAL_EVERY * i )):$(( i % 4 ))"
done
for mtbf in $MTBFS; do
    run "soak-$mtbf" "$STEPS" --inject-rate "kill+hang:$mtbf,seed=$SEED" &
    soak=$!
    k=0 cal=()
    while kill -0 $soak 2>/dev/null; do
        run "calibration-$mtbf-$k" "$CAL_STEPS" --inject "$faults" || exit 1
        cal+=(--calibration "$OUT/calibration-$mtbf-$k.jsonl")
        k=$(( k + 1 ))
    done
    wait $soak || exit 1
    echo "$(grep "^soak-$mtbf:" "$OUT/load.txt"); $k calibration runs beside it"
    "$M" sim goodput --inject-rate "kill+hang:$mtbf,seed=$SEED" --steps "$STEPS" "${cal[@]}" --hang-timeout "$HANG" || exit 1
    "$M" sim goodput --inject-rate "kill+hang:$mtbf,seed=$SEED" --steps "$STEPS" "${cal[@]}" --hang-timeout "$HANG" \
        --json >"$OUT/predict-$mtbf.json" || exit 1
    echo "$k" >"$OUT/predict-$mtbf.from"
done

/usr/bin/python3 - "$OUT" "$SEED" "$STEPS" "$HANG" $MTBFS <<'PY'
import json, sys
out, seed, steps, hang, mtbfs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def events(name): return [json.loads(l) for l in open("%s/%s.jsonl" % (out, name))]
def goodput(ev): return [e for e in ev if e["event"] == "goodput"][-1]
lines = []
p = lambda s="": (print(s), lines.append(s))
import glob, os
for name in sorted((os.path.basename(f)[:-6] for f in glob.glob(out + "/calibration-*.jsonl")), key=lambda n: [int(x) for x in n.split("-")[1:]]):
    cal = events(name)
    cg = goodput(cal)
    rec = [e for e in cal if e["event"] == "recovery" and e["completed"]]
    p("%s: %d steps, %.1f s wall, productive %.4f s per step, effective %.2f%%, %d recoveries (down time: %s)" % (
        name, [e for e in cal if e["event"] == "finished"][-1]["steps"], cg["wall_s"],
        cg["seconds"]["productive"] / [e for e in cal if e["event"] == "finished"][-1]["steps"], 100 * cg["effective"], len(rec),
        ", ".join("%s %.2f s" % (r["failure"], r["total_s"] - r["phases"]["replay"]) for r in rec)))
p()
p("| MTBF (s of up time) | calibration runs beside it | faults fired (kill, hang) | wall s | measured effective | predicted: expectation +- sigma | diff pp | predicted: replay of seed %s | diff pp |" % seed)
p("|---|---|---|---|---|---|---|---|---|")
worst = 0
soak_info = []
for m in mtbfs:
    ev = events("soak-%s" % m)
    g = goodput(ev)
    inj = [e for e in ev if e["event"] == "inject"]
    pr = json.load(open("%s/predict-%s.json" % (out, m)))
    meas, ex, rp = 100 * g["seconds"]["productive"] / g["wall_s"], 100 * pr["expected"]["effective"], 100 * pr["replay"]["effective"]
    worst = max(worst, abs(ex - meas), abs(rp - meas))
    fin = [e for e in ev if e["event"] == "finished"][-1]
    soak_info.append("soak-%s: productive %.4f s per step" % (m, g["seconds"]["productive"] / fin["steps"]))
    p("| %s | %s | %d (%d, %d); predicted %.1f expected, %d replayed | %.1f | **%.2f%%** | %.2f%% +- %.2f | %+.2f | %.2f%% | %+.2f |" % (
        m, open("%s/predict-%s.from" % (out, m)).read().strip(), len(inj), sum(e["fault"] == "kill" for e in inj), sum(e["fault"] == "hang" for e in inj), pr["expected"]["faults"],
        pr["replay"]["faults"], g["wall_s"], meas, ex, 100 * pr["expected"]["sigma"], ex - meas, rp, rp - meas))
p()
p("model inputs of the last soak (its calibration runs pooled): step %.4f s up time, productive %.4f s, start and finish %.3f s, recovery %s, "
  "lost per fault %.4f s" % (pr["step_s"], pr["productive_s"], pr["fixed_s"],
  ", ".join("%s %.3f s" % kv for kv in pr["recovery_s"].items()), pr["lost_per_fault_s"]))
p("measured in the soaks themselves (not used by the prediction): " + "; ".join(soak_info))
p("largest difference: %.2f pp" % worst)
open(out + "/results.md", "w").write("\n".join(lines) + "\n")
PY
cat "$OUT/load.txt"
