#!/usr/bin/env bash
# tests/test_metrics.sh: `myriad run --metrics-port` against real Prometheus tools (Debian's
# prometheus package): a 2-rank training job serves /metrics on a free loopback port;
#   - the exposition passes `promtool check metrics` with no complaint (format and naming
#     conventions), and holds every metric docs/OPERATIONS.md lists;
#   - a Prometheus server started here (loopback, a free port, its own data directory, stopped by
#     pid) scrapes it: the target is up, and the step and loss it scraped in one scrape equal
#     rank 0's training log for that step (the oracle: the trainer's own --log);
#   - bad --metrics-* values are refused with one line.
# Skipped with the reason when prometheus/promtool are not installed.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
. tests/lib.sh
test_scratch metrics
job=0 prom=0
cleanup() {
    [ "$prom" -gt 0 ] && kill "$prom" 2>/dev/null && wait "$prom" 2>/dev/null
    [ "$job" -gt 0 ] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

expect_error metrics_bad_port "--metrics-port 70000 is out of range" "$M" run -n 1 --metrics-port 70000 --exec -- /bin/true
expect_error metrics_bad_addr "--metrics-addr 'nowhere' is not an IPv4 address" "$M" run -n 1 --metrics-port 0 \
    --metrics-addr nowhere --exec -- /bin/true
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    echo "skip metrics_promtool_and_prometheus_scrape (promtool/prometheus not installed: apt-get install prometheus)"
    exit 0
fi
if ! command -v mpirun >/dev/null; then echo "skip metrics_promtool_and_prometheus_scrape (mpirun is not installed)"; exit 0; fi

/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3 >/dev/null
# a job that runs until this test stops it (SIGTERM), ~10 ms steps
"$M" run -n 2 --metrics-port 0 --metrics-addr 127.0.0.1 --events "$T/ev.jsonl" -- train --arch gpt2 --layers 2 --hidden 32 \
    --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data "$T/tok.bin" --batch 8 --seq 16 --lr 3e-3 --threads 1 --peak-tflops 1 \
    --dp 2 --steps 1000000 --log "$T/train.jsonl" --save "$T/run" >"$T/job.out" 2>&1 &
job=$!
port=
for _ in $(seq 300); do
    port=$(jq -r 'select(.event == "metrics") | .port' "$T/ev.jsonl" 2>/dev/null)
    [ -n "$port" ] && [ "$(jq -c 'select(.event == "connected")' "$T/ev.jsonl" 2>/dev/null | wc -l)" -ge 1 ] && break
    sleep 0.1
done
sleep 1 # a few steps, so every metric has a value
curl -s --max-time 10 "http://127.0.0.1:$port/metrics" >"$T/metrics.txt"
lint=$(promtool check metrics <"$T/metrics.txt" 2>&1)
lint_rc=$?
missing=""
for name in myriad_step myriad_job_step myriad_loss myriad_tokens_per_second myriad_model_flops_utilization_ratio \
    myriad_goodput_ratio myriad_restarts_total 'myriad_failures_total{kind="hang"}' myriad_stragglers_total \
    myriad_step_duration_seconds_bucket myriad_step_duration_seconds_count myriad_checkpoint_seconds_total \
    myriad_memory_checkpoint_age_seconds 'myriad_rank_step_seconds{rank="1"' process_cpu_seconds_total; do
    grep -qF "$name" "$T/metrics.txt" || missing="$missing $name"
done
if [ -n "$port" ] && [ -s "$T/metrics.txt" ] && [ $lint_rc -eq 0 ] && [ -z "$lint" ] && [ -z "$missing" ]; then
    pass "metrics_promtool_clean ($(grep -c '^# TYPE' "$T/metrics.txt") metric families)"
else
    fail metrics_promtool_clean "port '$port', promtool rc $lint_rc: $(echo "$lint" | head -3); missing:$missing"
fi

# a real Prometheus server scraping the job every second
mkdir -p "$T/prom"
cat >"$T/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: myriad
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF
prometheus --config.file="$T/prom/prometheus.yml" --storage.tsdb.path="$T/prom/data" --web.listen-address=127.0.0.1:0 \
    >"$T/prom/log" 2>&1 &
prom=$!
api=
for _ in $(seq 600); do
    api=$(grep -o 'msg="Listening on" address=127.0.0.1:[0-9]*' "$T/prom/log" | head -1 | sed 's/.*address=//')
    [ -n "$api" ] && break
    sleep 0.1
done
step="" ts="" loss="" mfu="" health=""
for _ in $(seq 120); do
    [ -n "$api" ] || break
    q=$(curl -s --max-time 5 "http://$api/api/v1/query?query=myriad_step")
    step=$(echo "$q" | jq -r '.data.result[0].value[1] // empty' 2>/dev/null)
    ts=$(echo "$q" | jq -r '.data.result[0].value[0] // empty' 2>/dev/null)
    [ -n "$step" ] && [ "$step" != "0" ] && break
    sleep 0.5
done
if [ -n "$step" ]; then
    # the sample of the same scrape: an instant query at the scrape's timestamp
    t=$(curl -s --max-time 5 "http://$api/api/v1/query?query=timestamp(myriad_step)" | jq -r '.data.result[0].value[1]')
    step=$(curl -s --max-time 5 "http://$api/api/v1/query?query=myriad_step&time=$t" | jq -r '.data.result[0].value[1]')
    loss=$(curl -s --max-time 5 "http://$api/api/v1/query?query=myriad_loss&time=$t" | jq -r '.data.result[0].value[1]')
    mfu=$(curl -s --max-time 5 "http://$api/api/v1/query?query=myriad_model_flops_utilization_ratio&time=$t" | jq -r '.data.result[0].value[1]')
    health=$(curl -s --max-time 5 "http://$api/api/v1/targets" | jq -r '.data.activeTargets[0].health')
fi
kill "$prom" 2>/dev/null && wait "$prom" 2>/dev/null
prom=0
kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null
job=0
# the training log and the launcher both count completed steps from 1
logged=$(jq -r --argjson s "${step:-0}" 'select(.step == $s) | .loss' "$T/train.jsonl" 2>/dev/null | tail -1)
if [ -n "$step" ] && [ "$health" = "up" ] && [ -n "$logged" ] &&
    /usr/bin/python3 -c "import sys; sys.exit(float(sys.argv[1]) != float(sys.argv[2]))" "$loss" "$logged"; then
    pass "metrics_prometheus_scrape_equals_log (step $step, loss $loss scraped; log: $logged)"
else
    fail metrics_prometheus_scrape_equals_log "api '$api', health '$health', scraped step '$step' loss '$loss', log '$logged'"
    tail -3 "$T/prom/log" >&2
fi
# MFU: the same figure in Prometheus as in the log (one computation per step, mfu_peak.c)
logged_mfu=$(jq -r --argjson s "${step:-0}" 'select(.step == $s) | .mfu' "$T/train.jsonl" 2>/dev/null | tail -1)
if [ -n "$logged_mfu" ] && /usr/bin/python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (b > 0 and abs(a - b) <= 1e-5 * b))" "$mfu" "$logged_mfu"; then
    pass "metrics_mfu_equals_log (step $step: $mfu)"
else
    fail metrics_mfu_equals_log "scraped step '$step' mfu '$mfu', log '$logged_mfu'"
fi
