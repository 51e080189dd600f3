#!/usr/bin/env bash
# test_moe.sh: mixture of experts and expert parallelism against the single-process run (the
# oracle). For the PyTorch-checked MoE fixtures (top-1 with capacity dropping; top-2 with
# capacity, a shared expert and a dense layer) every layout --ep 2, --ep 4, --ep 2 --dp 2
# (--zero 1), --ep 2 --tp 2, --ep 2 --pp 2 (micro-batches, full recomputation) gives the same
# per-step losses (1e-5 relative at step 1, 1e-4 over 20 steps) and saved weights (1e-4), and the
# same expert assignment (routing dump of step 1, every token of every layer: expert and
# kept/dropped); GELU experts (GPT-2) built from flags likewise (also --ep 2 --tp 2, and experts
# under --dp 2 --zero 3 without ep);
# a checkpoint written under --ep 2 --zero 1 resumes in a single process; the Mixtral export
# carries Mixtral's names and export -> import -> export is the identity (GPT-2 MoE too); bad
# input gets one line and a non-zero exit; a rank killed under `myriad run` (--ep 2 --dp 2
# --zero 1) recovers from the in-memory copies, bit-identical.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch moe
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_moe (mpirun not installed)"; exit 0; fi
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3 >/dev/null

# the routing dump: "layer sequence position slot expert kept", one file per rank; sorted and
# merged, every layout must give the single process's lines
same_routing() { sort "$1".* >"$T/r1"; sort "$2".* >"$T/r2"; [ -s "$T/r1" ] && cmp -s "$T/r1" "$T/r2"; }

check_layouts() { # NAME COMMON_FLAGS LAYOUT...
    local name=$1 common=$2; shift 2
    rm -rf "$T/ref" "$T/ref.jsonl" "$T/rref".*
    $M train $common --log "$T/ref.jsonl" --save "$T/ref" --moe-routing "$T/rref" >/dev/null 2>"$T/err" ||
        { fail "reference_$name" "$(tail -1 $T/err)"; return; }
    grep -q '"moe_dropped"' "$T/ref.jsonl" || fail "log_fields_$name" "$(head -1 $T/ref.jsonl)"
    for layout in "$@"; do
        local np=${layout%% *} flags=${layout#* } out=""
        local tag="$(echo "$flags" | tr -d ' -')_$name"
        rm -rf "$T/run" "$T/run.jsonl" "$T/rrun".*
        if timeout 120 $MPI -np $np $M train $common $flags --log "$T/run.jsonl" --save "$T/run" \
                --moe-routing "$T/rrun" >"$T/out" 2>"$T/err" &&
            out=$(/usr/bin/python3 tests/py/compare_runs.py "$T/ref.jsonl" "$T/run.jsonl" "$T/ref" "$T/run"); then
            pass "$tag"; echo "# $tag: $out"
        else fail "$tag" "${out:-} $(tail -2 $T/err)"; fi
        if same_routing "$T/rref" "$T/rrun"; then pass "routing_$tag"
        else fail "routing_$tag" "$(diff $T/r1 $T/r2 | head -3)"; fi
    done
}

train="--data $T/tok.bin --batch 8 --seq 8 --steps 20 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
check_layouts top1_capacity "--init tests/fixtures/moe-top1-capacity $train" \
    "2 --ep 2" "4 --ep 4" "4 --ep 2 --dp 2 --zero 1" "4 --ep 2 --tp 2" "4 --ep 2 --pp 2"
check_layouts top2_shared "--init tests/fixtures/moe-top2-capacity-shared $train" \
    "2 --ep 2" "4 --ep 4" "4 --ep 2 --dp 2" "2 --ep 2 --micro-batch 2" "4 --ep 2 --pp 2 --micro-batch 2 --recompute full"
gelu="--arch gpt2 --layers 2 --hidden 32 --heads 4 --vocab 67 --max-seq 8 --experts 4 --top-k 2 --shared-experts 1"
gelu+=" --expert-ffn 48 --capacity-factor 1.0 --aux-loss-coef 0.05"
check_layouts gelu_flags "$gelu $train" "2 --ep 2" "4 --ep 2 --dp 2" "4 --ep 2 --tp 2" "2 --dp 2 --zero 3"

# a dropping run drops, a dropless run does not (the log's counters)
/usr/bin/python3 - "$T" <<'PY' && pass "log_counts_dropped_tokens" || fail "log_counts_dropped_tokens"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/ref.jsonl")]
ok = all(r["moe_dropped"] > 0 and r["moe_tokens_per_expert"]["mean"] > 0 for r in rows)
print("# gelu_flags step 1: tokens per expert %s, dropped %d, aux %.4f" %
      (rows[0]["moe_tokens_per_expert"], rows[0]["moe_dropped"], rows[0]["moe_aux"]))
sys.exit(0 if ok else 1)
PY

# checkpoints: experts sharded over ep (ZeRO 1) resume in a single process, and a run of the
# same steps in one process gives the same losses
llama="--arch llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 48 --vocab 67 --max-seq 8 --experts 4"
ck="$llama --data $T/tok.bin --batch 8 --seq 8 --steps 10 --lr 3e-3 --threads 1"
if $M train $ck --log "$T/full.jsonl" >/dev/null 2>"$T/err" &&
    $MPI -np 2 $M train $ck --ep 2 --zero 1 --stop-after 5 --save "$T/ck" --save-every 5 >/dev/null 2>"$T/err" &&
    $M train $ck --resume auto --save "$T/ck" --log "$T/res.jsonl" >/dev/null 2>"$T/err" &&
    /usr/bin/python3 -c "
import json, sys
a = [json.loads(l)['loss'] for l in open('$T/full.jsonl')][5:]
b = [json.loads(l)['loss'] for l in open('$T/res.jsonl')]
w = max(abs(x - y) / x for x, y in zip(a, b)); print('# resume ep2 -> single: worst rel loss %.2e' % w)
sys.exit(0 if len(a) == len(b) == 5 and w < 1e-4 else 1)"; then pass "checkpoint_ep2_zero1_resumes_single"
else fail "checkpoint_ep2_zero1_resumes_single" "$(tail -2 $T/err)"; fi

# the final export is Mixtral-shaped
/usr/bin/python3 - "$T/ck" <<'PY' && pass "mixtral_export_names" || fail "mixtral_export_names"
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
b = open(d + "/model.safetensors", "rb").read()
names = set(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])) - {"__metadata__"}
want = {"model.layers.1.block_sparse_moe.gate.weight"} | {
    f"model.layers.1.block_sparse_moe.experts.{e}.w{i}.weight" for e in range(4) for i in (1, 2, 3)}
