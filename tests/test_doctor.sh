#!/usr/bin/env bash
# tests/test_doctor.sh: `myriad doctor` and `myriad run --preflight` end to end, on three emulated
# hosts (network namespaces on a bridge, tests/lib.sh ns_up, as in test_launcher.sh), two ranks each.
#   healthy hosts: nothing flagged (but see the note on the intra-host all-reduce below), the
#   table and the JSON agree on 6 ranks / 3 hosts / 3 pairs;
#   host 2's link slowed with tc (netem delay + rate, or tbf rate where the kernel has no netem):
#   `run --preflight --spares 0` names that host, and only it, and refuses to launch;
#   `run --preflight --spares 1` launches on hosts 1 and 3 (the spare) and finishes (the job is
#   the launcher test's heartbeat stub, tests/hb_stub.c).
# Plus bad input (one clear line, non-zero exit). Prints ok/FAIL/skip lines for tests/run.sh.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
. tests/lib.sh
test_scratch doctor
P="myd$$"
trap 'ns_down "$P" 3; rm -rf "$T"' EXIT
keep() { mkdir -p build/test-logs/doctor && cp "$T/$1".* build/test-logs/doctor/ 2>/dev/null; }

# ---- bad input
expect_error doctor_bad_threshold "doctor: a threshold is a fraction between 0 and 1 (0.10) or a percentage (10%), not '10'" "$M" doctor --threshold 10
expect_error doctor_bad_check_name "doctor: unknown option '--threshold-gpu'" "$M" doctor --threshold-gpu 0.2
expect_error doctor_bad_skip "--skip: unknown check 'nvlink'" "$M" doctor --skip gemm,nvlink
expect_error doctor_out_looks_like_an_option "--out --json looks like an option, not a file" "$M" doctor --out --json
expect_error doctor_out_unwritable_before_measuring "--out $T/no/x.json: the directory $T/no does not exist" \
    "$M" doctor --out "$T/no/x.json"
echo '{"not": "a doctor file"}' >"$T/bad.json"
expect_error doctor_bad_baseline "is not the JSON of \`myriad doctor --json\`" "$M" doctor --baseline "$T/bad.json"
expect_error run_doctor_arg_needs_preflight "--doctor-arg and --preflight-timeout need --preflight" \
    "$M" run -n 2 --doctor-arg --reps -- doctor
echo '{"doctor": 1, "setup": {"device": "cuda", "dtype": "bf16", "memory_check": "copy"}, "checks": [{"check": "gemm", "reference": 7e5}]}' >"$T/gpu_base.json"
expect_error doctor_baseline_of_another_device \
    "doctor: --baseline $T/gpu_base.json was measured on cuda (bf16 GEMM, memory copy), this run measures on cpu (fp32, memory triad)" \
    "$M" doctor --device cpu --baseline "$T/gpu_base.json"
expect_error doctor_bad_dtype "doctor: --dtype must be fp32 or bf16, not 'fp16'" "$M" doctor --dtype fp16
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    expect_error doctor_cuda_without_gpu "doctor: --device cuda: " "$M" doctor --device cuda
fi

# ---- the compute checks through the kernel backend, as on a GPU: under the device guard the host
# may not touch device memory, so the GEMM is the backend's matmul on device operands and the
# memory check a device-to-device copy (what a GPU runs: docs/OPERATIONS.md); one rank, no MPI
# launcher needed. The plain CPU run says triad.
if MYRIAD_DEVICE_GUARD=1 timeout 60 "$M" doctor --reps 2 --gemm-n 64 --triad-mb 2 --json >"$T/guard.json" 2>"$T/guard.err" &&
    timeout 60 "$M" doctor --reps 2 --gemm-n 64 --triad-mb 2 --json >"$T/plain.json" 2>>"$T/guard.err" &&
    /usr/bin/python3 - "$T/guard.json" "$T/plain.json" <<'PY' 2>>"$T/guard.err"; then
import json, sys
g, p = (json.load(open(f)) for f in sys.argv[1:3])
assert g["setup"]["device"] == "cpu" and g["setup"]["memory_check"] == "copy" and g["setup"]["gemm_n"] == 64, g["setup"]
assert p["setup"]["memory_check"] == "triad" and p["setup"]["dtype"] == "fp32", p["setup"]
for d in (g, p):
    vals = {c["check"]: c["values"] for c in d["checks"]}
    assert len(vals["gemm"]) == 1 and vals["gemm"][0]["value"] > 0, vals["gemm"]
    assert len(vals["triad"]) == 1 and vals["triad"][0]["value"] > 0, vals["triad"]
PY
    pass doctor_device_path_gemm_and_copy
else
    fail doctor_device_path_gemm_and_copy "$(tail -c 400 "$T/guard.err")"
fi

