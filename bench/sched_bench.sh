#!/usr/bin/env bash
# sched_bench.sh: the scheduler results table (bench/sched_results.md). Runs the four built-in
# policies on a synthetic 10,240-GPU (1,280 x 8) trace of 100,000 jobs at 0.8 offered load and on
# openb (default, multi-GPU and GPU-sharing variants, 20,000 resampled pods at 0.9 and 1.3 offered
# load), then FIFO against `best` over seeds 1-3 (synthetic and every openb case), and
# tabulates the JSON metrics with ratios against FIFO measured in the same run.
# Usage: bash bench/sched_bench.sh [OUT.md]   (needs ../shared/traces/openb for the openb rows)
set -eu
cd "$(dirname "$0")/.."
out=${1:-bench/sched_results.md}
M=bin/myriad
O=../shared/traces/openb
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
policies="fifo backfill gang-binpack-topo best"
runs=()
syn="--synthetic --gpus 10240 --jobs 100000 --load 0.8"
for p in $policies; do
    echo "synthetic $p" >&2
    $M sched simulate $syn --seed 1 --policy $p --json >>"$tmp/main_synthetic.jsonl"
done
runs+=("synthetic, P each of $policies, seed 1|$M sched simulate $syn --seed 1 --policy P --json")
for s in 1 2 3; do
    for p in fifo best; do
        [ "$s" = 1 ] && grep "\"policy\": \"$p\"" "$tmp/main_synthetic.jsonl" | sed "s/^{/{\"seed\": $s, \"load\": 0.8, /" >>"$tmp/seeds_synthetic.jsonl" && continue
        echo "synthetic seed $s $p" >&2
        $M sched simulate $syn --seed $s --policy $p --json | sed "s/^{/{\"seed\": $s, \"load\": 0.8, /" >>"$tmp/seeds_synthetic.jsonl"
    done
done
runs+=("synthetic, P each of fifo best, S each of 1 2 3|$M sched simulate $syn --seed S --policy P --json")
if [ -r "$O/openb_pod_list_default.csv" ]; then
    for v in default multigpu40 gpushare60; do
        base="--cluster $O/openb_node_list_gpu_node.csv --trace $O/openb_pod_list_$v.csv --resample 20000"
        for L in 0.9 1.3; do
            for p in $policies; do
                echo "openb $v load $L $p" >&2
                $M sched simulate $base --load $L --seed 1 --policy $p --json >>"$tmp/main_openb_${v}_load$L.jsonl"
            done
            for s in 1 2 3; do
                for p in fifo best; do
                    tag="s/^{/{\"seed\": $s, \"load\": $L, /"
                    if [ "$s" = 1 ]; then grep "\"policy\": \"$p\"" "$tmp/main_openb_${v}_load$L.jsonl" | sed "$tag" >>"$tmp/seeds_openb_$v.jsonl"; continue; fi
                    echo "openb $v load $L seed $s $p" >&2
                    $M sched simulate $base --load $L --seed $s --policy $p --json | sed "$tag" >>"$tmp/seeds_openb_$v.jsonl"
                done
            done
        done
    done
    runs+=("openb_V_loadL, V each of default multigpu40 gpushare60, L each of 0.9 1.3, P each of $policies|$M sched simulate --cluster $O/openb_node_list_gpu_node.csv --trace $O/openb_pod_list_V.csv --resample 20000 --load L --seed 1 --policy P --json")
    runs+=("openb over seeds, V and L as above, P each of fifo best, S each of 1 2 3|$M sched simulate --cluster $O/openb_node_list_gpu_node.csv --trace $O/openb_pod_list_V.csv --resample 20000 --load L --seed S --policy P --json")
else
    echo "../shared/traces/openb not present: openb rows skipped" >&2
