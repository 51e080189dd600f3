#!/usr/bin/env bash
# test_sched_cli.sh: `myriad sched` end to end: JSON metrics keys, bad input exits non-zero with the
# line number, launch files, and (when ../shared is present) an openb replay.
cd "$(dirname "$0")/.."
M=bin/myriad
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "ok $1"; }
fail() { echo "FAIL $1"; }

if $M sched simulate --synthetic --gpus 256 --jobs 400 --load 0.8 --seed 3 --policy best --json >"$tmp/m.json" 2>"$tmp/err" &&
   /usr/bin/python3 - "$tmp/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
need = ["avg_jct_s", "p99_jct_s", "avg_queue_s", "makespan_s", "gpu_alloc_rate", "fragmentation", "preemptions",
        "decision_ms_p50", "jobs_finished", "jain_jobs", "tiers_spanned", "gpu_hours_lost", "classes"]
missing = [k for k in need if k not in m]
assert not missing, missing
assert m["jobs_finished"] == 400, m["jobs_finished"]
assert m["p99_jct_s"] >= m["avg_jct_s"] * 0 and 0 <= m["gpu_alloc_rate"] <= 1
assert sum(c["jobs"] for c in m["classes"].values()) == 400
PY
then pass sched_cli_json; else fail sched_cli_json; cat "$tmp/err"; fi

# "load" is one measure for traces and synthetic workloads (--load, docs/SCHEDULER.md): the synthetic
# sample offers exactly what it is asked; allocation stays below what the window would hold had no
# job waited, and reaches it when nothing waits (gangs of at most 8 GPUs on 1,024)
for g in 1024 8; do
    $M sched simulate --synthetic --gpus 1024 --jobs 500 --policy fifo --max-gang $g --json >"$tmp/l$g.json" 2>"$tmp/err"
    $M sched simulate --synthetic --gpus 1024 --jobs 500 --policy fifo --max-gang $g >"$tmp/l$g.txt" 2>>"$tmp/err"
done
if /usr/bin/python3 - "$tmp/l1024.json" "$tmp/l8.json" <<'PY'
import json, sys
big, small = (json.load(open(p)) for p in sys.argv[1:3])
for m in (big, small):
    assert abs(m["offered_load"] - 0.8) < 1e-6, m["offered_load"]
    assert m["window_demand"] <= m["offered_load"] + 1e-9 and m["gpu_alloc_rate"] <= m["window_demand"] + 1e-6, m
assert abs(small["gpu_alloc_rate"] - small["window_demand"]) < 0.01, small   # nothing waits: all of it
assert big["gpu_alloc_rate"] < big["window_demand"] - 0.1, big              # whole-cluster gangs block FIFO
PY
then
    grep -q "^policy fifo on synthetic 500 jobs on 1024 GPUs, offered load 0.80, seed 1" "$tmp/l1024.txt" &&
        grep -q "offered load 80.0 %, [0-9.]* % in the window had no job waited; GPU allocation" "$tmp/l1024.txt" &&
        pass sched_cli_load_means_offered || fail sched_cli_load_means_offered
else fail sched_cli_load_means_offered; cat "$tmp/err"; fi

if ! $M sched simulate --synthetic --gpus 256 --policy nosuch 2>"$tmp/err" >/dev/null && grep -q "built-ins" "$tmp/err"; then
    pass sched_cli_bad_policy; else fail sched_cli_bad_policy; fi
if ! $M sched simulate --synthetic --gpus 256 --policy fifo --bogus 2>/dev/null >/dev/null; then pass sched_cli_bad_flag; else fail sched_cli_bad_flag; fi

cat >"$tmp/pods.csv" <<'CSV'
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,1000,1024,1,1000,,LS,Running,0,100,0
p1,1000,1024,2,1000,,BE,Running,10,300,10
p2,1000,1024,one,1000,,BE,Running,20,300,20
p3,1000,1024,64,1000,,BE,Running,30,300,30
p4,1000,1024,1,500,Z100,BE,Running,40,300,40
CSV
if ! $M sched simulate --cluster gen:2x8 --trace "$tmp/pods.csv" --policy fifo 2>"$tmp/err" >/dev/null && grep -q "pods.csv:4:" "$tmp/err"; then
    pass sched_cli_malformed_row_fatal; else fail sched_cli_malformed_row_fatal; cat "$tmp/err"; fi
if $M sched simulate --cluster gen:2x8 --trace "$tmp/pods.csv" --policy fifo --skip-bad --json >"$tmp/o" 2>"$tmp/err" &&
   grep -q "pods.csv:4:" "$tmp/err" && grep -q "pods.csv:5:" "$tmp/err" && grep -q "Z100" "$tmp/err" && grep -q '"jobs_finished": 2' "$tmp/o"; then
    pass sched_cli_skip_bad; else fail sched_cli_skip_bad; cat "$tmp/err" "$tmp/o"; fi

if $M sched place --cluster gen:8x8 --tp 8 --pp 4 --dp 2 --hostfile "$tmp/h" --rankfile "$tmp/r" --slurm-topology "$tmp/t" \
      --hypernodes "$tmp/y" >"$tmp/o" && [ "$(grep -c '^rank ' "$tmp/r")" = 64 ] && [ "$(wc -l <"$tmp/h")" = 8 ] &&
   grep -q "hops across leaves: 0 of 6" "$tmp/o" && grep -q "kind: HyperNode" "$tmp/y" && grep -q "^SwitchName=leaf0" "$tmp/t"; then
    pass sched_cli_place; else fail sched_cli_place; cat "$tmp/o"; fi

