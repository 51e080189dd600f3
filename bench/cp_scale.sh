#!/usr/bin/env bash
# bench/cp_scale.sh: context parallelism (#27) on this machine: for each --seq, cp 1, 2 and 4 of a
# small Llama (GQA 4/2, 2 layers, hidden 128), one sequence per step. For each: the median step
# time of the steps after the first (wall, the log's "ms"), the measured peak device allocations
# per rank (the log's "mem_peak_gib", kernels_memory_usage, rank 0), the same less the planned
# parameters, gradients and AdamW state (what the activations took at the peak), and the planned
# activations per rank, and both against cp 1 in the same run. cp 1 runs the backend's reference
# attention, which keeps the B x H x T x T probabilities for backward; the ring keeps only a
# log-sum-exp per row, so the ratio at cp > 1 is far below 1/cp (see docs/PARALLEL.md). The row
# "1 ring" is cp 1 through the ring's blockwise kernels (a ring of one: --doc-mask with a token the
# data never holds, so each sequence is one document and the mask plain causal), the baseline
# where only the 1/cp split differs. Rows that do not fit the memory left on the machine are said so.
# Usage: bash bench/cp_scale.sh [SEQS] [STEPS]   (defaults "4096 8192 16384", 3); results: bench/cp_results.md
set -uo pipefail
cd "$(dirname "$0")/.."
seqs=${1:-4096 8192 16384}
steps=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
W=$(mktemp -d /tmp/myriad-cpscale-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" 200000 67 3 # tokens 0..66; the model has 68
maxseq=0; for s in $seqs; do [ "$s" -gt "$maxseq" ] && maxseq=$s; done
shape="--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 --vocab 68 --max-seq $maxseq"
echo "llama 2 layers hidden 128 GQA 4/2, batch 1, $steps steps, --threads 1 per rank, $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null), $(date -u +%F), load at start $(cut -d" " -f1-3 /proc/loadavg)"
echo
echo "| seq | cp | step s (median after the first) | step / cp 1 | peak device MiB per rank | measured activations MiB (peak - parameters, gradients, AdamW) | / cp 1 | / 1 ring | planned activations MiB | planned / cp 1 | load (1 min) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
r() { /usr/bin/python3 -c "print(f'{$1/$2:.3f}')"; }
for seq in $seqs; do
    base_t="" base_m="" base_a="" ring_m=""
    for cp in 1 1r 2 4; do
        n=${cp%r}
        cmd=(bin/myriad train)
        [ "$n" -gt 1 ] && cmd=(mpirun --oversubscribe --bind-to none --mca btl self,vader -np "$n" bin/myriad train --cp "$n")
        [ "$cp" = 1r ] && cmd+=(--doc-mask 67)
        label=$cp; [ "$cp" = 1r ] && label="1 ring"
        rm -f "$W/log.jsonl"
        if ! "${cmd[@]}" $shape --data "$W/tok.bin" --batch 1 --seq "$seq" --steps "$steps" --threads 1 \
                --log "$W/log.jsonl" >"$W/out" 2>"$W/err"; then
            echo "| $seq | $label | failed: $(grep myriad: "$W/err" | head -1 | head -c 160) | | | | | | | | |"
            continue
        fi
        load=$(cut -d' ' -f1 /proc/loadavg)
        read -r t p m a < <(/usr/bin/python3 - "$W/err" "$W/log.jsonl" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
ms = [r["ms"] for r in rows]
peak = max(r["mem_peak_gib"] for r in rows) * 1024
plan = open(sys.argv[1]).read()
acts = float(re.search(r"activations ([0-9.]+)", plan).group(1))
state = sum(float(re.search(k + r" ([0-9.]+)", plan).group(1)) for k in ("parameters", "gradients", "AdamW"))
print(f"{statistics.median(ms[1:] or ms) / 1000:.2f} {peak:.1f} {peak - state:.1f} {acts:.1f}")
PY
)
        [ "$cp" = 1 ] && base_t=$t base_m=$m base_a=$a
        [ "$cp" = 1r ] && ring_m=$m
        rt=""; rm=""; ra=""; rr=""
        [ -n "$base_t" ] && rt=$(r $t $base_t) rm=$(r $m $base_m) ra=$(r $a $base_a)
        [ -n "$ring_m" ] && rr=$(r $m $ring_m)
        echo "| $seq | $label | $t | $rt | $p | $m | $rm | $rr | $a | $ra | $load |"
    done
done
