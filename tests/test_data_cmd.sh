#!/usr/bin/env bash
# test_data_cmd.sh: `myriad data prepare` and `myriad data info` end to end. The shards are
# checked by an independent Python reader against the input bytes; bad input must give a
# one-line error and a non-zero exit.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch data
have_python=1; [ -x /usr/bin/python3 ] || have_python=0

# expect_error NAME NEEDLE CMD... : non-zero exit, exactly one stderr line containing NEEDLE
expect_error() {
    local name=$1 needle=$2; shift 2
    "$@" >"$T/stdout" 2>"$T/err"; local rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF -- "$needle" "$T/err"; then pass "$name"
    else fail "$name" "rc=$rc stderr=$(head -c 300 "$T/err")"; fi
}

# Python oracle: tokens of the given shards (in order) must equal the concatenated files' bytes.
check_tokens() { # CHECK_NAME VERSION "SHARDS..." "FILES..."
    /usr/bin/python3 - "$2" "$3" "$4" <<'PY'
import struct, sys
version, shards, files = int(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
want = b"".join(open(f, "rb").read() for f in files)
got = []
for s in shards:
    b = open(s, "rb").read()
    magic, ver, n = struct.unpack("<3i", b[:12])
    assert (magic, ver) == ((20240520, 1) if version == 1 else (20240801, 7)), (s, magic, ver)
    assert b[12:1024] == bytes(1012), "header tail not zero"
    w = 2 if version == 1 else 4
    assert len(b) == 1024 + n * w, (s, len(b), n)
    got += list(struct.unpack("<%d%s" % (n, "H" if w == 2 else "I"), b[1024:]))
assert got == list(want), "tokens differ from the input bytes"
PY
}

mkdir -p "$T/in/d/sub"
printf 'Hello, myriad!\n' >"$T/in/a.txt"
printf 'second file \xc3\xa9\xff\x01 bytes\n' >"$T/in/d/b.txt"
# 3000 pseudo-random bytes, none NUL (a NUL makes a file binary: skipped, tested below)
/usr/bin/python3 -c 'import random, sys; r = random.Random(7); sys.stdout.buffer.write(b"x" + bytes(r.randrange(1, 256) for _ in range(2999)))' >"$T/in/d/sub/c.txt"
printf 'hidden' >"$T/in/d/.hidden"
total=$(( $(stat -c %s "$T/in/a.txt") + $(stat -c %s "$T/in/d/b.txt") + 3000 ))
val=$(( total / 10 ))

if $M data prepare "$T/in/a.txt" "$T/in/d" --out "$T/out" >"$T/summary" 2>"$T/err" &&
   [ "$(wc -l <"$T/summary")" -eq 1 ] && grep -q "train $((total - val)) tokens" "$T/summary" &&
   grep -q "val $val tokens" "$T/summary"; then pass prepare_summary
else fail prepare_summary "$(cat "$T/summary" "$T/err")"; fi

if [ $have_python -eq 0 ]; then echo "skip prepare_tokens_are_bytes (/usr/bin/python3 not found)"
elif check_tokens x 1 "$T/out/train_000000.bin $T/out/val_000000.bin" "$T/in/a.txt $T/in/d/b.txt $T/in/d/sub/c.txt" 2>"$T/err" &&
   [ "$(stat -c %s "$T/out/val_000000.bin")" -eq $((1024 + 2 * val)) ]; then pass prepare_tokens_are_bytes
else fail prepare_tokens_are_bytes "$(tail -1 "$T/err")"; fi

# uint32 tokens, several shards per split, val fraction 0.5
$M data prepare "$T/in" --out "$T/out7" --version 7 --shard-tokens 1000 --val-fraction 0.5 >"$T/summary" 2>&1
n_train=$(ls "$T/out7"/train_*.bin 2>/dev/null | wc -l); n_val=$(ls "$T/out7"/val_*.bin 2>/dev/null | wc -l)
half=$(( total - total / 2 ))
if [ $have_python -eq 0 ]; then echo "skip prepare_version7_many_shards (/usr/bin/python3 not found)"
elif [ "$n_train" -eq $(( (half + 999) / 1000 )) ] && [ "$n_val" -eq $(( (total / 2 + 999) / 1000 )) ] &&
   check_tokens x 7 "$(ls "$T/out7"/train_*.bin | tr '\n' ' ') $(ls "$T/out7"/val_*.bin | tr '\n' ' ')" \
       "$T/in/a.txt $T/in/d/b.txt $T/in/d/sub/c.txt" 2>"$T/err"; then pass prepare_version7_many_shards
else fail prepare_version7_many_shards "train $n_train val $n_val: $(cat "$T/summary") $(tail -1 "$T/err")"; fi

# a smaller re-run into the same directory removes the now-stale shards
$M data prepare "$T/in/a.txt" --out "$T/out7" --version 7 --shard-tokens 1000 >"$T/summary" 2>&1
if [ "$(ls "$T/out7" | wc -l)" -eq 2 ] && grep -q "removed" "$T/summary"; then pass prepare_removes_stale_shards
else fail prepare_removes_stale_shards "$(ls "$T/out7")"; fi

if $M data info "$T/out" >"$T/info" 2>&1 && grep -q "train_000000.bin: version 1 (uint16 tokens), $((total - val)) tokens" "$T/info" &&
   grep -q "total: 2 shards, $total tokens" "$T/info"; then pass info_lists_shards
else fail info_lists_shards "$(cat "$T/info")"; fi

if $M data prepare --help | grep -q -- --val-fraction && $M data info --help | grep -q PATH; then pass help
else fail help; fi

expect_error prepare_missing_input "$T/in/nope.txt" $M data prepare "$T/in/nope.txt" --out "$T/o2"
expect_error prepare_needs_out "--out DIR is required" $M data prepare "$T/in/a.txt"
expect_error prepare_bad_fraction "--val-fraction 1.5 is out of range: give a number in [0, 1)" $M data prepare "$T/in/a.txt" --out "$T/o2" --val-fraction 1.5
expect_error prepare_bad_version "--version '3' is not known (use 1 or 7)" $M data prepare "$T/in/a.txt" --out "$T/o2" --version 3
expect_error prepare_unknown_option "unknown option '--bogus'" $M data prepare "$T/in/a.txt" --out "$T/o2" --bogus
expect_error data_unknown_subcommand "unknown subcommand" $M data frobnicate
head -c 1100 "$T/out/train_000000.bin" >"$T/trunc.bin"
expect_error info_truncated_shard "trunc.bin is truncated" $M data info "$T/trunc.bin"
expect_error info_wrong_magic "wrong magic" $M data info "$T/in/a.txt"
expect_error info_missing_file "No such file" $M data info "$T/missing.bin"
expect_error info_empty_glob "no shard files match" $M data info "$T/*.nothing"

# ---- binary inputs: skipped with one line each and counted, refused with --strict (src/data/input_kind.c)
mkdir -p "$T/bin/model" "$T/bin/shards"
printf 'plain text\n' >"$T/bin/keep.txt"
cp "$T/out/train_000000.bin" "$T/bin/shards/"                       # an llm.c token shard
printf 'PAR1\x15\x04\x15\x00PAR1' >"$T/bin/table.parquet"             # parquet magic at both ends
printf 'text then\x00 a NUL\n' >"$T/bin/nul.dat"
gzip -c "$T/bin/keep.txt" >"$T/bin/keep.txt.gz"
/usr/bin/python3 - "$T/bin" <<'PY'
import json, struct, sys, zipfile
d = sys.argv[1]
h = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
open(d + "/model/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<2f", 1, 2))
json.dump({"model_type": "gpt2"}, open(d + "/model/config.json", "w"))
with zipfile.ZipFile(d + "/archive.zip", "w") as z: z.writestr("a.txt", "inside a zip")
PY
$M data prepare "$T/bin" --out "$T/obin" >"$T/summary" 2>"$T/err"; rc=$?
skips=$(grep -c '^data prepare: skipping ' "$T/err")
if [ $rc -eq 0 ] && [ "$skips" -eq 6 ] &&
    grep -q "^data prepare: skipping $T/bin/model/model.safetensors: a safetensors file, not text$" "$T/err" &&
    grep -q "^data prepare: skipping $T/bin/shards/train_000000.bin: an llm.c token shard, not text$" "$T/err" &&
    grep -q "^data prepare: skipping $T/bin/table.parquet: a Parquet file, not text$" "$T/err" &&
    grep -q "^data prepare: skipping $T/bin/archive.zip: a zip archive" "$T/err" &&
    grep -q "^data prepare: skipping $T/bin/keep.txt.gz: gzip-compressed (read directly only with --tokenizer" "$T/err" &&
    grep -q "^data prepare: skipping $T/bin/nul.dat: a NUL byte at offset 9" "$T/err" &&
    grep -q "^data prepare: 2 input files (6 binary skipped), " "$T/summary" &&
    check_tokens x 1 "$T/obin/train_000000.bin $T/obin/val_000000.bin" "$T/bin/keep.txt $T/bin/model/config.json" 2>>"$T/err"
