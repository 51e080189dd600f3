#!/usr/bin/env bash
# tests/test_ledger.sh: the time ledger of a supervised run (docs/LAUNCHER.md, Time ledger) on a
# fault soak: the real trainer on 4 ranks (dp 4, two per host) on emulated hosts (network
# namespaces, tests/lib.sh ns_up: 2 working hosts and 3 spares), in-memory copies every step, and
# LEDGER_FAULTS injected faults (default 10: 3 host losses, each replaced by a spare, and random
# kills and hangs; `make test-long` runs 30). Checked against the event log, not against the
# clock (no figure here depends on how fast the machine is):
#   - the goodput event is the last one, its causes add up to its wall time (within 1%) and the
#     attempts' rows to its totals; every attempt's row equals the `ledger` event logged for it and
#     spans exactly the time from its launch event to the next one (to the end for the last);
#   - the timeline's segments tile [0, wall] without gap or overlap and hold each cause that is
#     not part of a step with exactly its seconds;
#   - every failure has a recovery event whose phases add up to its total and whose detection
#     equals the time from the fault to its verdict in the event log (hangs: inject ->
#     heartbeat-timeout; kills: inject -> exit; host losses: inject -> exit, or heartbeat-timeout
#     when the link went down before the killed ranks' connections closed);
#   - Prometheus: myriad_time_seconds_total{cause} never decreases between scrapes, never exceeds
#     myriad_wall_seconds, and a scrape after the end (--metrics-linger) equals the goodput event;
#   - the console summary names the same effective training time;
#   - the run report draws the same ledger (its data block);
#   - `myriad sim goodput` given the soak's log 64 times as calibration predicts what the log alone
#     does, and refuses a 65th file in one line.
# Skipped with the reason when namespaces cannot be made here.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
. tests/lib.sh
test_scratch ledger
P="myg$$"
trap 'ns_down "$P" 5; [ -n "${KEEP:-}" ] && cp "$T"/*.jsonl "$T"/*.out "$KEEP"/ 2>/dev/null; rm -rf "$T"' EXIT
LEDGER_FAULTS=${LEDGER_FAULTS:-10}
if ! command -v mpirun >/dev/null; then echo "skip ledger_soak (mpirun is not installed)"; exit 0; fi
if ! command -v curl >/dev/null; then echo "skip ledger_soak (curl is not installed)"; exit 0; fi
if ! ns_up "$P" 5 "$T"; then echo "skip ledger_soak ($NS_WHY)"; exit 0; fi
net=$NS_NET
for i in 1 2 3 4 5; do echo "$net.1$i slots=2"; done >"$T/hosts"
# a host loss (tests/lib.sh ns_cut_script), its in-memory copies gone with it
ns_cut_script "$T/cut.sh" "$T/shm"
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
export MYRIAD_SHM_DIR="$T/shm"
steps=$(( 4 * LEDGER_FAULTS + 10 ))
train="--arch gpt2 --layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 67 --max-seq 32 --data $T/tok.bin --batch 16 --seq 32 \
--lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --dp 4 --steps $steps --eval-every 10 --eval-batches 2 --val-data $T/tok.bin"
# three host losses (host 1, then host 2, then the spare that replaced host 1), the rest random
# kills and hangs drawn over the first 3/4 of the run
q=$(( steps / 4 ))
faults="host@$q:$net.11,host@$(( 2 * q )):$net.12,host@$(( 3 * q )):$net.13,random:3:$(( LEDGER_FAULTS - 3 )):$(( 3 * steps / 4 ))"
start=$(date +%s)
timeout 900 "$M" run -n 4 --hosts "$T/hosts" --spares 3 --max-restarts $(( LEDGER_FAULTS + 6 )) --hang-timeout 4 \
    --start-timeout 30 --hb-addr "$net.1" "${MPI_NS[@]}" --inject "$faults" --cut-link-cmd "$T/cut.sh" \
    --metrics-port 0 --metrics-addr 127.0.0.1 --metrics-linger 30 --events "$T/ev.jsonl" -- \
    train $train --save "$T/run" --save-every 10 >"$T/run.out" 2>&1 &
job=$!
# scrape /metrics through the run, and once more after the goodput event (the launcher lingers)
port=""
for _ in $(seq 1 300); do
    port=$(jq -r 'select(.event == "metrics") | .port' "$T/ev.jsonl" 2>/dev/null | head -1)
    [ -n "$port" ] && break
    sleep 0.2
