#!/usr/bin/env python3
"""own_runs_median.py FILE WIDTH: the median predicted/measured step ratio per layout of an
own-runs bench (bench/sim_own_runs.sh, bench/sim_cp_own_runs.sh); FILE holds "name measured
predicted" lines, one per round; WIDTH pads the layout names."""
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    n, m, p = line.split()
    rows.setdefault(n, []).append(float(p) / float(m))
w = int(sys.argv[2])
for n, r in rows.items():
    med = statistics.median(r)
    print("%-*s %6.3f  (%+.1f%%, %d rounds: %s)" % (w, n, med, 100 * (med - 1), len(r), " ".join("%.3f" % x for x in r)))