# ---- inside a Slurm allocation without --hosts: the pre-flight checks every slot of every node of
# the allocation (spares included) through srun, rank r on line r of SLURM_HOSTFILE (dry run: no
# daemons; test_slurm.sh drives the real ones)
if command -v srun >/dev/null; then
    out=$(SLURM_JOB_ID=999 SLURM_JOB_NODELIST='dn[1-3]' "$M" run -n 4 --spares 1 --preflight --dry-run -- train 2>&1)
    if echo "$out" | grep -qx '# preflight SLURM_HOSTFILE (rank 0..5): dn1 dn1 dn2 dn2 dn3 dn3' &&
        echo "$out" | grep -q '^preflight: .*srun --ntasks=6 .*--nodes=3 --distribution=arbitrary --mpi=pmix .* doctor --json' &&
        echo "$out" | grep -qx '# SLURM_HOSTFILE (rank 0..3): dn1 dn1 dn2 dn2'; then
        pass preflight_slurm_allocation_nodes
    else
        fail preflight_slurm_allocation_nodes "$(echo "$out" | head -3 | tr '\n' ' ')"
    fi
    expect_error preflight_slurm_uneven "pre-flight: 3 ranks do not spread evenly over the 2 working nodes of this allocation" \
        env SLURM_JOB_ID=999 SLURM_JOB_NODELIST='dn[1-3]' "$M" run -n 3 --spares 1 --preflight --dry-run -- train
fi

if ! command -v mpirun >/dev/null; then
    echo "skip doctor_namespaces (mpirun is not installed)"
    exit 0
fi

# ---- --baseline FILE on this machine (2 ranks, one host: no cohort verdict, so only the baseline
# judges). The file holds a GEMM reference no CPU reaches (1 PFLOP/s) and a triad reference any
# reaches (1 byte/s): the GEMM is flagged against the baseline, the triad is not; --strict exits 3.
# The run's own --out carries its references (a 2-rank job's, though it has no cohort median).
echo '{"doctor": 1, "checks": [{"check": "gemm", "reference": 1e6}, {"check": "triad", "reference": 1e-9}]}' >"$T/base.json"
timeout 120 "$M" run -n 2 -- doctor --reps 2 --gemm-n 64 --triad-mb 1 --msg-bytes 4096 --baseline "$T/base.json" --strict \
    --out "$T/own.json" >"$T/base.out" 2>"$T/base.err"
rc=$?
if [ $rc -eq 3 ] && [ "$(jq -c '[.flagged[] | [.check, .against]]' "$T/own.json")" = '[["gemm","baseline"]]' ] &&
    grep -q '^flagged .*: GEMM rate of 2 of 2 ranks past the limit; worst rank .: 100% below the baseline' "$T/base.out" &&
    [ "$(jq '[.checks[] | select(.check == "gemm" or .check == "triad") | .reference | numbers] | length' "$T/own.json")" = 2 ] &&
    [ "$(jq '.checks[] | select(.check == "gemm") | .median' "$T/own.json")" = null ]; then
    pass doctor_baseline_file_judges
else
    fail doctor_baseline_file_judges "exit $rc: $(grep -h '^flagged\|myriad:' "$T/base.out" "$T/base.err" | head -3 | tr '\n' ' ')"
fi
STUB=$T/hb_stub
if ! mpicc -O2 -std=gnu11 -Isrc tests/hb_stub.c build/libmyriad.a -o "$STUB" -lcjson -lm -lpthread 2>"$T/cc.err"; then
    echo "FAIL doctor_build_stub ($(head -c 300 "$T/cc.err"))"
    exit 1
fi
if ! ns_up "$P" 3 "$T"; then
    echo "skip doctor_namespaces ($NS_WHY)"
    exit 0
fi
net=$NS_NET
printf '%s slots=2\n%s slots=2\n%s slots=2\n' "$net.11" "$net.12" "$net.13" >"$T/hosts"
# short checks: the test needs the verdict, not the last digit (docs/OPERATIONS.md: noise). The
# all-reduce inside an emulated host is two processes on this machine's shared cores over TCP
# loopback, and it is bimodal here (~25 or ~700 MB/s for a whole run, measured): a real finding
# about this machine, not about a host, so the slowed-link runs skip it (the healthy run keeps it).
# The slowed-link runs judge the link: they skip the per-rank GEMM and triad too (judged in the
# healthy run) and take 4 repetitions (each repetition pays ~1.2 s of bursts through the 20 Mbit/s
# link); 64 KiB messages keep the slowed host ~200x below the median, while the noise rule
# (k = 2) raises the limit to 100x only when the best-to-median scatter of a sample reaches 10x.
DARGS=(--reps 6 --msg-bytes 65536 --triad-mb 12)
DOCTOR_ARGS=(--preflight-timeout 100)
for a in --reps 4 --msg-bytes 65536 --skip allreduce_intra,gemm,triad; do DOCTOR_ARGS+=(--doctor-arg "$a"); done
run() { timeout 240 "$M" run --hb-addr "$net.1" "${MPI_NS[@]}" "$@"; }

# ---- healthy hosts: no flag (the intra-host all-reduce aside); the table and the JSON describe the
# same 6 ranks on 3 hosts, and every host has its intra-host figure
run -n 6 --hosts "$T/hosts" --events "$T/healthy.jsonl" -- doctor "${DARGS[@]}" --out "$T/healthy.json" \
    >"$T/healthy.out" 2>"$T/healthy.err"