done
n=0
while kill -0 $job 2>/dev/null; do
    if grep -q '"event":"goodput"' "$T/ev.jsonl" 2>/dev/null; then
        # (into a temporary file: a refused connection must not leave an empty final.prom, which
        # happens when the loop's last ordinary scrape was the one the lingering launcher stopped at)
        curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$T/final.tmp" && mv "$T/final.tmp" "$T/final.prom" && break
    else
        curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$T/scrape.$(printf %04d $n).prom" 2>/dev/null && n=$((n + 1))
        sleep 1
    fi
done
wait $job
rc=$?
secs=$(( $(date +%s) - start ))
if [ -z "$port" ]; then echo "FAIL ledger_soak (no metrics event; exit $rc)"; tail -5 "$T/run.out" >&2; exit 0; fi

/usr/bin/python3 - "$T" "$rc" "$LEDGER_FAULTS" "$secs" <<'PY'
import glob, json, math, re, sys
T, rc, want_faults, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ev = [json.loads(l) for l in open(T + "/ev.jsonl")]
def check(name, problems):
    print(("ok " if not problems else "FAIL ") + name + ("" if not problems else " (" + "; ".join(problems)[:900] + ")"))
g, fin = ev[-1], [e for e in ev if e["event"] == "finished"]
inject = [e for e in ev if e["event"] == "inject"]
kinds = sorted(set(e["fault"] for e in inject))
problems = []
if rc != 0: problems.append("exit %d" % rc)
if g["event"] != "goodput": problems.append("the last event is %s" % g["event"])
if len(inject) < want_faults or kinds != ["hang", "host", "kill"]:
    problems.append("%d faults fired (%s), %d asked" % (len(inject), kinds, want_faults))
if not fin or fin[-1]["status"] != "ok": problems.append("finished %s" % fin[-1:])
check("ledger_soak_ran (%d faults: %s; %d restarts, %s s)" % (len(inject), ", ".join(
    "%d %s" % (sum(e["fault"] == k for e in inject), k) for k in kinds), fin[-1]["restarts"] if fin else -1, secs), problems)
if g["event"] != "goodput": sys.exit(0)
W, S = g["wall_s"], g["seconds"]
total = sum(S.values())
problems = []
if abs(total - W) > 0.01 * W: problems.append("causes sum to %.3f s, wall %.3f s" % (total, W))
if fin and abs(fin[-1]["wall_s"] - W) > 1e-9: problems.append("finished wall %s, goodput wall %s" % (fin[-1]["wall_s"], W))
# effective is rounded to 4 places from the unrounded seconds, productive and wall to the ms: its
# ratio here may differ by one last place plus the ms roundings' share (a failure at 1e-4 seen: a
# boundary case, not a wrong figure)
if abs(g["effective"] - S["productive"] / W) > 0.5e-4 + 0.0005 * (1 + S["productive"] / W) / W + 1e-9:
    problems.append("effective %s" % g["effective"])
for c in S:
    a = sum(r[c] for r in g["attempts"])
    if abs(a - S[c]) > 0.001 * len(g["attempts"]) + 1e-9: problems.append("%s: attempts add to %.3f, total %.3f" % (c, a, S[c]))
check("ledger_causes_sum_to_wall (%.3f of %.3f s: %.3f%%; effective %.1f%%)" % (total, W, 100 * abs(total - W) / W,
                                                                             100 * g["effective"]), problems)
# every attempt's row: its ledger event, and the time from its launch to the next launch
launch = [e["t"] for e in ev if e["event"] == "launch"]
rows = {e["attempt"]: e["seconds"] for e in ev if e["event"] == "ledger"}
problems = []
if len(launch) != len(g["attempts"]): problems.append("%d launches, %d attempt rows" % (len(launch), len(g["attempts"])))
for a, r in enumerate(g["attempts"]):
    if rows.get(a) != r: problems.append("attempt %d: ledger event %s, goodput %s" % (a, rows.get(a), r))
    t0 = 0 if a == 0 else launch[a]
    t1 = launch[a + 1] if a + 1 < len(launch) else W
    if abs(sum(r.values()) - (t1 - t0)) > 0.002 * len(r) + 0.002: problems.append("attempt %d: %.3f s, launches %.3f s" % (a, sum(r.values()), t1 - t0))
