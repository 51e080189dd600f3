#!/usr/bin/env bash
# test_dp.sh: data parallelism and ZeRO against the single-process run (the oracle): for tiny
# GPT-2 and Llama (GQA), --dp 4 with --zero 0..3 and --dp 2 with two micro-batches give the
# same per-step losses (1e-5 relative at step 1, 1e-4 over 20 steps) and saved weights (1e-4);
# per-rank memory follows the ZeRO formulas; bad layouts are refused before any work.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch dp
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_dp (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3

for fam in gpt2-tiny llama-tiny; do
    common="--init tests/fixtures/$fam --data $T/tok.bin --batch 8 --seq 8 --steps 20 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
    $M train $common --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>"$T/err" || { fail "reference_$fam" "$(tail -1 $T/err)"; continue; }
    for layout in "4 --zero 0" "4 --zero 1" "4 --zero 2" "4 --zero 3" "2 --micro-batch 2" "2 --micro-batch 2 --zero 3" "4 --zero 2 --no-overlap"; do
        np=${layout%% *}; flags=${layout#* }
        layout_check "dp${np}_$(echo "$flags" | tr -d ' -')_$fam" "$np" --dp "$np" $flags
    done
    # bf16 gradients are lossy by design: same run within bf16 rounding (1e-3 on the loss)
    if timeout 120 $MPI -np 4 $M train $common --zero 1 --grad-dtype bf16 --log "$T/bf.jsonl" >/dev/null 2>"$T/err" &&
        /usr/bin/python3 -c "
import json,sys
a=[json.loads(l)['loss'] for l in open('$T/ref.jsonl')]; b=[json.loads(l)['loss'] for l in open('$T/bf.jsonl')]
w=max(abs(x-y)/x for x,y in zip(a,b)); print('# bf16 worst rel loss %.2e' % w); sys.exit(0 if len(a)==len(b) and w<1e-3 else 1)"; then
        pass "dp4_bf16_gradients_$fam"
    else fail "dp4_bf16_gradients_$fam" "$(tail -2 $T/err)"; fi
done

# memory per rank follows the ZeRO formulas (5%) and peak RSS falls with the stage
/usr/bin/python3 bench/make_tokens.py "$T/tok50k.bin" 20000 50257 4
mem_common="--arch gpt2 --layers 4 --hidden 256 --heads 4 --vocab 50257 --max-seq 64 --data $T/tok50k.bin --batch 8 --seq 16 --steps 2 --threads 1"
# (RSS also holds transient buffers, so only stage 0 -> 1 and 0 -> 3 are required to fall)
ok=1
declare -A rss
for z in 0 1 2 3; do
    timeout 120 $MPI -np 4 $M train $mem_common --zero $z >"$T/mem$z" 2>"$T/err" || { ok=0; tail -2 "$T/err"; }
    read ratio r < <(awk '/^  +1 /{print $7, $10}' "$T/mem$z")
    rss[$z]=$r
    echo "# zero $z: rank 1 bytes / formula = $ratio, peak RSS $r MiB"
    /usr/bin/python3 -c "import sys; sys.exit(0 if abs(float('$ratio') - 1) <= 0.05 else 1)" || ok=0
done
/usr/bin/python3 -c "import sys; sys.exit(0 if ${rss[1]} < ${rss[0]} and ${rss[3]} < ${rss[0]} else 1)" || ok=0
[ $ok = 1 ] && pass "zero_memory_formulas_and_rss" || fail "zero_memory_formulas_and_rss" "$(cat $T/mem*)"

# bad layouts: one line, non-zero exit, before any training work
base="--init tests/fixtures/llama-tiny --data $T/tok.bin --seq 8 --steps 2"
expect_error dp_not_dividing_world "does not divide the world size" $MPI -np 4 $M train $base --batch 8 --dp 3
expect_error batch_not_divisible_by_dp "not divisible by --dp" $MPI -np 4 $M train $base --batch 6
expect_error batch_not_divisible_by_micro "micro-batch" $MPI -np 2 $M train $base --batch 8 --micro-batch 3
expect_error zero_out_of_range "--zero 4 is out of range" $M train $base --batch 8 --zero 4
expect_error dp_without_launcher "needs 2 processes" $M train $base --batch 8 --dp 2
# myriad run forwards to mpirun and gives the same losses
if $M run -n 2 -- train $base --batch 8 --log "$T/run2.jsonl" >/dev/null 2>"$T/err" &&
    $M train $base --batch 8 --log "$T/one.jsonl" >/dev/null 2>&1 &&
    /usr/bin/python3 tests/py/compare_runs.py "$T/one.jsonl" "$T/run2.jsonl" >/dev/null; then pass "myriad_run_dp2"
else fail "myriad_run_dp2" "$(tail -2 $T/err)"; fi
