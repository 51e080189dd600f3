#!/usr/bin/env bash
# Hybrid-parallel benchmark (issue 4, acceptance 5): step time and exposed communication per
# layout for the gpt2-124m shape on 4 ranks (tp 2 x dp 2, pp 2 x dp 2, tp 2 x pp 2), 1 thread
# per rank, and the Chrome trace of one step of the pipelined layout (bench/trace_tp2_pp2.json).
# Usage: bash bench/hybrid_layouts.sh [STEPS] [B] [T]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3} B=${2:-8} T=${3:-128}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/myriad-hybrid-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" $(( (steps + 2) * B * T + 1 )) 50257
echo "gpt2-124m shape, 4 ranks x 1 thread, B=$B T=$T, micro-batch 1, $steps steps ($(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-12s %12s %22s %s\n' layout "step (ms)" "exposed DP comm (ms)" "pipeline"
for layout in "--tp 2 --dp 2" "--pp 2 --dp 2" "--tp 2 --pp 2"; do
    extra=""; [ "$layout" = "--tp 2 --pp 2" ] && extra="--trace bench/trace_tp2_pp2.json"
    out=$(bin/myriad run -n 4 -- train --preset gpt2-124m --data "$W/tok.bin" --batch $B --seq $T --micro-batch 1 \
        --steps $steps --threads 1 --no-shuffle $layout $extra 2>/dev/null)
    comm=$(echo "$out" | grep '^communication:')
    pipe=$(echo "$out" | grep '^pipeline:' | sed 's/pipeline: //' || true)
    step=$(echo "$comm" | sed -E 's/.* of ([0-9.]+) ms per step.*/\1/')
    exposed=$(echo "$comm" | sed -E 's/communication: exposed ([0-9.]+) ms.*/\1/')
    printf '%-12s %12s %22s %s\n' "$(echo $layout | tr -d '-' | tr ' ' '_')" "$step" "$exposed" "${pipe:-}"
done