fi
{
    echo "# Scheduler results"
    echo
    echo "Produced by \`bash bench/sched_bench.sh\` on $(date -u +%Y-%m-%d) ($(nproc) cores, $(uname -m)). Commands:"
    echo
    for r in "${runs[@]}"; do echo "- ${r%%|*}: \`${r#*|}\`"; done
    echo
    /usr/bin/python3 - "$tmp" <<'PY'
import json, sys, glob, os, statistics as st
d = sys.argv[1]
def row(m):
    return ("| {policy} | {jobs_finished} | {avg_jct_s:.0f} | {p99_jct_s:.0f} | {avg_queue_s:.0f} | {makespan_s:.0f} | {window_s:.0f} | "
            "{alloc:.1f} | {allocm:.1f} | {frag:.2f} | {head:.2f} | {wait:.1f} | {preemptions} | {gpu_hours_lost:.0f} | {tier:.2f} | "
            "{jain_jobs:.3f} | {decision_ms_p50:.3f} / {decision_ms_p99:.3f} | {sim_wall_s:.1f} |").format(
        alloc=100 * m["gpu_alloc_rate"], allocm=100 * m["gpu_alloc_makespan"], frag=100 * m["fragmentation"],
        head=100 * m["frag_head"], wait=100 * m["waiting_time_frac"], tier=m["mean_tier_multinode"], **m)
hdr = ("| policy | jobs done | avg JCT s | p99 JCT s | avg queue s | makespan s | window s | GPU alloc % (window) | "
       "GPU alloc % (makespan) | fragmentation % (FGD, window) | head-of-queue frag % (while waiting) | waiting % of window | "
       "preemptions | GPU-h lost | mean tier (multi-node) | Jain (jobs) | decision ms p50 / p99 | sim wall s |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
names = sorted((os.path.basename(x)[5:-6] for x in glob.glob(d + "/main_*.jsonl")), key=lambda n: (n != "synthetic", n))
for f in names:
    ms = [json.loads(l) for l in open(os.path.join(d, "main_" + f + ".jsonl"))]
    print("## " + f + " (seed 1)\n")
    print(ms[0]["workload"] + "\n")
    print(hdr)
    for m in ms: print(row(m))
    by = {m["policy"]: m for m in ms}
    fifo, best = by["fifo"], by["best"]
    print("\nbest vs fifo: avg JCT %+.1f %%, p99 JCT %+.1f %%, avg queue %+.1f %%, fragmentation %.2f %% vs %.2f %% (%s), "
          "GPU allocation %.1f %% vs %.1f %%\n" % (
          100 * (best["avg_jct_s"] / fifo["avg_jct_s"] - 1), 100 * (best["p99_jct_s"] / fifo["p99_jct_s"] - 1),
          100 * (best["avg_queue_s"] / fifo["avg_queue_s"] - 1) if fifo["avg_queue_s"] else 0,
          100 * best["fragmentation"], 100 * fifo["fragmentation"],
          "lower" if best["fragmentation"] < fifo["fragmentation"] else "NOT lower",
          100 * best["gpu_alloc_rate"], 100 * fifo["gpu_alloc_rate"]))
    cls = best["classes"]
    print("best, per size class: " + "; ".join("%s: %d jobs, JCT avg / p50 / p99 %.0f / %.0f / %.0f s, queue avg / p50 / p99 %.0f / %.0f / %.0f s" % (
        k, v["jobs"], v["avg_jct_s"], v["p50_jct_s"], v["p99_jct_s"], v["avg_queue_s"], v["p50_queue_s"], v["p99_queue_s"])
        for k, v in cls.items()) + "\n")
print("## FIFO against best over seeds\n")
print("| workload | load | seed | window s | avg JCT s fifo / best | JCT change | avg queue s fifo / best | "
      "GPU alloc % (window) fifo / best | fragmentation % fifo / best | best / fifo fragmentation | "
      "head-of-queue frag % fifo / best |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
summary = []
for p in sorted(glob.glob(d + "/seeds_*.jsonl"), key=lambda p: ("synthetic" not in p, p)):
    w = os.path.basename(p)[6:-6]
    ms = [json.loads(l) for l in open(p)]
    groups = {}
    for m in ms: groups.setdefault((m["load"], m["seed"]), {})[m["policy"]] = m
    for L in sorted(set(k[0] for k in groups)):
        jct, fr = [], []
        for s in sorted(k[1] for k in groups if k[0] == L):
            f, b = groups[(L, s)]["fifo"], groups[(L, s)]["best"]
            jct.append(b["avg_jct_s"] / f["avg_jct_s"] - 1)
            fr.append(b["fragmentation"] / f["fragmentation"] if f["fragmentation"] else float("nan"))
            print("| %s | %.1f | %d | %.0f | %.0f / %.0f | %+.1f %% | %.0f / %.0f | %.1f / %.1f | %.2f / %.2f | %.2f | %.2f / %.2f |" % (
                w, L, s, f["window_s"], f["avg_jct_s"], b["avg_jct_s"], 100 * jct[-1], f["avg_queue_s"], b["avg_queue_s"],
                100 * f["gpu_alloc_rate"], 100 * b["gpu_alloc_rate"], 100 * f["fragmentation"], 100 * b["fragmentation"], fr[-1],
                100 * f["frag_head"], 100 * b["frag_head"]))
        summary.append("%s at load %.1f: avg JCT change %+.1f %% (sd %.1f), fragmentation best/fifo %.2f (sd %.2f, max %.2f) over %d seeds" % (
            w, L, 100 * st.mean(jct), 100 * st.pstdev(jct), st.mean(fr), st.pstdev(fr), max(fr), len(fr)))
print()
for s in summary: print("- " + s)
print()
PY
    echo "Definitions: docs/SCHEDULER.md. Window: first to last arrival. Fragmentation (acceptance): FGD's workload-expected free GPU that a task drawn from the workload cannot use, summed over nodes, share of all GPUs, time-averaged over the window (Weng et al., USENIX ATC'23, the openb traces' source). Head-of-queue: idle GPU the first waiting job cannot use, averaged while a job waits."
} >"$out"
echo "wrote $out" >&2
