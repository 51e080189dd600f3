#!/usr/bin/env bash
# Training-step benchmark (issue 2, acceptance 7 and 8): the gpt2-124m shape, B=4, T=256,
# fp32, AdamW, on THREADS threads (default 2). For each OPENBLAS_CORETYPE setting (as set in the
# environment, then unset; when unset: unset, then SkylakeX on AVX-512 CPUs or Haswell; or the
# values listed in CORETYPES, "unset" meaning unset) it reports:
#   - myriad's and PyTorch CPU's tokens/s, measured in ROUNDS alternating rounds (myriad, then
#     PyTorch, same shape and threads), medians over rounds, and the median per-round ratio;
#   - the fraction of this machine's sgemm peak that the whole step reaches:
#     model FLOPs per token (model_flops_per_token in src/model/model.c: 6 x matmul parameters
#     + 6 L T C for causal attention) x tokens/s / peak, where peak is the best rate
#     `myriad bench sgemm` sees (myriad's gemm or BLAS, step shapes and squares), measured right
#     before and right after the rounds, the larger taken;
#   - the memory line of `myriad train` (peak RSS against the analytic sum).
# The machine may be shared: compare only figures from the same run, and note the load printed.
# Usage: bash bench/train_step.sh [STEPS] [THREADS] [ROUNDS]   (env CORETYPES="unset SkylakeX")
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3} threads=${2:-2} rounds=${3:-3}
W=$(mktemp -d /tmp/myriad-bench-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tokens.bin" $(( (steps + 2) * 4 * 256 + 1 )) 50257
have_torch=0; /usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
L=12 C=768 V=50257 T=256
flops_per_token=$(/usr/bin/python3 -c "
L,C,V,T=$L,$C,$V,$T
print(6*(L*(C*3*C + C*C + C*4*C + 4*C*C) + C*V) + 6*L*T*C)")

peak_now() { bin/myriad bench sgemm --threads $threads --reps 3 | tee -a "$W/sgemm.txt" | sed -n 's/^peak \([0-9.]*\) GFLOP\/s/\1/p'; }

myriad_tps() { # prints tokens/s over the steps after the first (warm-up)
    bin/myriad train --preset gpt2-124m --data "$W/tokens.bin" --batch 4 --seq $T --steps $((steps + 1)) \
        --threads $threads --no-shuffle --peak-tflops 1 --log "$W/log.jsonl" >"$W/out" 2>"$W/err"
    grep '^memory:' "$W/out" >"$W/mem"
    /usr/bin/python3 -c "
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])][1:]
print(4*$T*len(rows)/(sum(r['ms'] for r in rows)/1e3))" "$W/log.jsonl"
}

torch_tps() {
    /usr/bin/python3 bench/torch_gpt2_step.py $L $C 12 $V 1024 4 $T $steps $threads |
        /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tokens_per_s'])"
}

run_setting() { # LABEL (environment already arranged by the caller)
    local label=$1 ours=() theirs=() ratios=()
    local p0 p1
    p0=$(peak_now)
    for ((r = 0; r < rounds; r++)); do
        local a b="nan"
        a=$(myriad_tps)
        if [ $have_torch = 1 ]; then b=$(torch_tps); fi
        ours+=("$a"); theirs+=("$b")
        echo "    round $((r + 1)): myriad $a tok/s, PyTorch $b tok/s (load $(cut -d' ' -f1-3 /proc/loadavg))"
    done
    p1=$(peak_now)
    /usr/bin/python3 - "$label" "$p0" "$p1" "$flops_per_token" "$(cat "$W/mem")" "${ours[*]}" "${theirs[*]}" \
        "$(grep -o 'BLAS core: [A-Za-z0-9]*; myriad gemm: [A-Za-z0-9 -]*' "$W/sgemm.txt" | tail -1)" <<'EOF'
import math, statistics as st, sys
label, p0, p1, fpt, mem, ours, theirs, gemm = sys.argv[1:9]
ours = [float(x) for x in ours.split()]
theirs = [float(x) for x in theirs.split()]
peak = max(float(p0), float(p1))
mine = st.median(ours)
frac = float(fpt) * mine / (peak * 1e9)
have = not any(math.isnan(x) for x in theirs)
line = f"{label:<28} myriad {mine:8.1f} tok/s"
if have:
    ratio = st.median(a / b for a, b in zip(ours, theirs))
    line += f" | PyTorch {st.median(theirs):8.1f} tok/s | ratio {ratio:.2f}x"
else:
    line += " | PyTorch n/a"
line += f" | step at {100 * frac:.1f}% of sgemm peak {peak:.1f} GFLOP/s (before {float(p0):.1f}, after {float(p1):.1f})"
print(line)
print(f"    {gemm}; medians of {len(ours)} rounds; model FLOPs/token {float(fpt) / 1e6:.1f} M")
print(f"    {mem}")
EOF
}

echo "gpt2-124m shape, B=4 T=$T, fp32 AdamW, $threads threads, $steps timed steps after one warm-up, $rounds rounds" \
     "($(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg))"
if [ -n "${CORETYPES:-}" ]; then
    for ct in $CORETYPES; do
        if [ "$ct" = unset ]; then (unset OPENBLAS_CORETYPE; run_setting "OPENBLAS_CORETYPE unset")
        else (export OPENBLAS_CORETYPE=$ct; run_setting "OPENBLAS_CORETYPE=$ct"); fi
    done
elif [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    run_setting "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
    (unset OPENBLAS_CORETYPE; run_setting "OPENBLAS_CORETYPE unset")
else # unset here: also run with the OpenBLAS core that matches this CPU's vector width
    ct=Haswell; grep -qw avx512f /proc/cpuinfo && ct=SkylakeX
    run_setting "OPENBLAS_CORETYPE unset"
    (export OPENBLAS_CORETYPE=$ct; run_setting "OPENBLAS_CORETYPE=$ct")
fi
