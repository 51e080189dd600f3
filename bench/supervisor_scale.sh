#!/usr/bin/env bash
# bench/supervisor_scale.sh: the supervisor with RANKS simulated ranks (default 10,000) heartbeating
# every PERIOD seconds (default 1), started under a soft open-file limit of 1,024: time for every
# rank to connect, the supervisor's CPU use in the steady state (target: under 10% of one core),
# its CPU per heartbeat, one /metrics scrape at that size, and a rank that falls silent found
# within the hang timeout. Baseline in the same run: the load generator's own CPU, which does the
# mirror image of the supervisor's work (sign and send each heartbeat, where the supervisor
# receives, verifies and books it). Results: bench/supervisor_results.md.
# Usage: bash bench/supervisor_scale.sh [RANKS] [PERIOD] [STEADY_S]
set -u
cd "$(dirname "$0")/.."
RANKS=${1:-10000} PERIOD=${2:-1} STEADY=${3:-30}
HANG=10
STEPS=$(awk -v s="$STEADY" -v p="$PERIOD" 'BEGIN { printf "%d", (s + 25) / p + 10 }')
SILENT_AT=$(awk -v s="$STEADY" -v p="$PERIOD" 'BEGIN { printf "%d", (s + 12) / p }')
M=$(pwd)/bin/myriad
LOAD=$(pwd)/build/hb_load
T=$(mktemp -d /tmp/myriad-supscale-XXXXXX)
pid=0
trap '[ $pid -gt 0 ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
mpicc -O2 -std=gnu11 -Isrc tests/hb_load.c build/libmyriad.a -o "$LOAD" -lcjson -lm -lpthread || exit 1
tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat" 2>/dev/null; }
ev() { jq -c "select(.event == \"$1\")" "$T/ev.jsonl" 2>/dev/null; }
echo "supervisor scale: $RANKS simulated ranks, a heartbeat each every $PERIOD s, soft open-file limit 1024; $(getconf _NPROCESSORS_ONLN) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average $(cut -d' ' -f1-3 /proc/loadavg)"
bash -c "ulimit -Sn 1024 && exec '$M' run -n $RANKS --launcher direct --hang-timeout $HANG --max-restarts 0 --metrics-port 0 \
    --metrics-addr 127.0.0.1 --events '$T/ev.jsonl' --exec -- '$LOAD' --ranks $RANKS --period $PERIOD --steps $STEPS \
    --silence 4321@$SILENT_AT" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1200); do [ -n "$(ev connected)" ] && break; sleep 0.1; done
[ -n "$(ev connected)" ] || { echo "not every rank connected:"; tail -3 "$T/err"; exit 1; }
echo "fd limit: $(ev fd-limit | jq -c '{raised_from, to}'); every rank connected $(ev connected | jq .t) s after the start ($(grep 'ranks connected' "$T/out"))"
gen=$(pgrep -P $pid | head -1)
sleep 5 # steady state: every rank heartbeating
c0=$(cpu $pid) g0=$(cpu "$gen") t0=$(date +%s.%N)
sleep "$STEADY"
c1=$(cpu $pid) g1=$(cpu "$gen") t1=$(date +%s.%N)
port=$(ev metrics | jq -r .port)
scrape=$(curl -s -o "$T/metrics.txt" -w '%{time_total}' "http://127.0.0.1:$port/metrics")
awk -v c0="$c0" -v c1="$c1" -v g0="$g0" -v g1="$g1" -v t0="$t0" -v t1="$t1" -v n="$RANKS" -v p="$PERIOD" 'BEGIN {
    d = t1 - t0; hb = n / p * d
    printf "steady state over %.1f s: supervisor CPU %.2f s = %.1f%% of one core (%.1f us per heartbeat, %d heartbeats/s); load generator %.2f s = %.1f%%; supervisor/generator %.2f\n",
        d, c1 - c0, 100 * (c1 - c0) / d, 1e6 * (c1 - c0) / hb, n / p, g1 - g0, 100 * (g1 - g0) / d, (c1 - c0) / (g1 - g0) }'
echo "one /metrics scrape: $(wc -c <"$T/metrics.txt") bytes, $(grep -c '^myriad_rank_step_seconds{' "$T/metrics.txt") ranks' step times, ${scrape} s"
for _ in $(seq $(( (STEPS * ${PERIOD%.*} + 60) * 10 ))); do [ -n "$(ev heartbeat-timeout)" ] && break; sleep 0.1; done
echo "silent rank: $(ev heartbeat-timeout | jq -c '{rank, step, silent_s, timeout_s}')"
wait $pid
pid=0
echo "finished: $(ev finished | jq -c '{status, steps, wall_s}'); stragglers flagged: $(ev straggler | wc -l)"
