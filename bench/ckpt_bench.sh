#!/usr/bin/env bash
# ckpt_bench.sh: build bench/ckpt_bench.c against build/libmyriad.a and run it
# (checkpoint save / async / verified load throughput vs plain write / read / memcpy).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/bench
mpicc -O3 -march=native -std=gnu11 -fopenmp -Isrc bench/ckpt_bench.c build/libmyriad.a -o build/bench/ckpt_bench \
    -lopenblas -lcjson -lm -lpthread
build/bench/ckpt_bench "${1:-/tmp/myriad-ckpt-bench}" "${2:-256}"
