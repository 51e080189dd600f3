#!/usr/bin/env bash
# sched_bench.sh: the scheduler results table (bench/sched_results.md). Runs the four built-in
# policies on openb (default, multi-GPU and GPU-sharing variants, 20,000 resampled pods at 0.9
# load inside the arrival window) and on a synthetic 10,240-GPU (1,280 x 8) trace of 100,000 jobs at
# 0.8 offered load, then tabulates the JSON metrics and the ratios against FIFO measured in the same
# run. Usage: bash bench/sched_bench.sh [OUT.md]   (needs ../shared/traces/openb for the openb rows)
set -eu
cd "$(dirname "$0")/.."
out=${1:-bench/sched_results.md}
M=bin/myriad
O=../shared/traces/openb
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
policies="fifo backfill gang-binpack-topo best"
runs=()
syn="--synthetic --gpus 10240 --jobs 100000 --load 0.8 --seed 1"
for p in $policies; do
    echo "synthetic $p" >&2
    $M sched simulate $syn --policy $p --json >>"$tmp/synthetic.jsonl"
done
runs+=("synthetic|$M sched simulate $syn --policy P --json")
if [ -r "$O/openb_pod_list_default.csv" ]; then
    for v in default multigpu40 gpushare60; do
        args="--cluster $O/openb_node_list_gpu_node.csv --trace $O/openb_pod_list_$v.csv --resample 20000 --load 0.9 --seed 1"
        for p in $policies; do
            echo "openb $v $p" >&2
            $M sched simulate $args --policy $p --json >>"$tmp/openb_$v.jsonl"
        done
        runs+=("openb_$v|$M sched simulate $args --policy P --json")
    done
else
    echo "../shared/traces/openb not present: openb rows skipped" >&2
fi
{
    echo "# Scheduler results"
    echo
    echo "Produced by \`bash bench/sched_bench.sh\` on $(date -u +%Y-%m-%d) ($(nproc) cores, $(uname -m)); commands, with P each of: $policies:"
    echo
    for r in "${runs[@]}"; do echo "- ${r%%|*}: \`${r#*|}\`"; done
    echo
    /usr/bin/python3 - "$tmp" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
def row(m):
    return ("| {policy} | {jobs_finished} | {avg_jct_s:.0f} | {p99_jct_s:.0f} | {avg_queue_s:.0f} | {makespan_s:.0f} | "
            "{alloc:.1f} | {frag:.2f} | {fgd:.2f} | {preemptions} | {gpu_hours_lost:.0f} | {tier:.2f} | {jain_jobs:.3f} | "
            "{decision_ms_p50:.3f} / {decision_ms_p99:.3f} | {sim_wall_s:.1f} |").format(
        alloc=100 * m["gpu_alloc_rate"], frag=100 * m["fragmentation"], fgd=100 * m["frag_fgd"],
        tier=m["mean_tier_multinode"], **m)
hdr = ("| policy | jobs done | avg JCT s | p99 JCT s | avg queue s | makespan s | GPU alloc % | fragmentation % | "
       "FGD frag % | preemptions | GPU-h lost | mean tier (multi-node) | Jain (jobs) | decision ms p50 / p99 | sim wall s |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for f in ["synthetic"] + sorted(os.path.basename(x)[:-6] for x in glob.glob(d + "/openb_*.jsonl")):
    p = os.path.join(d, f + ".jsonl")
    if not os.path.exists(p): continue
    ms = [json.loads(l) for l in open(p)]
    print("## " + f + "\n")
    print(ms[0]["workload"] + "\n")
    print(hdr)
    for m in ms: print(row(m))
    by = {m["policy"]: m for m in ms}
    fifo, best = by["fifo"], by["best"]
    print("\nbest vs fifo: avg JCT %+.1f %%, p99 JCT %+.1f %%, avg queue %+.1f %%, fragmentation %.2f %% vs %.2f %% (%s), "
          "FGD fragmentation %.2f %% vs %.2f %%\n" % (
          100 * (best["avg_jct_s"] / fifo["avg_jct_s"] - 1), 100 * (best["p99_jct_s"] / fifo["p99_jct_s"] - 1),
          100 * (best["avg_queue_s"] / fifo["avg_queue_s"] - 1) if fifo["avg_queue_s"] else 0,
          100 * best["fragmentation"], 100 * fifo["fragmentation"],
          "lower" if best["fragmentation"] < fifo["fragmentation"] else "NOT lower",
          100 * best["frag_fgd"], 100 * fifo["frag_fgd"]))
    cls = best["classes"]
    print("best, per size class: " + "; ".join("%s: %d jobs, avg JCT %.0f s, p99 JCT %.0f s, avg queue %.0f s" % (
        k, v["jobs"], v["avg_jct_s"], v["p99_jct_s"], v["avg_queue_s"]) for k, v in cls.items()) + "\n")
PY
    echo "Definitions: docs/SCHEDULER.md (fragmentation: idle GPU the head-of-queue job cannot use, share of all GPUs, time-averaged while a job waits; FGD frag: Weng et al.'s workload-expected measure). openb: Weng et al., USENIX ATC'23."
} >"$out"
echo "wrote $out" >&2
