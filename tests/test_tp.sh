#!/usr/bin/env bash
# test_tp.sh: tensor parallelism (alone and with data parallelism / ZeRO) against the
# single-process run: same per-step losses (1e-5 at step 1, 1e-4 over 20 steps) and saved
# weights (1e-4) for tiny GPT-2 and Llama (GQA); bad layouts refused with one line.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch tp
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_tp (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3

check() { # FAMILY NP FLAGS...
    local fam=$1 np=$2
    shift 2
    layout_check "np${np}_$(echo "$*" | tr -d ' -')_$fam" "$np" "$@"
}
for fam in gpt2-tiny llama-tiny; do
    common="--init tests/fixtures/$fam --data $T/tok.bin --batch 8 --seq 8 --steps 20 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
    $M train $common --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>"$T/err" || { fail "reference_$fam"; continue; }
    check $fam 2 --tp 2
    check $fam 4 --tp 2 --dp 2
    check $fam 4 --tp 2 --dp 2 --zero 1
    check $fam 4 --tp 2 --dp 2 --zero 3 --micro-batch 2
    check $fam 2 --tp 2 --sp
    check $fam 4 --tp 2 --sp --dp 2 --zero 1
    check $fam 2 --tp 2 --recompute selective
    check $fam 4 --tp 2 --sp --dp 2 --recompute full
done
common="--init tests/fixtures/gpt2-tiny --data $T/tok.bin --batch 8 --seq 8 --steps 20 --lr 3e-3 --threads 1"
$M train $common --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>&1
check gpt2-tiny 4 --tp 4
check gpt2-tiny 4 --tp 4 --sp
# Llama with GQA whose kv heads split four ways (8 heads, 4 kv heads), from the seed
common="--arch llama --layers 2 --hidden 64 --heads 8 --kv-heads 4 --ffn 96 --vocab 67 --data $T/tok.bin --batch 8 --seq 8 --steps 20 --lr 3e-3 --threads 1"
$M train $common --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>&1
check llama-gqa8x4 4 --tp 4
check llama-gqa8x4 4 --tp 4 --sp

base="--data $T/tok.bin --batch 8 --seq 8 --steps 2"
expect_one_rank_error kv_heads_not_divisible_by_tp "kv heads 2 are not divisible by --tp 4" $MPI -np 4 $M train --init tests/fixtures/llama-tiny $base --tp 4
expect_one_rank_error heads_not_divisible_by_tp "heads 4 are not divisible by --tp 3" $MPI -np 3 $M train --init tests/fixtures/gpt2-tiny $base --tp 3
expect_one_rank_error tp_not_dividing_world "--tp 2 does not divide the world size 3" $MPI -np 3 $M train --init tests/fixtures/gpt2-tiny $base --tp 2
expect_one_rank_error sp_without_tp "--sp splits the sequence" $M train --init tests/fixtures/gpt2-tiny $base --sp
expect_one_rank_error tp_times_dp_not_world "does not equal the world size 4" $MPI -np 4 $M train --init tests/fixtures/gpt2-tiny $base --tp 2 --dp 1