check("ledger_attempts_match_launch_events (%d attempts)" % len(g["attempts"]), problems)
# the timeline tiles the wall time; causes outside steps have exactly their seconds there
tl = g["timeline"]
problems = []
if not tl or tl[0][0] != 0 or abs(tl[-1][1] - W) > 0.002: problems.append("spans %s .. %s" % (tl[:1], tl[-1:]))
for a, b in zip(tl, tl[1:]):
    if abs(a[1] - b[0]) > 0.0011: problems.append("gap or overlap %s %s" % (a, b))
inside = {"productive", "recomputed", "checkpoint", "data", "eval", "straggler"}
for c in S:
    if c in inside: continue
    seg = sum(x[1] - x[0] for x in tl if x[2] == c)
    if abs(seg - S[c]) > 0.0015 * (1 + sum(x[2] == c for x in tl)) + 0.003 and S[c] > 0.01: problems.append("%s: segments %.3f, seconds %.3f" % (c, seg, S[c]))
steps_seg = sum(x[1] - x[0] for x in tl if x[2] in ("productive", "recomputed"))
steps_sec = sum(S[c] for c in inside)
if abs(steps_seg - steps_sec) > 0.01 + 0.001 * len(tl): problems.append("steps: segments %.3f, causes %.3f" % (steps_seg, steps_sec))
check("ledger_timeline_tiles_the_run (%d segments)" % len(tl), problems)
# recoveries: one per failure; phases add up; the failure and its verdict are the event log's
# fault and verdict (hangs: inject -> heartbeat-timeout; kills: inject -> exit; host losses: either)
rec = [e for e in ev if e["event"] == "recovery"]
problems = []
restarts = fin[-1]["restarts"] if fin else 0
if len(rec) != restarts: problems.append("%d recovery events for %d restarts" % (len(rec), restarts))
for r in rec:
    if abs(sum(r["phases"].values()) - r["total_s"]) > 0.01: problems.append("phases %s total %s" % (r["phases"], r["total_s"]))
    if abs(r["phases"]["detection"] - (r["declared_t"] - r["failure_t"])) > 0.002: problems.append("detection %s" % r)
matched = 0
for r in rec:
    k = r["attempt"] - 1 # the attempt that failed: its launch .. the next one
    t0, t1 = launch[k], launch[k + 1] if k + 1 < len(launch) else W
    e = next((x for x in inject if t0 <= x["t"] < t1), None)
    if not e: continue
    # a lost host's connections may never close: when its link goes down before the killed
    # ranks' FINs left, the verdict is the hang timeout's instead of the closed connection's
    want = {"hang": ("heartbeat-timeout",), "host": ("exit", "heartbeat-timeout")}.get(e["fault"], ("exit",))
    v = next((x for x in ev[ev.index(e) + 1:] if x["event"] in want), None)
    # the failure starts at the fault, or later when a job step the ledger had to account completed
    # after the fault (the lost ranks had reported it before they died): the ledger never goes back
    if v and e["t"] - 0.0015 <= r["failure_t"] <= r["declared_t"] and abs(r["declared_t"] - v["t"]) <= 0.0015: matched += 1
    else: problems.append("attempt %d: %s at %.3f, verdict %s; recovery failure_t %s declared_t %s" % (k, e["fault"], e["t"], v and v["t"], r["failure_t"], r["declared_t"]))
