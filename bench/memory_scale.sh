#!/usr/bin/env bash
# bench/memory_scale.sh: peak RSS per rank as ranks are added (#25), on a 0.8B model (gpt2-774m):
# 1 process; 2 and 4 ranks at ZeRO 0, 1 and 3; tp 2 x pp 2 on 4 ranks. For each: the per-rank
# figure printed at start (the plan), the measured peak RSS of the largest rank, their ratio, and
# the peak against the single process's peak measured in the same run. A layout that does not fit
# this machine is refused at start with its per-rank figures (shown as such).
# Usage: bash bench/memory_scale.sh [PRESET] [STEPS]   (defaults gpt2-774m, 1)
set -uo pipefail
cd "$(dirname "$0")/.."
preset=${1:-gpt2-774m}
steps=${2:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
W=$(mktemp -d /tmp/myriad-memscale-XXXXXX); trap 'rm -rf "$W"' EXIT
/usr/bin/python3 bench/make_tokens.py "$W/tok.bin" 20000 50257
common="--preset $preset --data $W/tok.bin --batch 4 --seq 32 --steps $steps --peak-tflops 1"
echo "$preset, batch 4 x 32, $steps step(s), $(nproc) cores, $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo), commit $(git rev-parse --short HEAD 2>/dev/null), $(date -u +%F)"
echo
echo "| layout | ranks | planned MiB per rank | peak RSS MiB (largest rank) | RSS / planned (worst rank) | peak / 1-process peak |"
echo "|---|---|---|---|---|---|"
base=""
run() { # LABEL NP FLAGS...
    local label=$1 np=$2; shift 2
    local cmd=(bin/myriad train)
    [ "$np" -gt 1 ] && cmd=(mpirun --oversubscribe --bind-to none --mca btl self,vader -np "$np" bin/myriad train)
    /usr/bin/time -f "%M" -o "$W/time" "${cmd[@]}" $common "$@" >"$W/out" 2>"$W/err"
    local rc=$?
    local planned; planned=$(grep -o 'memory planned per rank: [0-9.]*' "$W/err" | head -1 | awk '{print $5}')
    if [ $rc -ne 0 ]; then
        local why; why=$(grep -o 'the run needs [0-9.]* GiB' "$W/err" | head -1)
        echo "| $label | $np | ${planned:-${why#the run needs }} | refused: ${why:-$(tail -1 "$W/err" | head -c 120)} | | |"
        return
    fi
    local peak worst
    if [ "$np" -gt 1 ]; then
        peak=$(awk '/RSS\/planned/{t=1; next} t && /^ +[0-9]+ /{print $(NF-1)}' "$W/out" | sort -g | tail -1)
        worst=$(awk '/RSS\/planned/{t=1; next} t && /^ +[0-9]+ /{print $NF}' "$W/out" | sort -g | tail -1)
    else
        peak=$(grep -o 'peak RSS [0-9.]*' "$W/out" | awk '{print $3}')
        worst=$(grep -o '= [0-9.]* x planned' "$W/out" | awk '{print $2}')
        base=$peak
    fi
    local rel; rel=$(awk -v p="$peak" -v b="${base:-0}" 'BEGIN{if (b > 0) printf "%.3f", p / b; else print "-"}')
    echo "| $label | $np | $planned | $peak | $worst | $rel |"
}
run "1 process" 1
for n in 2 4; do
    for z in 0 1 3; do run "dp $n, ZeRO $z" $n --zero $z; done
done
run "tp 2 x pp 2" 4 --tp 2 --pp 2