then pass prepare_skips_binary_inputs_one_line_each
else fail prepare_skips_binary_inputs_one_line_each "rc=$rc skips=$skips $(cat "$T/summary") $(tail -3 "$T/err")"; fi
expect_error prepare_strict_refuses_binary "myriad: data prepare: $T/bin/archive.zip is binary (a zip archive" \
    $M data prepare "$T/bin" --out "$T/ostrict" --strict
if [ -z "$(ls "$T/ostrict" 2>/dev/null)" ]; then pass prepare_strict_writes_nothing; else fail prepare_strict_writes_nothing "$(ls "$T/ostrict")"; fi
# --include-binary reads a text with a stray NUL as it is
if $M data prepare "$T/bin/nul.dat" "$T/bin/keep.txt" --include-binary --out "$T/oinc" >"$T/summary" 2>"$T/err" &&
    ! grep -q skipping "$T/err" && check_tokens x 1 "$T/oinc/train_000000.bin $T/oinc/val_000000.bin" "$T/bin/nul.dat $T/bin/keep.txt" 2>>"$T/err"
then pass prepare_include_binary_reads_them; else fail prepare_include_binary_reads_them "$(cat "$T/summary" "$T/err" | tail -2)"; fi
$M data prepare "$T/bin/table.parquet" --out "$T/o3" >"$T/stdout" 2>"$T/err"; rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 2 ] && grep -q "^myriad: data prepare: the inputs hold no text files (1 binary skipped, listed above)" "$T/err"
then pass prepare_only_binary; else fail prepare_only_binary "rc=$rc $(cat "$T/err")"; fi
# with --tokenizer gzip is read directly: a gzip text is a document, a gzip safetensors file is not
/usr/bin/python3 - "$T/tok.json" <<'PY'
import json, sys
keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))  # GPT-2's byte alphabet
alphabet, extra = {}, 0
for b in range(256):
    if b in keep: alphabet[b] = chr(b)
    else: alphabet[b] = chr(256 + extra); extra += 1