ok = cfg["model_type"] == "mixtral" and cfg["num_local_experts"] == 4 and cfg["num_experts_per_tok"] == 2 \
    and want <= names and not any(".mlp." in n for n in names)
sys.exit(0 if ok else 1)
PY

# export -> import -> export is the identity (config.json and tensors), for Mixtral and GPT-2 MoE
gelu_every="$gelu --moe-every 2 --data $T/tok.bin --batch 8 --seq 8 --threads 1"
ok=1
$M train $gelu_every --steps 2 --save "$T/g1" >/dev/null 2>"$T/err" || ok=0
for d in "$T/ck" "$T/g1"; do
    rm -rf "$T/again"
    $M train --init "$d" --data "$T/tok.bin" --batch 8 --seq 8 --steps 0 --save "$T/again" >/dev/null 2>>"$T/err" &&
        cmp -s "$d/model.safetensors" "$T/again/model.safetensors" && cmp -s "$d/config.json" "$T/again/config.json" ||
        ok=0
done
[ $ok = 1 ] && pass "hf_moe_roundtrip_mixtral_and_gpt2" || fail "hf_moe_roundtrip_mixtral_and_gpt2" "$(tail -2 $T/err)"

# bad input: one line naming the problem, non-zero exit, before any training step
bad="--arch llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 48 --vocab 67 --data $T/tok.bin --batch 8 --seq 8 --steps 2"
expect_error experts_not_divisible_by_ep "--experts 3 is not divisible by --ep 2" $MPI -np 2 $M train $bad --experts 3 --ep 2
expect_error top_k_larger_than_experts "--top-k 5 is larger than --experts 4" $M train $bad --experts 4 --top-k 5
expect_error checkpoint_other_expert_count "the checkpoint has 4 experts per MoE layer, the model has 8" \
    $M train $bad --experts 8 --resume "$T/ck"
expect_error dense_resume_of_moe_checkpoint "but the model's layer 0 is dense" $M train $bad --resume "$T/ck"
expect_error moe_flag_without_experts "need --experts E" $M train $bad --top-k 2
expect_error ep_without_experts "--ep 2 needs a mixture-of-experts model" $MPI -np 2 $M train $bad --ep 2
expect_error zero2_with_ep "--zero 2 with --ep is not supported" $MPI -np 2 $M train $bad --experts 4 --ep 2 --zero 2
expect_error dropless_and_capacity "--dropless and --capacity-factor contradict" \
    $M train $bad --experts 4 --dropless --capacity-factor 1.5
expect_error capacity_not_positive "--capacity-factor -1 is out of range" $M train $bad --experts 4 --capacity-factor -1

# a rank killed under the fault-tolerant launcher (--ep 2 --dp 2 --zero 1, in-memory copies every
# step, the default under `myriad run`): the job resumes from memory, recomputes at most one step
# and ends with the failure-free run's weights, bit for bit (300 steps of ~2 ms: the run must still
# be going when the launcher's kill for step 6 arrives, else there is nothing to recover)
ft="--arch llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 48 --vocab 67 --data $T/tok.bin --batch 8 --seq 8 \
--steps 300 --lr 3e-3 --threads 1 --experts 4 --top-k 2 --capacity-factor 1.25 --aux-loss-coef 0.01 --ep 2 --dp 2 --zero 1"
export MYRIAD_SHM_DIR="$T/shm"
timeout 200 $M run -n 4 -- train $ft --save "$T/ftref" >/dev/null 2>"$T/err"
rc_ref=$?
timeout 200 $M run -n 4 --max-restarts 2 --hang-timeout 30 --inject kill@6:3 --events "$T/ft.jsonl" -- \
    train $ft --save "$T/ftrun" >"$T/out" 2>&1
rc=$?
res=$(grep '"resumed"' "$T/ft.jsonl" 2>/dev/null | tail -1)
if [ $rc_ref -eq 0 ] && [ $rc -eq 0 ] && cmp -s "$T/ftref/model.safetensors" "$T/ftrun/model.safetensors" &&
    echo "$res" | grep -q '"source":"memory"' && echo "$res" | grep -Eq '"recomputed_steps":[01][,}]'; then
    pass "ep2_dp2_kill_recovers_from_memory_bitidentical"
else fail "ep2_dp2_kill_recovers_from_memory_bitidentical" "ref $rc_ref, run $rc, $res $(tail -c 300 "$T/out")"; fi
