#!/usr/bin/env bash
# bench/sim_pp_trace.sh: where the pp 2 own-run step goes, measured against simulated (issue 17,
# acceptance 5). One invocation, back to back: `myriad bench calibrate` on 2 ranks x 1 thread,
# `myriad train --pp 2 --trace` (the Chrome trace of step 2: every forward, backward and transfer of
# both stages), `myriad sim --trace` with that calibration. Prints, per stage, the mean forward and
# backward of one micro-batch, the time the stage spent waiting (step less its compute), and the
# step, measured and simulated. Usage: bash bench/sim_pp_trace.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
B=bin/myriad
W=$(mktemp -d /tmp/myriad-pptrace-XXXXXX); trap 'rm -rf "$W"' EXIT
SHAPE="--arch gpt2 --layers 4 --hidden 384 --heads 6 --vocab 4096"
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" $((6 * 8 * 128 + 1)) 4096
for r in $(seq "$rounds"); do
    $B run -n 2 -- bench calibrate --hidden 384 --heads 6 --vocab 4096 --seq 128 --reps 3 --tokens 128 --tp 1 \
        --threads 1 --name cpu-pp2 --out "$W/cal" </dev/null >/dev/null
    $B run -n 2 -- train $SHAPE --max-seq 128 --data "$W/tok.bin" --batch 8 --seq 128 --steps 3 --threads 1 \
        --no-shuffle --pp 2 --micro-batch 1 --trace "$W/train.json" --log "$W/log.jsonl" </dev/null >/dev/null 2>"$W/err" ||
        { cat "$W/err"; exit 1; }
    $B sim --gpu "$W/cal.hw.json" --cluster "$W/cal.cluster.json" --software myriad $SHAPE --dropout 0 --seq 128 \
        --dtype fp32 --global-batch 8 --recompute none --gpus 2 --pp 2 --micro-batch 1 --trace "$W/sim.json" >/dev/null
    echo "round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
    /usr/bin/python3 - "$W/train.json" "$W/sim.json" <<'EOF'
import json, sys
def load(path):
    d = json.load(open(path))
    return [e for e in (d["traceEvents"] if isinstance(d, dict) else d) if e.get("ph") == "X"]
def summary(ev, lane_of, kind_of):
    out = {}
    for e in ev:
        s, k = lane_of(e), kind_of(e)
        if s is None or k is None: continue
        o = out.setdefault(s, {"F": [], "B": [], "lo": 1e30, "hi": 0})
        o[k].append(e["dur"] / 1e3)
        o["lo"] = min(o["lo"], e["ts"]); o["hi"] = max(o["hi"], e["ts"] + e["dur"])
    return out
tr = load(sys.argv[1])
# train: pid = rank, lane 0 = compute; names start with F/B (forward/backward of one micro-batch)
meas = summary(tr, lambda e: e["pid"] if e.get("tid") == 0 else None,
               lambda e: "F" if e["name"].upper().startswith("F") else "B" if e["name"].upper().startswith("B") else None)
sm = load(sys.argv[2])
pred = summary(sm, lambda e: e["tid"] if e["tid"] < 2 else None, lambda e: e["name"][0] if e["name"][0] in "FB" else None)
names = sorted({e["name"] for e in tr})[:12]
print("  train trace op names: " + ", ".join(names))
for s in sorted(pred):
    for what, o in (("measured ", meas.get(s)), ("simulated", pred[s])):
        if not o or not o["F"]: print("  stage %d %s: no events" % (s, what)); continue
        span = (o["hi"] - o["lo"]) / 1e3
        busy = sum(o["F"]) + sum(o["B"])
        print("  stage %d %s: %d F x %6.1f ms, %d B x %6.1f ms; busy %7.1f ms of %7.1f ms (waiting %6.1f ms)"
              % (s, what, len(o["F"]), sum(o["F"]) / len(o["F"]), len(o["B"]), sum(o["B"]) / max(1, len(o["B"])),
                 busy, span, span - busy))
EOF
    /usr/bin/python3 -c "
import json
rows = [json.loads(l) for l in open('$W/log.jsonl')]
print('  train step ms:', ' '.join('%.0f' % r['ms'] for r in rows))"
done
