#!/usr/bin/env bash
# bench/recovery.sh [RANKS...]: recovery time phase by phase (the launcher's `recovery` events,
# docs/LAUNCHER.md "Time ledger"), from a failure to the first step no attempt had completed:
# detection, teardown, spare_wait, launch (mpirun to the rank process), mpi_init, setup, restore,
# rejoin, replay. For each rank count (default 2 4 8, all on this machine, dp = ranks) and each
# restore path: `memory` (in-memory copies every step, the default under myriad run) and `disk`
# (no in-memory copies; async disk checkpoints every 4 steps, resharding reader), KILLS kills
# (default 5) of a rank each. Prints the median of each phase per configuration and writes every
# recovery event to OUT (default /tmp/myriad-recovery) as recovery-N-MODE.jsonl; then
# bench/recovery_project.py fits how each phase grows with the rank count and projects 10,000.
# Kills, not hangs: a hang's detection is --hang-timeout by construction (and measured at 10,000
# ranks by bench/supervisor_scale.sh), a kill's is what the launcher adds. Results:
# bench/recovery_results.md.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
RANKS=("$@")
[ ${#RANKS[@]} -eq 0 ] && RANKS=(2 4 8)
KILLS=${KILLS:-5}
OUT=${OUT:-/tmp/myriad-recovery}
MODES=${MODES:-"memory disk"}
mkdir -p "$OUT"
M=${MYRIAD:-$PWD/bin/myriad} # MYRIAD=path: another build (a before/after)
export MYRIAD_SHM_DIR="$OUT/shm"
[ -s "$OUT/tok.bin" ] || /usr/bin/python3 bench/make_tokens.py "$OUT/tok.bin" 200000 67 7 >/dev/null
# a model with some state to restore: ~3.2 M parameters, 51 MB of weights and AdamW moments
model="--arch gpt2 --layers 4 --hidden 256 --heads 8 --ffn 1024 --vocab 67 --max-seq 64 --data $OUT/tok.bin --seq 64 \
--lr 1e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1"
steps=$(( 6 * KILLS + 6 ))
for n in "${RANKS[@]}"; do
    for mode in $MODES; do
        faults=""
        for k in $(seq 1 "$KILLS"); do faults="$faults${faults:+,}kill@$(( 6 * k )):$(( (k * 7) % n ))"; done
        extra=""
        [ "$mode" = disk ] && extra="--mem-ckpt-every 0"
        rm -rf "$OUT/run-$n-$mode" "$MYRIAD_SHM_DIR"
        ev="$OUT/events-$n-$mode.jsonl"
        rm -f "$ev"
        timeout 1200 "$M" run -n "$n" --max-restarts $(( KILLS + 3 )) --hang-timeout 60 --inject "$faults" --events "$ev" -- \
            train $model --batch $(( 2 * n )) --dp "$n" --steps $steps --save "$OUT/run-$n-$mode" --save-every 4 $extra \
            >"$OUT/run-$n-$mode.out" 2>&1
        rc=$?
        jq -c 'select(.event == "recovery")' "$ev" >"$OUT/recovery-$n-$mode.jsonl"
        /usr/bin/python3 - "$OUT/recovery-$n-$mode.jsonl" "$n" "$mode" "$rc" <<'PY'
import json, statistics, sys
path, n, mode, rc = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rec = [json.loads(l) for l in open(path) if l.strip()]
done = [r for r in rec if r.get("completed", True)]
if not done:
    print("%d ranks %-6s: no completed recovery (exit %d)" % (n, mode, rc)); sys.exit(0)
phases = list(done[0]["phases"])
med = {p: statistics.median(r["phases"][p] for r in done) for p in phases}
tot = statistics.median(r["total_s"] for r in done)
slow = max(phases, key=lambda p: med[p])
print("%d ranks %-6s: %d recoveries, median %.2f s: %s; slowest %s (exit %d)" % (
    n, mode, len(done), tot, ", ".join("%s %.3f" % (p, med[p]) for p in phases), slow, rc))
PY
    done
done
/usr/bin/python3 bench/recovery_project.py "$OUT" "${RANKS[@]}"
