#!/usr/bin/env bash
# moe_a2a.sh: expert-parallel all-to-all on 4 ranks of this machine: time and bytes per training
# step for --ep 1 (dp 4, no all-to-all: the baseline), --ep 2 (dp 2) and --ep 4, measured by the
# trainer (per-step log: a2a_bytes sent by rank 0 to other ranks, a2a_ms rank 0 spent in
# all-to-alls), against the simulator's all-to-all cost model (src/sim/collectives.c) for the same
# bytes, its latency and bandwidth fitted to `myriad bench comm -c all_to_all` on the same ranks.
# Each layout runs twice: plainly (step time; a2a time = wait for the other ranks + transfer) and
# with --a2a-barrier (a2a time = the transfer alone, the wait logged apart), since the simulator
# models the transfer.
# Usage: [RANKS=2|4] bash bench/moe_a2a.sh [STEPS]   (prints a markdown table; bench/moe_results.md has one)
set -eu
cd "$(dirname "$0")/.."
STEPS=${1:-12}
RANKS=${RANKS:-4} # 4 (ep 1, 2, 4) or 2 (ep 1, 2: no oversubscription on a 2-core machine)
case $RANKS in 2) EPS="1 2" ;; 4) EPS="1 2 4" ;; *) echo "RANKS must be 2 or 4" >&2; exit 1 ;; esac
T=$(mktemp -d /tmp/myriad-moe-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
MPI="mpirun --oversubscribe --bind-to none --mca btl self,vader"
mkdir -p build/bench
mpicc -O3 -std=gnu11 -Isrc bench/moe_a2a_model.c build/libmyriad.a -o build/bench/moe_a2a_model -lm -fopenmp
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 200000 256 5 >/dev/null
L=2 E=8
model="--arch llama --layers $L --hidden 256 --heads 4 --ffn 512 --vocab 256 --experts $E --top-k 2 --dropless"
run="$model --data $T/tok.bin --batch 16 --seq 64 --steps $STEPS --threads 1 --peak-tflops 1"
echo "| ep | dp | a2a bytes/step (rank 0) | a2a ms/step (wait + transfer) | transfer ms/step (after a barrier) | wait ms/step | model ms/step | transfer / model | step ms | step / ep 1 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
base=""
for ep in $EPS; do
    $MPI -np $RANKS bin/myriad train $run --ep $ep --dp $((RANKS / ep)) --log "$T/ep$ep.jsonl" >/dev/null 2>"$T/err" ||
        { tail -2 "$T/err"; exit 1; }
    $MPI -np $RANKS bin/myriad train $run --ep $ep --dp $((RANKS / ep)) --a2a-barrier --log "$T/sync$ep.jsonl" >/dev/null \
        2>"$T/err" || { tail -2 "$T/err"; exit 1; }
    # the model's latency and bandwidth for an all-to-all over ep ranks, from bench comm (medians of 3 trials)
    fit="0 1"
    if [ $ep -gt 1 ]; then
        $MPI -np $ep bin/myriad bench comm -c all_to_all -b 64 -e 1M -f 16384 --trials 3 -n 50 >"$T/comm$ep" 2>&1
        read s0 t0 < <(awk '$1 == 64 {print $1, $6}' "$T/comm$ep")
        read s1 t1 < <(awk '$1 == 1048576 {print $1, $6}' "$T/comm$ep")
        fit=$(build/bench/moe_a2a_model fit $ep $s0 $t0 $s1 $t1)
        echo "# ep $ep: bench comm all_to_all 64 B $t0 us, 1 MiB $t1 us -> model alpha, bw (GB/s): $fit" >&2
    fi
    read alpha bw <<<"$fit"
    /usr/bin/python3 - "$T/ep$ep.jsonl" $ep $L $E $alpha $bw "$base" "$T/sync$ep.jsonl" $RANKS <<'PY' >"$T/row"
import json, statistics, subprocess, sys
path, ep, L, E, alpha, bw, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
rows = [json.loads(l) for l in open(path)][2:]  # steps 3.. (warm)
sync = [json.loads(l) for l in open(sys.argv[8])][2:]
b = statistics.median(r["a2a_bytes"] for r in rows)
raw = statistics.median(r["a2a_ms"] for r in rows)
t = statistics.median(r["a2a_ms"] for r in sync)
wait = statistics.median(r["a2a_wait_ms"] for r in sync)
step = statistics.median(r["ms"] for r in rows)
model = 0.0
if ep > 1:
    # per MoE layer and step: 4 row exchanges (dispatch and combine, forward and backward) sharing
    # the bytes, and 1 exchange of E counts; the model's bytes are the whole send buffer, of which
    # (ep - 1) / ep leaves the rank
    data = (b - 4 * L * E * (ep - 1) / ep) / (4 * L) * ep / (ep - 1)
    out = subprocess.run(["build/bench/moe_a2a_model", "time", str(ep), alpha, bw, str(data), str(4 * E)],
                         capture_output=True, text=True, check=True).stdout.split()
    model = L * (4 * float(out[0]) + float(out[1])) / 1e3
ratio = f"{t / model:.2f}" if model > 0 else "-"
rel = f"{step / float(base):.2f}" if base else "1.00"
print(f"| {ep} | {int(sys.argv[9]) // ep} | {b:.0f} | {raw:.3f} | {t:.3f} | {wait:.3f} | {model:.3f} | {ratio} | {step:.1f} | {rel} |")
print(step, file=sys.stderr)
PY
    [ -z "$base" ] && base=$(/usr/bin/python3 -c "
import json,statistics; print(statistics.median(json.loads(l)['ms'] for l in list(open('$T/ep1.jsonl'))[2:]))")
    cat "$T/row"
done
echo "(steps 3..$STEPS, medians; load average $(cut -d' ' -f1-3 /proc/loadavg))"
