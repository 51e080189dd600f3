#!/usr/bin/env bash
# bench/hb_overhead.sh: what the heartbeat section timings cost a training step (target: under
# 1% of the step). The added work is (1) reads of the thread's CPU clock: the section marks and
# the start and end of each communication wait that has to wait (a system call each; counted
# here with strace, since without the timings the trainer makes none), and (2) the longer STEP
# line (section times formatted, more bytes under the MAC). Each piece's CPU cost comes from
# bench/hb_overhead.c; the step's CPU time is measured in the same run as the difference of two
# run lengths (start-up cancels). Baseline in the same run: the step itself.
# Usage: bash bench/hb_overhead.sh [RANKS]        (results: bench/straggler_results.md)
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
RANKS=${1:-4}
M=$(pwd)/bin/myriad
T=$(mktemp -d /tmp/myriad-hbovh-XXXXXX)
trap 'rm -rf "$T"' EXIT
mpicc -O2 -std=gnu11 -Isrc bench/hb_overhead.c build/libmyriad.a -o build/hb_overhead -lm || exit 1
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
# the model of the straggler tests (~10 ms of compute per rank and step: short steps are the worst case)
model="--arch gpt2 --layers 2 --hidden 128 --heads 4 --ffn 512 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 16 --seq 64 \
--lr 3e-3 --threads 1 --peak-tflops 1 --dp $RANKS"
cpu_of() { # STEPS: CPU seconds (user + system) of a whole supervised run of that many steps
    rm -rf "$T/r"
    /usr/bin/time -f "%U %S" -o "$T/time" "$M" run -n "$RANKS" --max-restarts 0 -- train $model --steps "$1" --save "$T/r" \
        >/dev/null 2>&1
    awk '{ print $1 + $2 }' "$T/time"
}
build/hb_overhead >"$T/micro"
clock_ns=$(awk '$1 == "thread_cpu_clock_read" { print $2 }' "$T/micro")
line_ns=$(awk '$1 == "step_line_extra" { print $2 }' "$T/micro")
S1=30 S2=130
rm -rf "$T/r"
strace -f -c -e trace=clock_gettime -o "$T/strace" "$M" run -n "$RANKS" --max-restarts 0 -- train $model --steps $S1 \
    --save "$T/r" >/dev/null 2>&1
calls1=$(awk '$NF == "clock_gettime" { print $4 }' "$T/strace")
rm -rf "$T/r"
strace -f -c -e trace=clock_gettime -o "$T/strace" "$M" run -n "$RANKS" --max-restarts 0 -- train $model --steps $S2 \
    --save "$T/r" >/dev/null 2>&1
calls2=$(awk '$NF == "clock_gettime" { print $4 }' "$T/strace")
c1=$(cpu_of $S1) c2=$(cpu_of $S2) c1b=$(cpu_of $S1) c2b=$(cpu_of $S2)
awk -v n="$RANKS" -v s="$((S2 - S1))" -v k1="$calls1" -v k2="$calls2" -v cn="$clock_ns" -v ln="$line_ns" \
    -v c1="$c1" -v c2="$c2" -v c1b="$c1b" -v c2b="$c2b" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
    calls = (k2 - k1) / (n * s); step = ((c2 - c1) + (c2b - c1b)) / 2 / (n * s)
    added = calls * cn * 1e-9 + ln * 1e-9
    printf "%d ranks (dp %d), steps %d..%d, load average %s\n", n, n, 30, 130, load
    printf "CPU-clock reads per rank and step: %.1f x %.0f ns; STEP line with sections: +%.0f ns\n", calls, cn, ln
    printf "added per rank and step: %.1f us; step CPU time per rank: %.2f ms; overhead %.2f%% of the step\n",
        added * 1e6, step * 1e3, 100 * added / step }'
