#!/usr/bin/env bash
# tokenize.sh: `myriad data prepare --tokenizer` against Hugging Face's `tokenizers` (npm
# package, Rust underneath), same corpus, same tokenizer.json, same run: MB/s with 1 thread and
# with every core, CPU seconds, and peak memory; then peak memory of prepare on a 1 GB input.
#   corpus   text files from this machine (Debian's /usr/share/doc changelogs and copyright
#            files, decompressed, and Python's standard library; none over 256 KiB), BENCH_MB
#            megabytes (default 32), one document per file; built once into build/bench-tokenize
#   npm      tests/tok/oracle.js bench: encodeBatch over ~1 MB batches of whole documents,
#            add_special_tokens=False, timed inside node after the tokenizer is loaded (so its
#            figure leaves out load time; myriad's includes loading, reading and writing shards)
#   1 GB     the corpus concatenated into one 1 GB file (one document, encoded in pieces) and
#            prepared with every core; peak RSS from /usr/bin/time (BENCH_1G=0 skips it)
# Usage: bash bench/tokenize.sh [OUT.md]   (needs npm: tests/tok/npm_setup.sh fetches the oracle)
set -eu
cd "$(dirname "$0")/.."
out=${1:-}
M=bin/myriad
MB=${BENCH_MB:-32}
W=build/bench-tokenize
mkdir -p "$W"
CACHE=$(bash tests/tok/npm_setup.sh) || { echo "bench/tokenize.sh: npm oracle unavailable" >&2; exit 1; }
export NODE_PATH=$CACHE/node/node_modules
cores=$(nproc)

# ---- corpus ----
if [ ! -f "$W/corpus.done" ] || [ "$(cat "$W/corpus.done")" != "$MB" ]; then
    rm -rf "$W/corpus" && mkdir -p "$W/corpus"
    total=0 i=0 limit=$((MB * 1000000))
    { find /usr/share/doc -type f \( -name 'changelog*.gz' -o -name copyright \) -size +2k | LC_ALL=C sort
      find /usr/lib/python3* -name '*.py' -size +4k 2>/dev/null | LC_ALL=C sort; } >"$W/list"
    while read -r f && [ $total -lt $limit ]; do
        dst=$(printf '%s/%06d.txt' "$W/corpus" $i)
        case $f in *.gz) zcat "$f" >"$dst" 2>/dev/null || continue ;; *) cp "$f" "$dst" ;; esac
        s=$(stat -c %s "$dst")
        # documents of web-corpus size: a few multi-megabyte changelogs would dominate, and the
        # npm package slows down more than linearly on very long texts
        [ "$s" -gt 262144 ] && { rm -f "$dst"; continue; }
        total=$((total + s)) i=$((i + 1))
    done <"$W/list"
    echo "$MB" >"$W/corpus.done"
fi
bytes=$(cat "$W"/corpus/*.txt | wc -c)
docs=$(ls "$W"/corpus | wc -l)
echo "corpus: $docs documents, $bytes bytes" >&2

# run_myriad TOK THREADS -> "wall_s cpu_s maxrss_kb"
run_myriad() {
    rm -rf "$W/out"
    /usr/bin/time -f "%e %U %S %M" -o "$W/time" $M data prepare --tokenizer "$1" "$W/corpus" --out "$W/out" \
        --threads "$2" --val-fraction 0 >/dev/null
    awk '{printf "%s %.2f %s", $1, $2 + $3, $4}' "$W/time"
}
# run_npm TOK RAYON_THREADS -> "wall_s cpu_s maxrss_kb" (wall: encoding only, timed inside node)
run_npm() {
    RAYON_NUM_THREADS=$2 /usr/bin/time -f "%e %U %S %M" -o "$W/time" node tests/tok/oracle.js bench "$1" \
        "$W"/corpus/*.txt >"$W/npm.json"
    local s; s=$(sed 's/.*"seconds":\([0-9.e-]*\).*/\1/' "$W/npm.json")
    awk -v s="$s" '{printf "%s %.2f %s", s, $2 + $3, $4}' "$W/time"
}
mbs() { awk -v b="$bytes" -v s="$1" 'BEGIN{printf "%.2f", b / 1e6 / s}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1fx", a / b}'; } # npm seconds / myriad seconds

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
simd=$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo AVX2)
rows=()
for name in gpt2 llama3 llama2; do
    tok=$CACHE/tok/$name.json
    for th in 1 $cores; do
        echo "$name, $th thread(s)" >&2
        read -r mw mc mr <<<"$(run_myriad "$tok" "$th")"
        read -r nw nc nr <<<"$(run_npm "$tok" "$th")"
        rows+=("| $name | $th | $(mbs "$mw") | $(mbs "$nw") | **$(ratio "$nw" "$mw")** | $(mbs "$mc") | $(mbs "$nc") | $(ratio "$nc" "$mc") | $((mr / 1024)) | $((nr / 1024)) |")
    done
done
big=""
if [ "${BENCH_1G:-1}" != 0 ]; then
    echo "1 GB input" >&2
    if [ ! -f "$W/big.txt" ]; then
        : >"$W/big.txt"
        while [ "$(stat -c %s "$W/big.txt")" -lt 1000000000 ]; do cat "$W"/corpus/*.txt >>"$W/big.txt"; done
    fi
    rm -rf "$W/out"
    /usr/bin/time -f "%e %U %S %M" -o "$W/time" $M data prepare --tokenizer "$CACHE/tok/gpt2.json" "$W/big.txt" \
        --out "$W/out" --threads "$cores" >"$W/big.log"
    read -r bw bu bs br <"$W/time"
    big="1 GB input ($(stat -c %s "$W/big.txt") bytes, one document), GPT-2, $cores threads: peak RSS $((br / 1024)) MiB, $bw s wall, $(awk -v b="$(stat -c %s "$W/big.txt")" -v s="$bw" 'BEGIN{printf "%.1f", b/1e6/s}') MB/s; $(grep -o 'train [0-9]* tokens in [0-9]* shards' "$W/big.log")"
    rm -rf "$W/out"
fi

report() {
    echo "# bench/tokenize.sh: myriad data prepare --tokenizer vs Hugging Face tokenizers (npm), one run"
    echo
    echo "Command: \`BENCH_MB=$MB bash bench/tokenize.sh bench/tokenize_results.md\` ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null), npm tokenizers $(node -p 'require("tokenizers/package.json").version' 2>/dev/null))."
    echo
    echo "Corpus: $docs documents, $bytes bytes ($W/corpus, BENCH_MB=$MB). Machine: $cores cores, $cpu ($simd); load average $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "| tokenizer | threads | myriad MB/s | npm MB/s | myriad / npm | myriad MB/s per CPU-s | npm MB/s per CPU-s | ratio (CPU) | myriad peak MiB | npm peak MiB |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    [ -n "$big" ] && echo "$big"
}
if [ -n "$out" ]; then report >"$out"; cat "$out"; else report; fi
