#!/usr/bin/env bash
# bench/cp_scale.sh: context parallelism (#27) on this machine: for each --seq, cp 1, 2 and 4 of a
# small Llama (GQA 4/2, 2 layers, hidden 128), one sequence per step. For each: the median step
# time of the steps after the first (wall, the slowest rank's line), the measured peak device
# allocations per rank (the step line's "mem in-use/peak", kernels_memory_usage) and the planned
# activations per rank, and both against cp 1 in the same run. cp 1 runs the backend's reference
# attention, which keeps the B x H x T x T probabilities for backward; the ring keeps only a
# log-sum-exp per row, so the ratio at cp > 1 is far below 1/cp (see docs/PARALLEL.md).
# Usage: bash bench/cp_scale.sh [SEQS] [STEPS]   (defaults "4096 8192", 3); results: bench/cp_results.md
set -uo pipefail
cd "$(dirname "$0")/.."
seqs=${1:-4096 8192}
steps=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
W=$(mktemp -d /tmp/myriad-cpscale-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" 200000 67 3
maxseq=0; for s in $seqs; do [ "$s" -gt "$maxseq" ] && maxseq=$s; done
shape="--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 --vocab 67 --max-seq $maxseq"
echo "llama 2 layers hidden 128 GQA 4/2, batch 1, $steps steps, --threads 1 per rank, $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null), $(date -u +%F)"
echo
echo "| seq | cp | step s (median after the first) | step / cp 1 | peak device MiB per rank | peak / cp 1 | planned activations MiB | planned / cp 1 |"
echo "|---|---|---|---|---|---|---|---|"
for seq in $seqs; do
    base_t="" base_m="" base_a=""
    for cp in 1 2 4; do
        cmd=(bin/myriad train)
        [ "$cp" -gt 1 ] && cmd=(mpirun --oversubscribe --bind-to none --mca btl self,vader -np "$cp" bin/myriad train --cp "$cp")
        if ! "${cmd[@]}" $shape --data "$W/tok.bin" --batch 1 --seq "$seq" --steps "$steps" --threads 1 >"$W/out" 2>"$W/err"; then
            echo "| $seq | $cp | failed: $(grep myriad: "$W/err" | head -1 | head -c 100) | | | | | |"
            continue
        fi
        read -r t m a < <(/usr/bin/python3 - "$W/err" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
ms = [float(x) for x in re.findall(r"\| (\d+) ms \| ETA", text)]
mem = re.findall(r"mem [0-9.]+/([0-9.]+) (MiB|GiB)", text)
peak = max(float(v) * (1024 if u == "GiB" else 1) for v, u in mem)
acts = float(re.search(r"activations ([0-9.]+)", text).group(1))
print(f"{statistics.median(ms[1:] or ms) / 1000:.2f} {peak:.1f} {acts:.1f}")
PY
)
        [ -z "$base_t" ] && base_t=$t base_m=$m base_a=$a
        r() { /usr/bin/python3 -c "print(f'{$1/$2:.3f}')"; }
        echo "| $seq | $cp | $t | $(r $t $base_t) | $m | $(r $m $base_m) | $a | $(r $a $base_a) |"
    done
done