rc=$?
if [ $rc -eq 0 ] && ! grep '^flagged' "$T/healthy.out" | grep -qv ': intra-host all-reduce' &&
    [ "$(jq '[.flagged[] | select(.check != "allreduce_intra")] | length' "$T/healthy.json")" = 0 ] &&
    [ "$(jq '.ranks' "$T/healthy.json")" = 6 ] &&
    [ "$(jq -c '[.hosts[].host]' "$T/healthy.json")" = "[\"$net.11\",\"$net.12\",\"$net.13\"]" ] &&
    [ "$(jq '.checks[] | select(.check == "gemm") | .values | length' "$T/healthy.json")" = 6 ] &&
    [ "$(jq '.checks[] | select(.check == "p2p_bw") | .values | length' "$T/healthy.json")" = 3 ] &&
    [ "$(jq '[.checks[] | select(.check == "allreduce_intra") | .values[].value | select(. > 0)] | length' "$T/healthy.json")" = 3 ]; then
    echo "ok doctor_healthy_hosts_not_flagged ($(jq -r '[.checks[] | "\(.check) limit \(.effective_threshold * 100 | floor)%"] | join(", ")' "$T/healthy.json"))"
else
    echo "FAIL doctor_healthy_hosts_not_flagged (exit $rc; $(grep -h '^flagged' "$T/healthy.out" | head -3 | tr '\n' ' '))"
    keep healthy
fi

# ---- slow host 2's link
if ! ns_slow_link "$P" 2 20mbit 5ms; then
    echo "skip doctor_slow_link ($NS_WHY)"
    exit 0
fi

# pre-flight without a spare: the doctor names host 2 and only it; the run is refused, never launched
run -n 6 --hosts "$T/hosts" --preflight "${DOCTOR_ARGS[@]}" --preflight-out "$T/slow.json" --events "$T/refuse.jsonl" \
    --exec -- /bin/true >"$T/refuse.out" 2>"$T/refuse.err"
rc=$?
flagged=$(jq -c '[.flagged[].host] | unique' "$T/slow.json" 2>/dev/null)
if [ "$flagged" = "[\"$net.12\"]" ] && jq -e '.flagged[] | select(.check == "p2p_bw")' "$T/slow.json" >/dev/null; then
    echo "ok doctor_flags_only_the_slowed_host ($NS_SLOW: $(jq -r '[.flagged[] | select(.check == "p2p_bw") | .reason][0]' "$T/slow.json"))"
else
    echo "FAIL doctor_flags_only_the_slowed_host (flagged '$flagged', $NS_SLOW)"
    keep slow; keep refuse
fi
line=$(grep '^myriad: ' "$T/refuse.err" | head -1)
if [ $rc -ne 0 ] && echo "$line" | grep -qF "pre-flight flagged 1 working host and only 0 healthy spares remain (--spares 0)" &&
    echo "$line" | grep -qF "$net.12: p2p bandwidth" && ! grep -q '"event":"launch"' "$T/refuse.jsonl" &&
    [ "$(jq -c 'select(.event == "preflight") | .ok' "$T/refuse.jsonl")" = false ]; then
    echo "ok preflight_refuses_without_a_healthy_spare"
else
    echo "FAIL preflight_refuses_without_a_healthy_spare (exit $rc: $line)"
    keep refuse
fi

# pre-flight with one spare: host 2 is swapped for host 3 before the first launch. The job is the
# launcher test's heartbeat stub, whose hosts the launcher learns from its HELLOs (--start-timeout
# and --max-restarts: an mpirun launch into the namespaces occasionally never starts its ranks,
# and the supervisor relaunches it, as in test_launcher.sh)
mkdir -p "$T/spare"
run -n 4 --hosts "$T/hosts" --spares 1 --preflight "${DOCTOR_ARGS[@]}" --events "$T/spare.jsonl" --start-timeout 20 \
    --max-restarts 2 --exec -- "$STUB" --steps 3 --step-ms 10 --state "$T/spare" >"$T/spare.out" 2>"$T/spare.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(jq -c 'select(.event == "launch") | .hosts' "$T/spare.jsonl" | sort -u)" = "[\"$net.11\",\"$net.13\"]" ] &&
    [ "$(jq -c 'select(.event == "spare-used") | [.lost, .spare, .why]' "$T/spare.jsonl")" = "[\"$net.12\",\"$net.13\",\"preflight\"]" ] &&
    [ "$(jq -c 'select(.event == "preflight") | [.ok, ([.flagged[].host] | unique)]' "$T/spare.jsonl")" = "[true,[\"$net.12\"]]" ] &&
    grep -q "rank 3 step 3" "$T/spare/final.txt"; then
    echo "ok preflight_spares_1_starts_on_the_healthy_hosts"
else
    echo "FAIL preflight_spares_1_starts_on_the_healthy_hosts (exit $rc)"
    keep spare
    tail -5 "$T/spare.err" >&2
fi
