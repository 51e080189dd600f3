#!/usr/bin/env bash
# test_pp.sh: pipeline parallelism (GPipe, 1F1B, interleaved 1F1B) alone and in the 4D mesh
# (tp x pp x dp with ZeRO, sequence parallelism, recomputation) against the single-process run:
# same per-step losses (1e-5 at step 1, 1e-4 over 20 steps) and saved weights (1e-4), for GPT-2
# and Llama (GQA). Also: live activation sets counted by the allocator (GPipe m, 1F1B <= p),
# the Chrome trace of a step, and bad layouts refused with one line.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch pp
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_pp (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3

check() { LAYOUT_TIMEOUT=180 layout_check "$@"; } # NAME NP FLAGS...
for fam in gpt2 llama; do
    if [ $fam = gpt2 ]; then shape="--arch gpt2 --layers 4 --hidden 32 --heads 4 --ffn 64"
    else shape="--arch llama --layers 4 --hidden 32 --heads 4 --kv-heads 2 --ffn 48"; fi
    common="$shape --vocab 67 --max-seq 16 --data $T/tok.bin --batch 8 --seq 8 --micro-batch 1 --steps 20 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
    $M train $common --log "$T/ref.jsonl" --save "$T/ref" >/dev/null 2>"$T/err" || { fail "reference_$fam"; continue; }
    check "pp2_gpipe_$fam" 2 --pp 2 --schedule gpipe
    grep -q "live activation sets on chunk 0 per stage: 8 " "$T/out" && pass "gpipe_keeps_m_activations_$fam" ||
        fail "gpipe_keeps_m_activations_$fam" "$(grep pipeline: $T/out)"
    check "pp4_1f1b_$fam" 4 --pp 4 --schedule 1f1b
    if /usr/bin/python3 -c "
import re,sys; l=open('$T/out').read(); m=re.search(r'live activation sets on chunk 0 per stage: ([0-9 ]+)', l)
s=[int(v) for v in m.group(1).split()]; print('# 1f1b live per stage', s); sys.exit(0 if len(s)==4 and s[0]<=4 and max(s)<=4 else 1)"
    then pass "1f1b_keeps_at_most_p_activations_$fam"; else fail "1f1b_keeps_at_most_p_activations_$fam"; fi
    check "pp2_vpp2_interleaved_$fam" 2 --pp 2 --vpp 2 --schedule interleaved
    check "tp2_pp2_dp2_$fam" 8 --tp 2 --pp 2 --dp 2
    check "tp2_sp_pp2_dp2_zero1_$fam" 8 --tp 2 --sp --pp 2 --dp 2 --zero 1
    check "tp2_pp2_recompute_selective_$fam" 4 --tp 2 --pp 2 --recompute selective
    check "tp2_pp2_recompute_full_$fam" 4 --tp 2 --pp 2 --recompute full
done

# the trace of one step: one lane per rank, forward/backward per micro-batch and the transfers
if timeout 120 $MPI -np 2 $M train $common --pp 2 --steps 2 --trace "$T/trace.json" >"$T/out" 2>"$T/err" &&
    /usr/bin/python3 - "$T/trace.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
x = [e for e in ev if e.get("ph") == "X"]
for r in (0, 1):
    mine = [e for e in x if e["pid"] == r]
    f = sorted(e["args"]["mb"] for e in mine if e.get("cat") == "forward")
    b = sorted(e["args"]["mb"] for e in mine if e.get("cat") == "backward")
    assert f == list(range(8)) and b == list(range(8)), (r, f, b)
    assert any(e.get("cat") == "comm" for e in mine), r
    assert all(e["dur"] >= 0 for e in mine)
PY
then pass "trace_of_one_step"; else fail "trace_of_one_step" "$(tail -2 $T/err)"; fi
grep -q "pipeline: bubble measured per stage" "$T/out" && pass "bubble_is_reported" || fail "bubble_is_reported"

base="$shape --vocab 67 --max-seq 16 --data $T/tok.bin --batch 8 --seq 8 --steps 2"
expect_one_rank_error layers_not_divisible_by_pp_vpp "not divisible by pp 2 x vpp 2" $MPI -np 2 $M train ${base/--layers 4/--layers 6} --micro-batch 1 --pp 2 --vpp 2 --schedule interleaved
expect_one_rank_error vpp_without_interleaved "interleaved" $MPI -np 2 $M train $base --micro-batch 1 --pp 2 --vpp 2 --schedule 1f1b
expect_one_rank_error too_few_microbatches_for_1f1b "micro-batches" $MPI -np 4 $M train $base --micro-batch 4 --pp 4 --schedule 1f1b
expect_one_rank_error tp_pp_dp_not_world "does not equal the world size 8" $MPI -np 8 $M train $base --micro-batch 1 --tp 2 --pp 2 --dp 1
