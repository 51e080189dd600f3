#!/usr/bin/env bash
# Data-parallel benchmark (issue 3, acceptance 5): DP=2 on the gpt2-124m shape, gradient
# reduction overlapped with backward vs reduced after backward. Reports step time, exposed
# (not hidden) communication per step and the fraction of communication hidden:
#   hidden = 1 - exposed(overlap on) / exposed(overlap off)
# (with overlap off every reduction is exposed, so its exposed time is the whole comm time).
# Usage: bash bench/dp_overlap.sh [STEPS] [B] [T]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4} B=${2:-4} T=${3:-128}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/myriad-dpbench-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" $(( (steps + 2) * B * T + 1 )) 50257
run() { # FLAGS...
    bin/myriad run -n 2 -- train --preset gpt2-124m --data "$W/tok.bin" --batch $B --seq $T --steps $steps \
        --threads 1 --no-shuffle "$@" 2>/dev/null | grep '^communication:'
}
echo "DP=2 (1 thread per rank), gpt2-124m shape, B=$B T=$T, fp32 gradients, 25 MiB buckets, $steps steps ($(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg))"
on=$(run) ; off=$(run --no-overlap)
echo "overlap on : $on"
echo "overlap off: $off"
/usr/bin/python3 - "$on" "$off" <<'PY'
import re, sys
def parse(s):
    m = re.search(r"exposed ([0-9.]+) ms of ([0-9.]+) ms", s); return float(m.group(1)), float(m.group(2))
(e_on, s_on), (e_off, s_off) = parse(sys.argv[1]), parse(sys.argv[2])
print(f"step time: {s_on:.0f} ms with overlap vs {s_off:.0f} ms without ({s_off / s_on:.2f}x)")
print(f"exposed communication: {e_on:.0f} ms vs {e_off:.0f} ms; fraction hidden {max(0.0, 1 - e_on / e_off):.1%}")
PY