# per-job output (like sacct): one row per job, consistent with the summary; a job's wait and run
# add up to its completion time, and the table's max wait is the largest wait_s
if $M sched simulate --synthetic --gpus 256 --jobs 400 --load 0.8 --seed 3 --policy backfill --json \
      --jobs-out "$tmp/jobs.csv" >"$tmp/m.json" 2>"$tmp/err" && /usr/bin/python3 - "$tmp/jobs.csv" "$tmp/m.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
m = json.load(open(sys.argv[2]))
assert len(rows) == 400 and {r["state"] for r in rows} == {"COMPLETED"}
for k in ("submit_s", "start_s", "end_s", "wait_s", "gpus", "nodes", "restarts", "preemptions"): assert k in rows[0], k
for r in rows:
    s, b, e = float(r["submit_s"]), float(r["start_s"]), float(r["end_s"])
    assert s <= b <= e and abs(float(r["wait_s"]) - (b - s)) < 3e-3 and int(r["nodes"]) >= 1, r
    assert int(r["nodes"]) <= int(r["tasks"]) and float(r["gpus"]) > 0
assert abs(max(float(r["wait_s"]) for r in rows) - m["max_queue_s"]) < 1e-2, m["max_queue_s"]
assert sum(int(r["restarts"]) for r in rows) >= m["failure_requeues"]
PY
then pass sched_cli_jobs_out; else fail sched_cli_jobs_out; cat "$tmp/err"; fi

# invalid values are refused (with the accepted range or form), not replaced by defaults
bad() { # NAME NEEDLE ARGS...
    local name=$1 needle=$2; shift 2
    if ! $M "$@" >/dev/null 2>"$tmp/err" && [ "$(grep -c '^myriad: ' "$tmp/err")" = 1 ] && grep -qF -- "$needle" "$tmp/err"
    then pass "$name"; else fail "$name"; cat "$tmp/err"; fi
}
bad sched_cli_load_negative "--load -1 is out of range" sched simulate --synthetic --gpus 64 --jobs 10 --load -1 --policy fifo
bad sched_cli_load_zero "--load 0 is out of range" sched simulate --synthetic --gpus 64 --jobs 10 --load 0 --policy fifo
for spec in gen:4 gen:x8 gen:4x8x gen:0x8 gen:-2x8 gen:4x0 gen:99999999999x8; do
    bad "sched_cli_cluster_${spec//[:-]/_}" "expected gen:NODESxGPUS" sched simulate --cluster $spec --synthetic --jobs 10 --policy fifo
done
bad sched_cli_gpus_ignored "--gpus N or --cluster C, not both" sched simulate --synthetic --gpus 64 --cluster gen:8x8 --policy fifo
bad sched_cli_jobs_out_unwritable "--jobs-out /nonexistent/j.csv" sched simulate --synthetic --gpus 64 --jobs 10 --policy fifo --jobs-out /nonexistent/j.csv

# sched place without output files prints the summary, as its help says
if $M sched place --cluster gen:4x8 --tp 2 --pp 2 >"$tmp/o" 2>"$tmp/err" && grep -q "^placed 4 GPUs (tp 2 x pp 2 x dp 1) on 1 node" "$tmp/o"
then pass sched_cli_place_summary; else fail sched_cli_place_summary; cat "$tmp/o" "$tmp/err"; fi

O=../shared/traces/openb
if [ -r "$O/openb_pod_list_gpushare20.csv" ]; then
    args="--cluster $O/openb_node_list_gpu_node.csv --trace $O/openb_pod_list_gpushare20.csv --load 0.9"
    # 1,500 pods ask for ~1,260 GPUs even all at once: 0.9 of 6,212 is out of reach, said so, exit 1
    if ! $M sched simulate $args --resample 1500 --policy fifo >/dev/null 2>"$tmp/err" && grep -q "out of reach" "$tmp/err" &&
       grep -q "resample" "$tmp/err"; then
        pass sched_cli_openb_load_out_of_reach; else fail sched_cli_openb_load_out_of_reach; cat "$tmp/err"; fi
    # 20,000 pods: every pod finishes; arrivals span a real window (the old load definition packed them
    # into ~100-500 s, under one median pod); FGD placement in best fragments less than FIFO's first fit
    if $M sched simulate $args --resample 20000 --policy fifo --json >"$tmp/f" 2>"$tmp/err" &&
       $M sched simulate $args --resample 20000 --policy best --json >"$tmp/b" 2>>"$tmp/err" &&
       /usr/bin/python3 - "$tmp/f" "$tmp/b" <<'PY'
import json, sys
f, b = (json.load(open(p)) for p in sys.argv[1:3])
for m in (f, b):
    assert m["jobs_finished"] == 20000, m["jobs_finished"]
    assert m["window_s"] > 1000, m["window_s"]
    assert 0 < m["gpu_alloc_rate"] <= 1 and m["gpu_alloc_makespan"] < m["gpu_alloc_rate"]
assert b["fragmentation"] < f["fragmentation"], (b["fragmentation"], f["fragmentation"])
PY
    then pass sched_cli_openb; else fail sched_cli_openb; cat "$tmp/err"; fi
else
    echo "skip sched_cli_openb (../shared/traces/openb not present)"
fi
