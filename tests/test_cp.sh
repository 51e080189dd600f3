#!/usr/bin/env bash
# test_cp.sh: context parallelism (--cp: ring attention over load-balanced chunks) alone and with
# tensor (+ sequence), pipeline (+ interleaved), data parallelism with ZeRO 1 and 3, and
# recomputation, against the single-process run on the same global batch: per-step losses,
# gradient norms and saved weights within compare_runs.py's tolerances (those of test_tp/test_dp),
# for GPT-2 and Llama with GQA; checkpoints resumed across a change of cp; packed documents
# (--doc-mask) against PyTorch with an explicit block-diagonal mask, in one process and at cp 2;
# mixture-of-experts models at cp 2 (x ep 2, x dp 2) with the single process's routing; bad
# layouts refused with one line.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch cp
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_cp (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3

check() { # FAMILY NP FLAGS...
    local fam=$1 np=$2
    shift 2
    layout_check "np${np}_$(echo "$*" | tr -d ' -')_$fam" "$np" "$@"
}
reference() {
    rm -rf "$T/ref" "$T/ref.jsonl"
    $M train $common --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>"$T/err" || fail "reference_$1"
}
# make test runs every layout on GPT-2 and the GQA-sensitive ones on Llama; CP_LONG=1 (make
# test-long) runs every layout on both
for fam in gpt2-tiny llama-tiny; do # llama-tiny: 4 heads over 2 kv heads (GQA)
    common="--init tests/fixtures/$fam --data $T/tok.bin --batch 8 --seq 16 --steps 12 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
    all=$([ "$fam" = gpt2-tiny ] || [ "${CP_LONG:-0}" = 1 ] && echo 1 || echo 0)
    reference $fam
    check $fam 2 --cp 2
    check $fam 4 --cp 4
    [ "$all" = 1 ] && check $fam 4 --cp 2 --tp 2
    check $fam 4 --cp 2 --tp 2 --sp
    [ "$all" = 1 ] && check $fam 4 --cp 2 --pp 2
    [ "$all" = 1 ] && check $fam 4 --cp 2 --dp 2 --zero 1
    check $fam 4 --cp 2 --dp 2 --zero 3 --micro-batch 2
    [ "$all" = 1 ] && check $fam 2 --cp 2 --recompute full
done
# Llama, GQA 8 heads over 2 kv heads, 4 layers from the seed: interleaved pipeline and selective recompute
common="--arch llama --layers 4 --hidden 64 --heads 8 --kv-heads 2 --ffn 96 --vocab 67 --max-seq 32 --data $T/tok.bin --batch 8 --seq 32 --steps 8 --lr 1e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
reference llama-gqa8x2
check llama-gqa8x2 4 --cp 2 --pp 2 --vpp 2 --micro-batch 1
check llama-gqa8x2 2 --cp 2 --recompute selective
check llama-gqa8x2 4 --cp 4

base="--data $T/tok.bin --batch 8 --steps 2"
expect_one_rank_error seq_not_divisible "--cp 2 needs --seq divisible by 2 x cp = 4" $MPI -np 2 $M train --init tests/fixtures/gpt2-tiny $base --seq 6 --cp 2
expect_one_rank_error cp_not_dividing_world "x --cp 2 = 2 does not divide the world size 3" $MPI -np 3 $M train --init tests/fixtures/gpt2-tiny $base --seq 8 --cp 2
expect_one_rank_error cp_bf16_refused "no blockwise (ring) attention kernels yet" $MPI -np 2 $M train --init tests/fixtures/gpt2-tiny $base --seq 8 --cp 2 --dtype bf16
expect_one_rank_error cp_moe_sp_refused "--sp with --experts is not supported" $MPI -np 4 $M train --init tests/fixtures/moe-top2-dropless $base --seq 8 --cp 2 --tp 2 --sp

# mixture of experts under context parallelism: the routing, the capacity drops and the
# load-balancing loss are the whole sequence's (the cp ranks gather its choices and router sums),
# so cp 2, cp 2 x ep 2 and cp 2 x ep 2 x dp 2 train like one process (compare_runs.py's
# tolerances) and assign every token of every layer to the same expert, kept or dropped, as the
# single process (test_moe.sh's routing dump: layer, sequence, global position, slot, expert,
# kept). The fixtures drop tokens (capacity factor 1) and weigh the aux loss 0.05.
same_routing() { sort "$1".* >"$T/r1"; sort "$2".* >"$T/r2"; [ -s "$T/r1" ] && cmp -s "$T/r1" "$T/r2"; }
moe_layouts() { # FIXTURE LAYOUT...
    local fx=$1; shift
    common="--init tests/fixtures/$fx --data $T/tok.bin --batch 8 --seq 16 --steps 12 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
    rm -rf "$T/ref" "$T/ref.jsonl" "$T/rref".*
    $M train $common --log "$T/ref.jsonl" --save "$T/ref" --moe-routing "$T/rref" >/dev/null 2>"$T/err" ||
        { fail "reference_$fx" "$(grep myriad: $T/err | head -2)"; return; }
    for layout in "$@"; do
        local np=${layout%% *} flags=${layout#* }
        local name="np${np}_$(echo "$flags" | tr -d ' -')_$fx"
        rm -f "$T/rrun".*
        layout_check "$name" "$np" $flags --moe-routing "$T/rrun"
        if same_routing "$T/rref" "$T/rrun"; then pass "routing_$name"
        else fail "routing_$name" "$(diff $T/r1 $T/r2 | head -3)"; fi
    done
}
moe_layouts moe-top1-capacity "2 --cp 2" "4 --cp 2 --ep 2" "8 --cp 2 --ep 2 --dp 2 --zero 1"
moe_layouts moe-top2-capacity-shared "4 --cp 2 --ep 2" "4 --cp 2 --ep 2 --micro-batch 2 --recompute full"

# checkpoints across a change of cp: saved at cp 2 x dp 2 (ZeRO 1) at step 6, resumed at cp 1 (one
# process), at cp 4 and at cp 2 x tp 2: the continued losses equal the uninterrupted run's (1e-4)
common="--init tests/fixtures/llama-tiny --data $T/tok.bin --batch 8 --seq 16 --steps 12 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1"
reference resume
$MPI -np 4 $M train $common --cp 2 --dp 2 --zero 1 --save "$T/ck" --save-every 6 --stop-after 6 --sync-save >/dev/null 2>"$T/err" ||
    fail "save_cp2_dp2" "$(grep myriad: $T/err | head -2)"
resume_at() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    local run="$MPI -np $np"; [ "$np" = 1 ] && run=""
    if $run $M train $common "$@" --resume "$T/ck" --log "$T/rs.jsonl" >/dev/null 2>"$T/err" &&
        /usr/bin/python3 - "$T/ref.jsonl" "$T/rs.jsonl" <<'PY'
import json, sys
ref = {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(sys.argv[1])}
run = [json.loads(l) for l in open(sys.argv[2])]
assert [r["step"] for r in run] == list(range(7, 13)), [r["step"] for r in run]
worst = max(abs(r["loss"] - ref[r["step"]]) / ref[r["step"]] for r in run)
print(f"# continued losses worst rel {worst:.2e}")
assert worst < 1e-4, worst
PY
    then pass "resume_cp2_at_$name"; else fail "resume_cp2_at_$name" "$(grep myriad: $T/err | head -2)"; fi
}
resume_at cp1 1
resume_at cp4 4 --cp 4
resume_at cp2_tp2 4 --cp 2 --tp 2

# packed documents (--doc-mask 60: a document starts at each token 60) against PyTorch with an
# explicit block-diagonal causal mask and restarted positions: the step-1 loss and one AdamW step
# with eps 1 (the update carries the gradient's size), in one process and at cp 2 (the masks
# follow the chunks around the ring)
dm="--init tests/fixtures/llama-tiny --data $T/tok.bin --batch 8 --seq 16 --steps 1 --lr 0.05 --no-shuffle --clip 0 --weight-decay 0 --eps 1 --doc-mask 60 --threads 1"
doc_mask() { # NAME NP FLAGS...
    local name=$1 np=$2; shift 2
    local run="$MPI -np $np"; [ "$np" = 1 ] && run=""
    rm -rf "$T/dm" "$T/dm.jsonl"
    if $run $M train $dm "$@" --log "$T/dm.jsonl" --save "$T/dm" >/dev/null 2>"$T/err" &&
        out=$(/usr/bin/python3 tests/py/doc_mask_oracle.py tests/fixtures/llama-tiny "$T/tok.bin" 8 16 60 0.05 "$T/dm.jsonl" "$T/dm"); then
        pass "doc_mask_torch_$name"; echo "# doc_mask_$name: $out"
    else fail "doc_mask_torch_$name" "${out:-} $(grep myriad: $T/err | head -2)"; fi
}
doc_mask one_process 1
doc_mask cp2 2 --cp 2
doc_mask cp2_tp2_sp 4 --cp 2 --tp 2 --sp
# GPT-2 (restarted rows of the position table) and longer runs: cp 2 and cp 4 like one process
for fam in gpt2-tiny llama-tiny; do
    common="--init tests/fixtures/$fam --data $T/tok.bin --batch 8 --seq 16 --steps 8 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1 --doc-mask 60"
    reference doc_mask_$fam
    check $fam 2 --cp 2
    check $fam 4 --cp 4
done
expect_one_rank_error doc_mask_pp_refused "--doc-mask with --pp is not supported yet" $MPI -np 2 $M train --init tests/fixtures/gpt2-tiny $base --seq 8 --pp 2 --doc-mask 60
expect_one_rank_error doc_mask_not_a_token "--doc-mask 99 is not a token of the vocabulary (0..66)" $M train --init tests/fixtures/gpt2-tiny $base --seq 8 --doc-mask 99
