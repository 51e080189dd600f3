#!/usr/bin/env bash
# test_fuzz.sh: builds tests/fuzz/fuzz_parsers.c with the parsers it targets under
# AddressSanitizer + UndefinedBehaviorSanitizer (plain gcc, into build/fuzz/) and runs
# 100,000 mutated inputs through each of the safetensors, config.json and shard-header parsers
# (~1.5 s); then tests/fuzz/fuzz_tokenizer.c over src/tokenizer/: 25,000 mutated tokenizer.json
# files and 25,000 random texts through the encoder and decoder (~6 s; 100,000 took ~25 s, run by
# `make test-long`; `make fuzz` runs 1,000,000 of each).
# Any sanitizer report, broken invariant or crash fails the test. FUZZ_INPUTS (both fuzzers),
# FUZZ_TOK_INPUTS (the tokenizer's only) and FUZZ_SEED override.
set -u
cd "$(dirname "$0")/.."
inputs=${FUZZ_INPUTS:-100000}
tok_inputs=${FUZZ_TOK_INPUTS:-${FUZZ_INPUTS:-25000}}
seed=${FUZZ_SEED:-20240520}
mkdir -p build/fuzz
srcs=(src/io/safetensors.c src/model/hf_config.c src/io/atomic_file.c src/io/quote.c src/data/shards.c
      src/model/config.c src/model/rope_scaling.c src/util/error.c tests/fuzz/fuzz_parsers.c)
if ! gcc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
        -Isrc "${srcs[@]}" -lcjson -lm -o build/fuzz/fuzz_parsers 2>build/fuzz/build.log; then
    if grep -qi 'asan\|sanitizer' build/fuzz/build.log; then
        echo "skip fuzz_parsers (this gcc cannot build with -fsanitize=address,undefined)"; exit 0
    fi
    cat build/fuzz/build.log >&2
    echo "FAIL fuzz_build"; exit 1
fi
echo "ok fuzz_build"
# a small quarantine: the tokenizer fuzzer allocates and frees whole tokenizers 100,000 times
run() { ASAN_OPTIONS=detect_leaks=$2:abort_on_error=1:quarantine_size_mb=16 UBSAN_OPTIONS=print_stacktrace=1 \
        build/fuzz/$1 "$3" "$seed" >build/fuzz/$1.log 2>&1; }
fuzz() { # NAME INPUTS: run it, with LeakSanitizer unless it cannot run here (under ptrace, in some containers)
    run "$1" 1 "$2"; local rc=$?
    if [ $rc -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" "build/fuzz/$1.log"; then run "$1" 0 "$2"; rc=$?; fi
    if [ $rc -eq 0 ]; then
        cat "build/fuzz/$1.log"
        echo "ok $1"
    else
        tail -n 40 "build/fuzz/$1.log" >&2
        echo "FAIL $1 (seed $seed; see build/fuzz/$1.log)"
        return 1
    fi
}
fuzz fuzz_parsers "$inputs" || exit 1
tok_srcs=($(ls src/tokenizer/*.c | grep -v tok_cmd.c) src/util/error.c tests/fuzz/fuzz_tokenizer.c)
if ! gcc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
        -Isrc "${tok_srcs[@]}" -lpcre2-8 -lm -o build/fuzz/fuzz_tokenizer 2>build/fuzz/build_tokenizer.log; then
    cat build/fuzz/build_tokenizer.log >&2
    echo "FAIL fuzz_tokenizer_build"; exit 1
fi
fuzz fuzz_tokenizer "$tok_inputs" || exit 1
