#!/usr/bin/env bash
# bench/sim_speed.sh: how fast the simulator answers (issue 6, acceptance 5; issue 17, acceptance 7). Prints wall time per
# run (best of N) for: one step of the 1T model on 3,072 GPUs (budget 0.1 s), one step of a
# 10,240-GPU layout (budget 1 s), `myriad plan` for GPT-3 175B on 1,024 GPUs (budget 30 s), and
# one step on 98,304 GPUs of a multi-plane and a rail-only fabric (budget 1 s), `plan` for
# Llama 3 405B on 16,384 GPUs (budget 30 s), and the ratio of each to `myriad sim --help` measured in the same run (process start-up baseline).
set -u
cd "$(dirname "$0")/.."
B=./bin/myriad
[ -x "$B" ] || { echo "build first: make -j2"; exit 1; }
best() { # best wall seconds of $1 runs of the rest (a failing command stops the benchmark)
    local n=$1; shift; local b=999
    "$@" >/dev/null 2>&1 || { echo "benchmark command failed: $*" >&2; exit 1; }
    for _ in $(seq "$n"); do
        local s=$(date +%s.%N); "$@" >/dev/null 2>&1; local e=$(date +%s.%N)
        b=$(python3 -c "print(min($b, $e - $s))")
    done
    echo "$b"
}
base=$(best 5 $B sim --help)
printf '%-52s %10s %8s %12s\n' case seconds budget "x baseline"
row() { printf '%-52s %10.4f %8s %12.1f\n' "$1" "$2" "$3" "$(python3 -c "print($2 / $base)")"; }
row "baseline: myriad sim --help (process start)" "$base" "-"
t=$(best 5 $B sim --model gpt-1t --gpus 3072 --tp 8 --pp 64 --global-batch 3072 --micro-batch 1 --recompute full)
row "1T model, 3,072 GPUs (tp8 pp64 dp6, 512 micro-batches)" "$t" "0.1"
t=$(best 5 $B sim --model gpt-1t --cluster h100-ib --gpus 10240 --tp 8 --pp 64 --vpp 2 --global-batch 10240 --micro-batch 1 --recompute full)
row "1T model, 10,240 GPUs (tp8 pp64 vpp2 dp20)" "$t" "1"
t=$(best 5 $B sim --model llama3-70b --cluster llama3-24k --gpus 10240 --tp 8 --pp 10 --vpp 4 --global-batch 2560 --micro-batch 1)
row "Llama 3 70B, 10,240 GPUs (tp8 pp10 vpp4 dp128)" "$t" "1"
t=$(best 1 $B plan --model gpt3-175b --gpus 1024 --tokens 300B --global-batch 1536)
row "plan GPT-3 175B on 1,024 GPUs" "$t" "30"
t=$(best 1 $B plan --model llama3-405b --cluster llama3-24k --gpus 16128 --tokens 15T --global-batch 2016)
row "plan Llama 3 405B on 16,128 GPUs" "$t" "-"
t=$(best 1 $B plan --model llama3-405b --cluster llama3-24k --gpus 16384 --tokens 15T --global-batch 2048 --tp 8)
row "plan Llama 3 405B on 16,384 GPUs, tp 8" "$t" "-"
t=$(best 1 $B plan --model llama3-405b --gpu h100-sxm --gpus 16384 --tokens 15T)
row "plan Llama 3 405B on 16,384 GPUs, every layout" "$t" "30"
# issue 29 item 6: 100,000-GPU clusters (98,304 = 12,288 nodes of 8), multi-plane and rail-only
for c in h800-multiplane h100-rail-only; do
    t=$(best 3 $B sim --model llama3-405b --cluster $c --gpu h100-sxm --gpus 98304 --tp 8 --pp 16 --vpp 4 --global-batch 12288 --micro-batch 1 --first-stage-layers 7 --last-stage-layers 7 --recompute full)
    row "405B, 98,304 GPUs $c (tp8 pp16 vpp4 dp768)" "$t" "1"
    t=$(best 3 $B sim --model deepseek-v3 --software deepseek --cluster $c --gpu h100-sxm --gpus 98304 --pp 16 --ep 64 --seq 4096 --global-batch 196608 --micro-batch 1 --dtype fp8 --first-stage-layers 3 --last-stage-layers 2)
    row "DeepSeek-V3, 98,304 GPUs $c (pp16 ep64 dp6144)" "$t" "1"
done
if [ -r ../shared/validation/published_a100.csv ]; then
    t=$(best 3 $B sim validate ../shared/validation/published_a100.csv)
    row "sim validate published_a100.csv (18 runs, searched)" "$t" "-"
    t=$(best 1 $B sim validate ../shared/validation/published_modern.csv)
    row "sim validate published_modern.csv (54 runs, searched)" "$t" "-"
fi
