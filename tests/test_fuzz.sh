#!/usr/bin/env bash
# test_fuzz.sh: builds tests/fuzz/fuzz_parsers.c with the parsers it targets under
# AddressSanitizer + UndefinedBehaviorSanitizer (plain gcc, into build/fuzz/) and runs
# 100,000 mutated inputs through each of the safetensors, config.json and shard-header parsers.
# Any sanitizer report, broken invariant or crash fails the test. FUZZ_INPUTS / FUZZ_SEED override.
set -u
cd "$(dirname "$0")/.."
inputs=${FUZZ_INPUTS:-100000}
seed=${FUZZ_SEED:-20240520}
mkdir -p build/fuzz
srcs=(src/io/safetensors.c src/io/hf_config.c src/io/atomic_file.c src/io/quote.c src/data/shards.c
      src/model/config.c src/util/error.c tests/fuzz/fuzz_parsers.c)
if ! gcc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
        -Isrc "${srcs[@]}" -lcjson -lm -o build/fuzz/fuzz_parsers 2>build/fuzz/build.log; then
    if grep -qi 'asan\|sanitizer' build/fuzz/build.log; then
        echo "skip fuzz_parsers (this gcc cannot build with -fsanitize=address,undefined)"; exit 0
    fi
    cat build/fuzz/build.log >&2
    echo "FAIL fuzz_build"; exit 1
fi
echo "ok fuzz_build"
run() { ASAN_OPTIONS=detect_leaks=$1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
        build/fuzz/fuzz_parsers "$inputs" "$seed" >build/fuzz/run.log 2>&1; }
run 1; rc=$?
# LeakSanitizer cannot run under ptrace (some containers/debuggers); then fuzz without it
if [ $rc -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" build/fuzz/run.log; then run 0; rc=$?; fi
if [ $rc -eq 0 ]; then
    cat build/fuzz/run.log
    echo "ok fuzz_parsers"
else
    tail -n 40 build/fuzz/run.log >&2
    echo "FAIL fuzz_parsers (seed $seed; see build/fuzz/run.log)"
    exit 1
fi
