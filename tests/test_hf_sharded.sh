#!/usr/bin/env bash
# test_hf_sharded.sh: Hugging Face checkpoints as the hub ships them, in and out, under every
# layout (#25). A PyTorch oracle (tests/py/hf_llama_oracle.py) writes a Llama 3.1-style
# checkpoint (GQA, rope_scaling llama3, BF16, 3 shards named by model.safetensors.index.json) and
# one with attention/MLP biases and linear rope scaling (F16, 2 shards), and computes their loss on
# batch 0 in fp32. myriad loads them under 1 rank, tp 2, pp 2 and ZeRO-3 x 4 (each rank reading
# only its slices) and must give that loss; a 5-step fine-tune saved as sharded BF16 must read
# back in PyTorch with the values of the same run's fp32 export and the loss myriad computes; a
# small model stays one model.safetensors; damaged checkpoints are refused naming the file.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
test_scratch hfsh
mpi_env
PY=/usr/bin/python3
if ! $PY -c "import torch" 2>/dev/null; then echo "skip hf_sharded (no PyTorch at $PY)"; exit 0; fi
O=tests/py/hf_llama_oracle.py
$PY $O make "$T/l31" llama31 && $PY $O make "$T/bias" bias || { fail oracle_fixtures "$PY $O make failed"; exit 0; }
[ "$(ls "$T/l31" | grep -c '^model-0000[0-9]-of-00003.safetensors$')" = 3 ] && [ -f "$T/l31/model.safetensors.index.json" ] &&
    pass fixture_is_sharded || fail fixture_is_sharded "$(ls "$T/l31")"

# the first step's loss (computed before any update) under a layout, against PyTorch's
first_loss() { # DIR NP FLAGS...
    local d=$1 np=$2; shift 2
    rm -f "$T/log.jsonl"
    local run=($M)
    [ "$np" -gt 1 ] && run=($MPI -np "$np" $M)
    timeout 120 "${run[@]}" train --init "$d" --data "$d/tokens.bin" --batch 4 --seq 32 --steps 1 --no-shuffle \
        --log "$T/log.jsonl" "$@" >"$T/out" 2>"$T/err" || { echo "# $(tail -3 "$T/err")"; return 1; }
    $PY -c "import json; print(json.loads(open('$T/log.jsonl').readline())['loss'])"
}
close_to() { $PY -c "import sys; a, b = float('$1'), float('$2'); print('# myriad %.9g torch %.9g rel %.2e' % (a, b, abs(a - b) / b)); sys.exit(0 if abs(a - b) <= 1e-5 * b else 1)"; }

for fx in l31 bias; do
    want=$($PY -c "import json; print(json.load(open('$T/$fx/expected.json'))['loss'])")
    layouts=("1" "2 --tp 2" "2 --pp 2" "4 --zero 3")
    [ $fx = bias ] && layouts=("1" "2 --tp 2 --sp" "4 --tp 2 --pp 2")
    for l in "${layouts[@]}"; do
        set -- $l
        np=$1; shift
        name="loads_${fx}_np${np}$(echo "$*" | tr -d ' -')"
        got=$(first_loss "$T/$fx" "$np" "$@") && close_to "$got" "$want" && pass "$name" || fail "$name" "$(tail -2 "$T/err")"
    done
done
# each rank read about its share of the bytes (ZeRO-3 x 4: a quarter), never the whole checkpoint
first_loss "$T/l31" 4 --zero 3 >/dev/null
share=$(grep -o 'each rank read at most [0-9.]*%' "$T/err" | grep -o '[0-9.]*')
$PY -c "import sys; sys.exit(0 if 20 < float('${share:-100}') < 35 else 1)" && pass zero3_reads_its_quarter ||
    fail zero3_reads_its_quarter "read ${share:-?}%"

# a 5-step fine-tune at tp 2, saved as sharded BF16 and as one fp32 file (the same run twice)
ft="--init $T/l31 --data $T/l31/tokens.bin --batch 4 --seq 32 --steps 5 --no-shuffle --lr 1e-3"
$MPI -np 2 $M train $ft --tp 2 --save "$T/ft16" --save-dtype bf16 --save-shard-size 20KB >"$T/o16" 2>"$T/e16" &&
    $MPI -np 2 $M train $ft --tp 2 --save "$T/ft32" >"$T/o32" 2>"$T/e32" || fail finetune_runs "$(tail -3 "$T/e16" "$T/e32")"
