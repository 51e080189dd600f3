#!/usr/bin/env bash
# test_vocab_pad.sh: a padded vocabulary (--vocab-pad, docs/TRAINING.md) changes no number. Tiny
# GPT-2 (tied embedding) and Llama, vocab 67 padded to 128 rows (64 per tp rank at --tp 2), train
# as the same run unpadded does, in one process and at tp 2, dp 2 with ZeRO 3, pp 2 (the tied
# embedding on both ends) and tp 2 x dp 2 with sp: every step's loss, gradient norm and validation
# loss equal, the exports the same bytes, with 67 rows (tests/py/vocab_pad_compare.py). The
# oracle is equality because the padding moves no token between ranks and adds only exact zeros
# (docs/TRAINING.md). Also: a checkpoint
# saved padded resumes unpadded and the reverse, bit for bit; sampling (byte vocabulary 256 in
# 288 rows) draws the same text; --vocab-pad 0 is refused in one line.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch vocabpad
mpi_env
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
/usr/bin/python3 bench/make_tokens.py "$T/val.bin" 2000 67 4
have_mpi=1
command -v mpirun >/dev/null || have_mpi=0

# same NAME NP PAD FLAGS...: the run with --vocab-pad PAD against the same flags with --vocab-pad 1
same() {
    local name=$1 np=$2 pad=$3; shift 3
    local run="" out=""
    if [ "$np" -gt 1 ]; then
        [ $have_mpi = 1 ] || { echo "skip $name (mpirun not installed)"; return; }
        run="$MPI -np $np"
    fi
    if timeout 120 $run $M train "$@" $val --vocab-pad 1 --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>"$T/err" &&
        timeout 120 $run $M train "$@" $val --vocab-pad "$pad" --log "$T/run.jsonl" --save "$T/run" >/dev/null 2>"$T/err" &&
        grep -q "vocab 67 (padded: " "$T/err" &&
        out=$(/usr/bin/python3 tests/py/vocab_pad_compare.py "$T/ref.jsonl" "$T/run.jsonl" "$T/ref" "$T/run" 67 val); then
        pass "$name"; echo "# $name: $out"
    else fail "$name" "$out $(grep -m2 -e 'myriad:' -e 'padded' "$T/err")"; fi
    rm -rf "$T/ref" "$T/run" "$T/ref.jsonl" "$T/run.jsonl"
}

base="--data $T/tok.bin --batch 8 --seq 8 --steps 6 --lr 3e-3 --lr-schedule cosine --warmup 2 --clip 0.5 --threads 1"
val="--val-data $T/val.bin --eval-every 3 --eval-batches 2" # evaluation: the same loss through the forward alone
for fam in gpt2-tiny llama-tiny; do
    # --init: an unpadded Hugging Face checkpoint loads into the padded run
    same "single_$fam" 1 128 --init tests/fixtures/$fam $base
    same "tp2_$fam" 2 64 --init tests/fixtures/$fam $base --tp 2
done
# the OpenBLAS engine, which every CPU without AVX-512 runs (MYRIAD_GEMM=blas forces it here): its
# results depend on a GEMM's shape, so the LM head must multiply only the real rows
MYRIAD_GEMM=blas same blas_single_gpt2-tiny 1 128 --init tests/fixtures/gpt2-tiny $base
MYRIAD_GEMM=blas same blas_tp2_llama-tiny 2 64 --init tests/fixtures/llama-tiny $base --tp 2
same bf16_llama-tiny 1 128 --init tests/fixtures/llama-tiny $base --dtype bf16 # the CPU's bf16 emulation
same dp2_zero3_gpt2-tiny 2 128 --init tests/fixtures/gpt2-tiny $base --dp 2 --zero 3 --micro-batch 2
# from the seed (the padding rows draw no random numbers), the tied embedding split over stages
seed_gpt2="--arch gpt2 --layers 2 --hidden 32 --heads 4 --vocab 67 --max-seq 16"
same pp2_tied_seed_gpt2 2 128 $seed_gpt2 $base --pp 2 --micro-batch 2
same tp2_sp_dp2_zero1_seed_gpt2 4 64 $seed_gpt2 $base --tp 2 --sp --dp 2 --zero 1

# resume across a change of padding: checkpoints hold the real [67, C] tensors (never the padding),
# so a padded checkpoint continues unpadded, and the reverse, as the uninterrupted run
resume_case() { # NAME PAD-BEFORE PAD-AFTER
    local name=$1 before=$2 after=$3 common="--init tests/fixtures/gpt2-tiny $base --steps 10"
    $M train $common --vocab-pad 1 --save "$T/whole" --log "$T/whole.jsonl" >/dev/null 2>"$T/err"
    $M train $common --vocab-pad "$before" --save "$T/part" --save-every 5 --stop-after 5 --sync-save \
        --log "$T/p1.jsonl" >/dev/null 2>>"$T/err"
    $M train $common --vocab-pad "$after" --save "$T/part" --resume auto --log "$T/p2.jsonl" >/dev/null 2>>"$T/err"
    cat "$T/p1.jsonl" "$T/p2.jsonl" >"$T/parts.jsonl" 2>/dev/null
    local out=""
    # steps 1-5 before the stop, 6-10 after it: the second run resumed, it did not start over
    if [ "$(cat "$T/p1.jsonl" 2>/dev/null | wc -l)" = 5 ] && [ "$(cat "$T/p2.jsonl" 2>/dev/null | wc -l)" = 5 ] &&
        out=$(/usr/bin/python3 tests/py/vocab_pad_compare.py "$T/whole.jsonl" "$T/parts.jsonl" "$T/whole" "$T/part" 67)
    then pass "$name"; echo "# $name: $out"
    else fail "$name" "$out $(grep -m2 'myriad:' "$T/err")"; fi
    rm -rf "$T/whole" "$T/part" "$T"/*.jsonl
}
resume_case resume_padded_ckpt_unpadded 128 1
resume_case resume_unpadded_ckpt_padded 1 128

# sampling: the byte vocabulary (256, printed without a tokenizer) in rows of 288; the logits'
# row stride is the padded one, so reading rows vocab apart would draw other tokens
/usr/bin/python3 bench/make_tokens.py "$T/bytes.bin" 20000 256 5
sample="--arch gpt2 --layers 2 --hidden 32 --heads 4 --vocab 256 --max-seq 32 --data $T/bytes.bin --batch 4 --seq 32 --steps 3 --threads 1 --sample 48"
$M train $sample --vocab-pad 1 >"$T/s1" 2>"$T/err"
# host code reads the logits only through the copy functions, as on a GPU (MYRIAD_DEVICE_GUARD)
MYRIAD_DEVICE_GUARD=strict $M train $sample --vocab-pad 96 >"$T/s2" 2>>"$T/err"
sed -n '/^--- sample/,$p' "$T/s1" >"$T/t1"; sed -n '/^--- sample/,$p' "$T/s2" >"$T/t2" # (stdout also has RSS)
if [ -s "$T/t1" ] && grep -q "vocab 256 (padded: 288 rows" "$T/err" && cmp -s "$T/t1" "$T/t2"; then
    pass sample_same_text
else fail sample_same_text "$(head -c 200 "$T/s2") $(grep -m2 'myriad:' "$T/err")"; fi

expect_error vocab_pad_zero "--vocab-pad" $M train --init tests/fixtures/gpt2-tiny $base --vocab-pad 0