vocab = {alphabet[b]: b for b in range(256)}
vocab["<|endoftext|>"] = 256
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump({"version": "1.0", "added_tokens": [{"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
           "rstrip": False, "normalized": False, "special": True}], "normalizer": None, "pre_tokenizer": bl,
           "post_processor": None, "decoder": bl, "model": {"type": "BPE", "dropout": None, "unk_token": None,
           "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
           "vocab": vocab, "merges": []}}, open(sys.argv[1], "w"))
PY
gzip -c "$T/bin/model/model.safetensors" >"$T/bin/model.safetensors.gz"
$M data prepare --tokenizer "$T/tok.json" "$T/bin/keep.txt.gz" "$T/bin/model.safetensors.gz" "$T/bin/keep.txt" --out "$T/otok" >"$T/summary" 2>"$T/err"; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^data prepare: skipping ' "$T/err")" -eq 1 ] &&
    grep -q "^data prepare: skipping $T/bin/model.safetensors.gz: a safetensors file, gzip-compressed, not text$" "$T/err" &&
    grep -q "^data prepare: 2 input files (1 binary skipped), 2 documents" "$T/summary"
then pass prepare_tokenizer_reads_gzip_text_skips_gzip_binary
else fail prepare_tokenizer_reads_gzip_text_skips_gzip_binary "rc=$rc $(cat "$T/summary") $(tail -3 "$T/err")"; fi
