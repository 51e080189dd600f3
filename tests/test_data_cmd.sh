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
printf 'second file \xc3\xa9\xff\x00 bytes\n' >"$T/in/d/b.txt"
head -c 3000 /dev/urandom >"$T/in/d/sub/c.txt"
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
