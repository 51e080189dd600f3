#!/usr/bin/env bash
# bench/dispatch_cost.sh: what the run-time backend table (src/kernels/backend.h, dispatch.c) costs
# on the CPU. It builds the project at BASE (default 319874a: main before the table, every kernel
# a direct call) in a temporary folder with CUDA=0, then runs the same training alternately with
# that binary and with this one (--device cpu, fp32), ROUNDS times each, and prints the CPU time
# (user + sys) of each and their ratio. The shape is the most dispatch-bound one the fixtures give:
# the 2-layer, width-32 GPT-2 fixture, 4 x 8 tokens a step, one thread (thousands of kernel calls a
# second, each doing almost nothing). Each binary runs 100 and 1000 steps: the difference over 900
# is the CPU time of one step without the process's start (--peak-tflops skips the sgemm probe).
set -u
cd "$(dirname "$0")/.."
BASE=${BASE:-319874a}
ROUNDS=${ROUNDS:-5}
NEW=./bin/myriad
[ -x "$NEW" ] || { echo "build first: make -j2"; exit 1; }
W=$(mktemp -d /tmp/myriad-dispatch-XXXXXX)
trap 'rm -rf "$W"' EXIT
git archive "$BASE" | tar -x -C "$W" || { echo "cannot read commit $BASE"; exit 1; }
echo "building $BASE (before the backend table) in $W ..."
make -C "$W" -j2 CUDA=0 bin/myriad >"$W/build.log" 2>&1 || { echo "build of $BASE failed: $W/build.log"; tail -5 "$W/build.log"; exit 1; }
F=tests/fixtures/gpt2-tiny
ARGS="train --init $F --data $F/tokens.bin --batch 4 --seq 8 --threads 1 --print-every 1000000 --peak-tflops 1"
grep -q avx512f /proc/cpuinfo && isa="AVX-512" || isa="AVX2/FMA"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($isa); $ROUNDS alternating rounds"
/usr/bin/python3 - "$W/bin/myriad" "$NEW" "$ROUNDS" $ARGS <<'PY'
import os, resource, statistics, subprocess, sys
old, new, rounds, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
env = dict(os.environ, OMP_NUM_THREADS="1")
def cpu(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
def per_step(cmd):  # CPU ms of one step: (1000 steps - 100 steps) / 900
    return (cpu(cmd + ["--steps", "1000"]) - cpu(cmd + ["--steps", "100"])) / 900 * 1e3
runs = {"before (direct calls)": [old] + args, "after (backend table, --device cpu fp32)": [new] + args + ["--device", "cpu"]}
for cmd in runs.values():
    cpu(cmd + ["--steps", "10"])  # warm the page cache
t = {k: [] for k in runs}
for _ in range(rounds):
    for k, cmd in runs.items():
        t[k].append(per_step(cmd))
print(f"{'binary':<44} {'median CPU ms/step':>18}   all rounds")
for k, v in t.items():
    print(f"{k:<44} {statistics.median(v):18.4f}   {' '.join(f'{x:.3f}' for x in v)}")
mo, mn = (statistics.median(v) for v in t.values())
print(f"ratio after/before: {mn / mo:.3f}")
PY
