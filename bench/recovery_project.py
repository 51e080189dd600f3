#!/usr/bin/env python3
"""recovery_project.py OUT RANKS...: from bench/recovery.sh's recovery events (OUT/recovery-N-MODE.jsonl),
the median of every phase at each rank count, how it grows with the rank count N, and a projection
to 10,000 ranks.

All ranks of this bench share one machine of C cores (os.cpu_count()), so a phase that is work each
rank does for itself takes longer with N only because the ranks share the cores: N/C ranks per core.
Those phases are projected per rank on a core of its own: the median of t(N) x C / max(N, C) over
the measured N (constant in N, as on a cluster with one rank per accelerator). They are setup,
restore and replay (building the model, reading its state back, the step computed again) and
teardown (the launcher's SIGKILL is one kill() per rank, microseconds each; what it waits for is
each killed process's exit, which every host does for its own ranks at once). The phases where
the launcher and MPI coordinate every rank (detection, launch, mpi_init, rejoin) are fitted as a
power law t = c N^k (k: the growth exponent, from the log-log slope of the medians, clipped to
[0, 1]: at worst linear in N) and extrapolated; with more ranks than cores they are inflated by
the sharing too, so their projection is an upper bound. Neither fit is validated beyond 8 ranks
here; the supervisor's own part at 10,000 ranks is measured by bench/supervisor_scale.sh
(bench/supervisor_results.md: 10,000 ranks connected 8.8 s after the start, a silent one declared
dead 10.06 s after its last step for a 10 s timeout)."""
import json
import math
import os
import statistics
import sys

LOCAL = {"setup", "restore", "replay", "teardown"}


def slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def main():
    out, ranks = sys.argv[1], [int(r) for r in sys.argv[2:]]
    cores = os.cpu_count() or 1
    for mode in ("memory", "disk"):
        med = {}
        for n in ranks:
            p = os.path.join(out, "recovery-%d-%s.jsonl" % (n, mode))
            if not os.path.exists(p):
                continue
            rec = [json.loads(l) for l in open(p) if l.strip()]
            rec = [r for r in rec if r.get("completed", True)]
            if rec:
                med[n] = {k: statistics.median(r["phases"][k] for r in rec) for k in rec[0]["phases"]}
                med[n]["total"] = statistics.median(r["total_s"] for r in rec)
        if len(med) < 2:
            continue
        ns = sorted(med)
        print("\n%s restore: median seconds per phase (%d cores); growth; projection to 10,000 ranks" % (mode, cores))
        print("%-11s" % "phase" + "".join("%9s" % ("N=%d" % n) for n in ns) + "%8s %-22s%10s" % ("k", "model", "N=10,000"))
        total = 0
        for ph in [p for p in med[ns[0]] if p != "total"]:
            ys = [med[n][ph] for n in ns]
            if ph in LOCAL:
                per_core = [y * cores / max(n, cores) for n, y in zip(ns, ys)]
                proj, k, how = statistics.median(per_core), None, "per rank on its core"
            elif all(y > 0 for y in ys):
                a, k = slope([math.log(n) for n in ns], [math.log(y) for y in ys])
                k = min(max(k, 0.0), 1.0)
                c = math.exp(statistics.mean(math.log(y) - k * math.log(n) for n, y in zip(ns, ys)))
                proj, how = c * 10000 ** k, "c N^k"
            else:
                proj, k, how = 0.0, None, "zero here"
            total += proj
            print("%-11s" % ph + "".join("%9.3f" % y for y in ys) + "%8s %-22s%10.2f" % ("-" if k is None else "%.2f" % k, how, proj))
        print("%-11s" % "total" + "".join("%9.3f" % med[n]["total"] for n in ns) + "%8s %-22s%10.2f" % ("", "sum of the phases", total))


if __name__ == "__main__":
    main()
