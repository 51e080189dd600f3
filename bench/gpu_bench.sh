#!/usr/bin/env bash
# gpu_bench.sh: the device benchmark of issue 13 (run by scripts/gpu_check.sh; results and method
# in bench/gpu_results.md). On one GPU, in one run, for each model:
#   myriad   bin/myriad train --device cuda --dtype bf16, AdamW, clipping, on random tokens;
#   PyTorch  bench/torch_gpu_step.py: the same model (scripts/make_torch_fixture.py's), bf16
#            autocast, SDPA flash attention, torch.compile, fused AdamW;
# WARMUP untimed steps, then STEPS timed ones: tokens/s, MFU (6 x matmul parameters + 6 L T C
# FLOPs per token, over PEAK_TFLOPS: the H200 SXM dense bf16 datasheet figure, 989.4), peak GPU
# memory, and the ratio myriad / PyTorch.
#   gpt2    gpt2-124m (Radford et al. 2019), B=16, T=1024
#   llama   TinyLlama-1.1B's shape (Zhang et al. 2024: 22 layers, 2048 hidden, 32 heads, 4 kv
#           heads, 5632 ffn, 32000 vocab), B=8, T=2048
# Prints one JSON line per run to stdout (and to RESULTS when given) and a table to stderr.
# Usage: bash bench/gpu_bench.sh [RESULTS.jsonl]
#   env: MODELS ("gpt2 llama"), STEPS (30), WARMUP (3), PEAK_TFLOPS (989.4), PY (python3 with
#        PyTorch), MYRIAD_PY (a python3 for json: default PY), REHEARSE=1 (no GPU: tiny shapes,
#        myriad on the CPU, PyTorch with --cpu-rehearse; the figures mean nothing),
#        TORCH_KEEP_LIBPATH=1 (PyTorch keeps LD_LIBRARY_PATH: the rehearsal hid the system libs)
set -u
cd "$(dirname "$0")/.."
results=${1:-/dev/null}
MODELS=${MODELS:-gpt2 llama} STEPS=${STEPS:-30} WARMUP=${WARMUP:-3} PEAK=${PEAK_TFLOPS:-989.4}
PY=${PY:-python3} MPY=${MYRIAD_PY:-$PY} REHEARSE=${REHEARSE:-0}
W=$(mktemp -d /tmp/myriad-gpubench-XXXXXX)
trap 'rm -rf "$W"' EXIT
dev=cuda torch_flag=
[ "$REHEARSE" = 1 ] && dev=cpu torch_flag=--cpu-rehearse

emit() { echo "$1"; echo "$1" >>"$results"; }

for model in $MODELS; do
    if [ "$model" = gpt2 ]; then
        B=16 T=1024 V=50257 shape="--preset gpt2-124m" targs="gpt2 12 768 12 50257"
        [ "$REHEARSE" = 1 ] && B=2 T=64 shape="--arch gpt2 --layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 50257 --max-seq 64" \
            targs="gpt2 2 64 4 50257"
    else
        B=8 T=2048 V=32000
        shape="--arch llama --layers 22 --hidden 2048 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000 --max-seq 2048"
        targs="llama 22 2048 32 4 5632 32000"
        [ "$REHEARSE" = 1 ] && B=2 T=64 \
            shape="--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 --vocab 32000 --max-seq 64" \
            targs="llama 2 128 4 2 256 32000"
    fi
    n=$(( (WARMUP + STEPS) * B * T + 1 ))
    $MPY bench/make_tokens.py "$W/tok.bin" $n $V
    # myriad: the log's rows after the warm-up
    t0=$(date +%s)
    bin/myriad train $shape --data "$W/tok.bin" --batch $B --seq $T --steps $((WARMUP + STEPS)) --no-shuffle \
        --device $dev --dtype bf16 --peak-tflops $PEAK --lr 3e-4 --log "$W/log.jsonl" --print-every 10 \
        >"$W/out" 2>"$W/err"
    rc=$?
    if [ $rc -eq 0 ]; then
        emit "$($MPY - "$W/log.jsonl" $WARMUP $B $T $model "$(head -1 "$W/err")" $(( $(date +%s) - t0 )) <<'EOF'
import json, sys
path, warm, B, T, model, first, wall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
rows = [json.loads(l) for l in open(path)][warm:]
s = sum(r["ms"] for r in rows) / 1e3
print(json.dumps({"framework": "myriad", "arch": model, "tokens_per_s": B * T * len(rows) / s,
                  "step_ms": round(1e3 * s / len(rows), 2), "mfu": sum(r["mfu"] for r in rows) / len(rows),
                  "peak_mem_gib": max(r.get("mem_peak_gib", 0) for r in rows), "steps": len(rows),
                  "last_loss": rows[-1]["loss"], "wall_s": int(wall), "device": first}))
EOF
)"
    else
        emit "{\"framework\": \"myriad\", \"arch\": \"$model\", \"error\": \"exit $rc\", \"stderr\": $($MPY -c 'import json,sys; print(json.dumps(sys.stdin.read()[-600:]))' <"$W/err")}"
    fi
    # PyTorch (its own libraries: none of the private prefix's, except in a rehearsal that hid the system's)
    t0=$(date +%s)
    unset_libs="-u LD_LIBRARY_PATH"
    [ "${TORCH_KEEP_LIBPATH:-0}" = 1 ] && unset_libs=
    out=$(env $unset_libs -u OPAL_PREFIX $PY bench/torch_gpu_step.py $targs $B $T $STEPS $WARMUP $PEAK $torch_flag 2>"$W/terr")
    rc=$?
    if [ $rc -eq 0 ] && [ -n "$out" ]; then
        emit "$(echo "$out" | $MPY -c "import json,sys; d=json.load(sys.stdin); d['wall_s']=$(( $(date +%s) - t0 )); print(json.dumps(d))")"
    else
        emit "{\"framework\": \"pytorch\", \"arch\": \"$model\", \"error\": \"exit $rc\", \"stderr\": $($MPY -c 'import json,sys; print(json.dumps(sys.stdin.read()[-600:]))' <"$W/terr")}"
    fi
done