done = [r for r in rec if r["completed"]]
med = sorted(r["total_s"] for r in done)[len(done) // 2] if done else 0
check("ledger_recovery_phases_match_events (%d recoveries, %d completed, %d matched to their fault; median %.2f s)" % (
    len(rec), len(done), matched, med), problems)
# Prometheus
def prom(path):
    out, wall = {}, None
    for line in open(path):
        m = re.match(r'myriad_time_seconds_total\{cause="(\w+)"\} (\S+)', line)
        if m: out[m.group(1)] = float(m.group(2))
        m = re.match(r'myriad_wall_seconds (\S+)', line)
        if m: wall = float(m.group(1))
    return out, wall
scrapes = sorted(p for p in glob.glob(T + "/scrape.*.prom") if prom(p)[0])
problems = []
prev = {}
for p in scrapes:
    cur, wall = prom(p)
    for c, v in cur.items():
        if v + 1e-9 < prev.get(c, 0): problems.append("%s fell from %s to %s" % (c, prev[c], v))
    if wall is not None and sum(cur.values()) > wall + 0.01: problems.append("sum %.3f above wall %.3f" % (sum(cur.values()), wall))
    prev = cur
# the scrape after the end: the loop's own (it saw the goodput event), else the loop's last one,
# which the lingering launcher answered after the end (it stops at the first scrape then)
final = glob.glob(T + "/final.prom") or scrapes[-1:]
if not final: problems.append("no scrape after the end")
else:
    cur, wall = prom(final[0])
    for c in S:
        if abs(cur.get(c, -1) - S[c]) > 0.0006: problems.append("%s: prometheus %s, event %s" % (c, cur.get(c), S[c]))
    for c, v in cur.items():
        if v + 1e-9 < prev.get(c, 0): problems.append("final %s below an earlier scrape" % c)
check("ledger_prometheus_agrees_with_events (%d scrapes)" % len(scrapes + glob.glob(T + "/final.prom")), problems)
# console
out = open(T + "/run.out").read()
m = re.search(r"time ledger: effective training time ([0-9.]+)%", out)
# the console prints one decimal of the unrounded figures; S and W are rounded to the millisecond,
# which moves their ratio by up to 100 * 0.0005 * (1 + P/W) / W points: a clean-clone CI run failed
# the old 0.051 bound with the console and the event both saying 3.2% (27.7 s wall)
tol = 0.05 + 100 * 0.0005 * (1 + S["productive"] / W) / W + 1e-6
check("ledger_console_summary", [] if m and abs(float(m.group(1)) - 100 * S["productive"] / W) <= tol else ["console: %s" % (m and m.group(0))])
PY
# the report draws the same ledger
"$M" report "$T/ev.jsonl" -o "$T/report.html" >/dev/null 2>&1
/usr/bin/python3 - "$T" <<'PY'
import json, re, sys
T = sys.argv[1]
g = [json.loads(l) for l in open(T + "/ev.jsonl")][-1]
html = open(T + "/report.html").read()
m = re.search(r'<script type="application/json" id="report-data">\n(.*)\n</script>', html, re.S)
d = json.loads(m.group(1).replace("<\\/", "</")) if m else {}
led = d.get("ledger", {})
bars = {c: float(s) for c, s in re.findall(r'data-cause="(\w+)" data-seconds="([^"]+)"', html)}
ok = led.get("seconds") == g["seconds"] and led.get("timeline") == g["timeline"] and \
    bars == {c: s for c, s in g["seconds"].items() if s > 0} and 'data-plot="cause_timeline"' in html
print(("ok" if ok else "FAIL") + " ledger_report_draws_the_ledger" + ("" if ok else " (%s vs %s)" % (bars, g["seconds"])))
PY

# `myriad sim goodput` pools calibration runs: the soak's log given 64 times predicts what it
# predicts alone (identical runs pooled are that run), and a 65th file is refused in one line
one=(--calibration "$T/ev.jsonl")
many=(); for _ in $(seq 1 64); do many+=("${one[@]}"); done
pred="--inject-rate kill+hang:20,seed=3 --steps 500 --hang-timeout 4 --json"
"$M" sim goodput $pred "${one[@]}" >"$T/p1.json" 2>"$T/p1.err"
"$M" sim goodput $pred "${many[@]}" >"$T/p64.json" 2>"$T/p64.err"
"$M" sim goodput $pred "${many[@]}" "${one[@]}" >/dev/null 2>"$T/p65.err"
rc65=$?
/usr/bin/python3 - "$T" "$rc65" <<'PY'
import json, sys
T, rc65 = sys.argv[1], int(sys.argv[2])
problems = []
try:
    a, b = json.load(open(T + "/p1.json")), json.load(open(T + "/p64.json"))
    for k in ("expected", "replay"):
        if abs(a[k]["effective"] - b[k]["effective"]) > 1e-9: problems.append("%s: %s alone, %s pooled" % (k, a[k]["effective"], b[k]["effective"]))
    ra, rb = a["recovery_s"], b["recovery_s"]
    if abs(a["step_s"] - b["step_s"]) > 1e-12 or ra.keys() != rb.keys() or any(abs(ra[k] - rb[k]) > 1e-9 for k in ra):
        problems.append("inputs: step %s, recovery %s alone; %s, %s pooled" % (a["step_s"], ra, b["step_s"], rb))
except Exception as e:
    problems.append("no prediction: %s %s" % (e, open(T + "/p1.err").read()[-300:] + open(T + "/p64.err").read()[-300:]))
err = open(T + "/p65.err").read().strip().splitlines()
if rc65 == 0 or len(err) != 1 or "at most 64 --calibration files" not in err[0]: problems.append("65 files: exit %d, %s" % (rc65, err))
print(("ok" if not problems else "FAIL") + " ledger_calibration_pooled" + ("" if not problems else " (" + "; ".join(problems)[:900] + ")"))
PY