n16=$(ls "$T/ft16" | grep -c '^model-.*-of-.*\.safetensors$')
[ -f "$T/ft16/model.safetensors.index.json" ] && [ "$n16" -ge 2 ] && [ ! -e "$T/ft16/model.safetensors" ] &&
    $PY -c "import json, sys; sys.exit(json.load(open('$T/ft16/config.json'))['torch_dtype'] != 'bfloat16')" &&
    grep -q "saved .* $n16 shards named by" "$T/o16" &&
    pass saves_sharded_bf16 || fail saves_sharded_bf16 "$(ls "$T/ft16"; cat "$T/o16")"
[ -f "$T/ft32/model.safetensors" ] && [ -f "$T/ft32/config.json" ] && [ ! -e "$T/ft32/model.safetensors.index.json" ] &&
    pass small_model_stays_one_file || fail small_model_stays_one_file "$(ls "$T/ft32")"
$PY $O same "$T/ft32" "$T/ft16" && pass torch_reads_bf16_shards_as_rounded_fp32 ||
    fail torch_reads_bf16_shards_as_rounded_fp32
cp "$T/l31/tokens.bin" "$T/ft16/tokens.bin"
want=$($PY $O loss "$T/ft16" 4 32 | $PY -c "import json, sys; print(json.load(sys.stdin)['loss'])")
for l in "1" "2 --pp 2" "4 --zero 3"; do
    set -- $l
    np=$1; shift
    got=$(first_loss "$T/ft16" "$np" "$@") && close_to "$got" "$want" && pass "reloads_finetune_np${np}$(echo "$*" | tr -d ' -')" ||
        fail "reloads_finetune_np${np}$(echo "$*" | tr -d ' -')" "$(tail -2 "$T/err")"
done
# a save over an earlier save of another shape leaves no stale file for a loader to pick first
$M train --init "$T/ft32" --data "$T/l31/tokens.bin" --batch 4 --seq 32 --steps 1 --no-shuffle --save "$T/ft16" \
    >/dev/null 2>"$T/err" && [ -f "$T/ft16/model.safetensors" ] && [ ! -e "$T/ft16/model.safetensors.index.json" ] &&
    [ "$(ls "$T/ft16" | grep -c '^model-')" = 0 ] && pass resave_removes_stale_shards || fail resave_removes_stale_shards "$(ls "$T/ft16")"

# damaged or unsupported checkpoints: one line naming the file and the fix
cp -r "$T/l31" "$T/missing" && rm "$T/missing/model-00002-of-00003.safetensors"
expect_error shard_missing "names the shard model-00002-of-00003.safetensors, which is missing" \
    $M train --init "$T/missing" --data "$T/l31/tokens.bin" --batch 4 --seq 32 --steps 1
cp -r "$T/l31" "$T/swapped" && cp "$T/swapped/model-00001-of-00003.safetensors" "$T/swapped/model-00002-of-00003.safetensors"
expect_error index_names_wrong_file "which does not hold it" \
    $M train --init "$T/swapped" --data "$T/l31/tokens.bin" --batch 4 --seq 32 --steps 1
mkdir -p "$T/noweights" && cp "$T/l31/config.json" "$T/noweights/"
expect_error no_weights "holds neither model.safetensors nor model.safetensors.index.json" \
    $M train --init "$T/noweights" --data "$T/l31/tokens.bin" --batch 4 --seq 32 --steps 1
cp -r "$T/l31" "$T/yarn" && $PY -c "
import json; p='$T/yarn/config.json'; c=json.load(open(p)); c['rope_scaling']={'rope_type':'yarn','factor':4.0}; json.dump(c,open(p,'w'))"
expect_error rope_yarn_refused "rope_scaling type yarn is not supported (supported: default, linear, dynamic, llama3)" \
    $M train --init "$T/yarn" --data "$T/l31/tokens.bin" --batch 4 --seq 32 --steps 1
