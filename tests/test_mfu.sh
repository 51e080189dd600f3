#!/usr/bin/env bash
# test_mfu.sh: the MFU denominator of a CPU run (src/train/mfu_peak.c, src/kernels/cpu/cpu_peak*.c):
# measured until stable and cached per machine, reused by the next run, recorded by `bench sgemm`,
# said on the first line; one figure per step in the console, the log, Prometheus and the report;
# and a denominator measured too low (a cache holding 0.001 GFLOP/s stands in for a start-up
# measurement disturbed by other jobs) raised to the step's own rate, so MFU never reads above 100%.
# No assertion on how fast anything ran: only on what the run says and how its figures agree.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
test_scratch mfu
python3 - "$T/tok.bin" <<'EOF'
import struct, sys
n = 4000
hdr = [20240520, 1, n] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *hdr) + struct.pack(f"<{n}H", *[(i * 7 + i // 13) % 67 for i in range(n)]))
EOF
model="--arch gpt2 --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 67 --max-seq 32 --data $T/tok.bin --batch 4 --seq 32 --lr 1e-3 --threads 1"
export MYRIAD_CACHE_DIR=$T/cache

# 1. no cache: measured now, said on the first line, cached
$M train $model --steps 4 --log "$T/a.jsonl" >"$T/a.out" 2>"$T/a.err"; rc=$?
first=$(head -1 "$T/a.err")
if [ $rc -eq 0 ] && echo "$first" | grep -q '^myriad train: device cpu: .* | MFU denominator [0-9.]* GFLOP/s x 1 device: measured now at 1 threads (best of [0-9]* 1024^3 GEMMs' &&
    echo "$first" | grep -qF "cached in $T/cache/cpu_peak.tsv" && grep -q $'| 1 threads | .*\tmyriad train start-up\t' "$T/cache/cpu_peak.tsv"
then pass measured_said_and_cached; else fail measured_said_and_cached "rc=$rc $first"; fi

# 2. the next run divides by the cached figure, and says so
$M train $model --steps 4 --log "$T/b.jsonl" >"$T/b.out" 2>"$T/b.err"
cached=$(cut -f2 "$T/cache/cpu_peak.tsv")
first=$(head -1 "$T/b.err")
if echo "$first" | grep -qF "MFU denominator $cached GFLOP/s x 1 device: this machine's best sgemm at 1 threads, cached (myriad train start-up, " &&
    ! grep -q 'measured now' "$T/b.err"; then pass cached_reused
else fail cached_reused "cache $cached: $first"; fi

# one figure: every step's MFU x denominator x time is the step's model FLOPs (the same for every
# step), the denominator is the cache's, and the console shows the log's MFU
check_log() { # LOG ERR PEAK_GFLOPS(or "") -> prints what is wrong
    python3 - "$@" <<'EOF'
import json, re, sys
log, err, peak = sys.argv[1], sys.argv[2], sys.argv[3]
steps = [json.loads(l) for l in open(log)]
bad = []
den = None
flops = []
for s in steps:
    if "mfu_peak" in s: den = s["mfu_peak"]["flops"]
    if den is None: bad.append(f"step {s['step']}: no mfu_peak before it")
    if s["mfu"] > 1.0: bad.append(f"step {s['step']}: mfu {s['mfu']} > 1")
    flops.append(s["mfu"] * den * s["ms"] / 1e3)
if "mfu_peak" not in steps[0]: bad.append("the first step has no mfu_peak")
if peak and abs(steps[0]["mfu_peak"]["flops"] / 1e9 - float(peak)) > 0.051: bad.append(f"denominator {steps[0]['mfu_peak']} vs cache {peak}")
if max(flops) > min(flops) * 1.002: bad.append(f"model FLOPs per step differ: {min(flops)} .. {max(flops)}")
console = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^step (\d+)/\d+ .*\| MFU ([0-9.]+)%", open(err).read(), re.M)}
for s in steps:
    if s["step"] in console and abs(console[s["step"]] - 100 * s["mfu"]) > 0.051: bad.append(f"step {s['step']}: console {console[s['step']]}% vs log {s['mfu']}")
    if s["step"] in console and console[s["step"]] > 100: bad.append(f"step {s['step']}: console above 100%")
if not console: bad.append("no console step lines")
print("; ".join(bad))
EOF
}
why=$(check_log "$T/b.jsonl" "$T/b.err" "$cached")
if [ -z "$why" ]; then pass one_denominator_console_and_log; else fail one_denominator_console_and_log "$why"; fi

# 3. the report shows the log's figures and names the denominator
$M report "$T/b.jsonl" -o "$T/b.html" >/dev/null 2>"$T/rep.err"
why=$(python3 - "$T/b.jsonl" "$T/b.html" <<'EOF'
import html, json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
page = open(sys.argv[2]).read()
bad = []
m = re.search(r"mean MFU<b>([0-9.eE+-]+)%</b>", page)
mean = sum(s["mfu"] for s in steps) / len(steps)
if not m or abs(float(m.group(1)) - 100 * mean) > max(0.0051 * 100 * mean, 1e-9): bad.append(f"card {m and m.group(1)} vs mean {100 * mean}")
if "MFU denominator" not in page: bad.append("no MFU denominator in the configuration")
print("; ".join(bad))
EOF
)
if [ -z "$why" ]; then pass report_same_figures; else fail report_same_figures "$why"; fi

# 4. a denominator measured far too low: raised to the step's rate, said once, cached; never > 100%
key=$(cut -f1 "$T/cache/cpu_peak.tsv")
printf '%s\t0.001\tmyriad train start-up\t2020-01-01 00:00\n' "$key" >"$T/cache/cpu_peak.tsv"
$M train $model --steps 6 --log "$T/c.jsonl" >"$T/c.out" 2>"$T/c.err"; rc=$?
why=$(check_log "$T/c.jsonl" "$T/c.err" "")
raised=$(cut -f2 "$T/cache/cpu_peak.tsv")
if [ $rc -eq 0 ] && [ -z "$why" ] && grep -q '^myriad train: step 1 did .* GFLOP/s of model FLOPs per device, more than the MFU denominator 0.0 GFLOP/s .*raised' "$T/c.err" &&
    python3 -c "import sys; sys.exit(0 if float('$raised') > 0.001 else 1)" &&
    grep -q '"mfu_peak": {"flops": [0-9.e+]*, "source": "raised to a step' "$T/c.jsonl"
then pass low_denominator_raised_never_above_100
else fail low_denominator_raised_never_above_100 "rc=$rc $why cache=$raised $(grep 'did ' "$T/c.err" | head -1)"; fi

# 5. bench sgemm records the best it saw, which the next run uses; a lower figure never replaces a higher one
rm -f "$T/cache/cpu_peak.tsv"
$M bench sgemm --threads 1 --reps 1 --square-only >"$T/s.out" 2>&1
peak=$(sed -n 's/^peak \([0-9.]*\) GFLOP\/s/\1/p' "$T/s.out")
$M train $model --steps 2 >"$T/d.out" 2>"$T/d.err"
if grep -q "^cached in $T/cache/cpu_peak.tsv as the MFU denominator of myriad train at 1 threads" "$T/s.out" &&
    head -1 "$T/d.err" | grep -qF "MFU denominator $peak GFLOP/s x 1 device: this machine's best sgemm at 1 threads, cached (bench sgemm, "
then pass bench_sgemm_feeds_train; else fail bench_sgemm_feeds_train "peak=$peak $(tail -1 "$T/s.out") | $(head -1 "$T/d.err")"; fi
printf '%s\t99999.0\tbench sgemm\t2020-01-01 00:00\n' "$key" >"$T/cache/cpu_peak.tsv"
$M bench sgemm --threads 1 --reps 1 --square-only >"$T/s2.out" 2>&1
if grep -q "stays 99999.0 GFLOP/s (bench sgemm, 2020-01-01 00:00" "$T/s2.out" && [ "$(cut -f2 "$T/cache/cpu_peak.tsv")" = 99999.0 ]
then pass cache_keeps_the_best; else fail cache_keeps_the_best "$(tail -1 "$T/s2.out")"; fi

# 6. --peak-tflops is the user's: used as given, said so, never raised
$M train $model --steps 2 --peak-tflops 0.000001 --log "$T/e.jsonl" >"$T/e.out" 2>"$T/e.err"
if head -1 "$T/e.err" | grep -q "MFU denominator 0.001 GFLOP/s x 1 device: given by --peak-tflops$" &&
    ! grep -q 'raised' "$T/e.err" && grep -q '"source": "--peak-tflops"' "$T/e.jsonl"; then pass peak_tflops_as_given; else fail peak_tflops_as_given "$(head -1 "$T/e.err")"; fi
