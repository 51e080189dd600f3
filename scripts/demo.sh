#!/usr/bin/env bash
# The default job (README's first command, after the build): prepare byte-level shards from
# this project's own sources and docs, train a small GPT-2-style model on them for a few
# minutes on CPU, show the loss falling, print the validation loss and a sample, save the model.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-runs/demo}
mkdir -p "$out"
bin/myriad data prepare src docs README.md --out "$out/data" --val-fraction 0.1
# DEMO_STEPS, DEMO_EVAL_BATCHES, DEMO_SAMPLE shorten it (tests/test_docs_commands.sh)
bin/myriad train --preset tiny --data "$out/data" --batch 16 --seq 128 --steps ${DEMO_STEPS:-600} \
    --lr 2e-3 --lr-schedule cosine --warmup 20 --min-lr 2e-4 --weight-decay 0.1 --clip 1.0 \
    --eval-every 100 --eval-batches ${DEMO_EVAL_BATCHES:-8} --log "$out/train.jsonl" --sample ${DEMO_SAMPLE:-300} \
    --save "$out/model" "$@"
echo "log: $out/train.jsonl   model: $out/model (Hugging Face layout; try: bin/myriad eval --init $out/model --data '$out/data/val_*.bin' --batch 8 --seq 128)"
