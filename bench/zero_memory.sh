#!/usr/bin/env bash
# ZeRO memory benchmark (issue 3, acceptance 3): per-rank bytes of parameters, gradients and
# optimizer state against the ZeRO formulas, and measured peak RSS per rank, for stages 0-3
# on 4 ranks with the gpt2-124m shape. Usage: bash bench/zero_memory.sh [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/myriad-zero-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" 20000 50257
echo "gpt2-124m shape, $n ranks, B=$n T=64, 2 steps, 1 thread per rank ($(date -u +%F))"
for z in 0 1 2 3; do
    bin/myriad run -n $n -- train --preset gpt2-124m --data "$W/tok.bin" --batch $n --seq 64 --steps 2 \
        --threads 1 --zero $z 2>/dev/null | sed -n '/^memory per rank/,/^communication/p' | grep -v '^communication'
done
