#!/usr/bin/env bash
# Training-step benchmark (issue 2, acceptance 7 and 8): the gpt2-124m shape, B=4, T=256,
# fp32, AdamW, on THREADS threads (default 2). Reports myriad's tokens/s, its ratio to PyTorch
# CPU on the same shape and threads measured in the same run, the fraction of this machine's
# sgemm rate (measured by myriad at start-up) that the whole step reaches (MFU), and peak
# memory against the analytic sum. Runs with OPENBLAS_CORETYPE as set, then unset.
# Usage: bash bench/train_step.sh [STEPS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6} threads=${2:-2}
W=$(mktemp -d /tmp/myriad-bench-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tokens.bin" $(( (steps + 2) * 4 * 256 + 1 )) 50257
have_torch=0; /usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
run_one() { # LABEL
    local label=$1
    bin/myriad train --preset gpt2-124m --data "$W/tokens.bin" --batch 4 --seq 256 --steps $((steps + 1)) \
        --threads $threads --no-shuffle --log "$W/log.jsonl" >"$W/out" 2>"$W/err"
    local ours peak mem
    ours=$(/usr/bin/python3 -c "
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])][1:]   # step 0 is warm-up
ms=sum(r['ms'] for r in rows); print(4*256*len(rows)/(ms/1e3), sum(r['mfu'] for r in rows)/len(rows))" "$W/log.jsonl")
    peak=$(grep -o 'peak [0-9.]* GFLOP/s' "$W/err")
    mem=$(grep '^memory:' "$W/out")
    local tps=${ours% *} mfu=${ours#* }
    local torch_tps="n/a" ratio="n/a"
    if [ $have_torch = 1 ]; then
        torch_tps=$(/usr/bin/python3 bench/torch_gpt2_step.py 12 768 12 50257 1024 4 256 $steps $threads |
            /usr/bin/python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['tokens_per_s'])")
        ratio=$(/usr/bin/python3 -c "print('%.2f' % ($tps / $torch_tps))")
    fi
    printf '%-28s myriad %8.1f tok/s | PyTorch %8s tok/s | ratio %5sx | step at %.1f%% of sgemm (%s)\n' \
        "$label" "$tps" "$torch_tps" "$ratio" "$(/usr/bin/python3 -c "print($mfu*100)")" "$peak"
    echo "    $mem"
}
echo "gpt2-124m shape, B=4 T=256, fp32 AdamW, $threads threads, $steps timed steps after one warm-up ($(date -u +%F))"
run_one "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then (unset OPENBLAS_CORETYPE; run_one "OPENBLAS_CORETYPE unset"); fi
