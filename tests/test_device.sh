#!/usr/bin/env bash
# test_device.sh: the device and precision options on the CPU (docs/GPU.md).
#  1. --device cpu --dtype bf16 against PyTorch CPU autocast bf16 (scripts/make_torch_fixture.py
#     wrote expected_bf16.json) on tiny GPT-2 and Llama: per-step losses over 10 AdamW steps
#     within 2e-2 relative, and not the fp32 run's bits (the emulation is live).
#  2. Under MYRIAD_DEVICE_GUARD=1 (device memory closed to host code, MPI staged through pinned
#     buffers, checkpoints through host mirrors: what a GPU needs) a bf16 run gives the same bits
#     as without it; a checkpoint written under the guard resumes without it, bit for bit.
#  3. The parallel layouts in bf16 under the guard train like one bf16 process (dp 2 with ZeRO 1
#     and 3, tp 2 with sp, pp 2, ep 2): per-step losses within 2e-3 relative (tp: 1e-2).
#  4. Bad input: --device cuda without a GPU (or CUDA), an unknown --device or --dtype, a model
#     that does not fit in device memory: one line, exit 1, no log or model written.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch device
mpi_env
PY=/usr/bin/python3
flags() { $PY -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))['flags']))" "$1/expected.json"; }

# compare LOG with REF (a jsonl log, or a fixture's expected*.json) within TOL relative per step;
# with NOT (a jsonl log), also require some step to differ from it
compare() { # LOG REF TOL [NOT]
    $PY - "$@" <<'EOF'
import json, sys
def losses(p):
    if p.endswith(".jsonl"):
        return [json.loads(l)["loss"] for l in open(p)]
    return json.load(open(p))["losses"]
got, ref, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref)) if got else 1
ok = len(got) == len(ref) and worst <= tol
if len(sys.argv) > 4:
    other = losses(sys.argv[4])
    ok = ok and got != other
print(f"# {sys.argv[1].split('/')[-1]}: {len(got)} steps, worst relative difference {worst:.2e} (tolerance {tol:g})")
sys.exit(0 if ok else 1)
EOF
}

# the same losses and gradient norms, bit for bit (the logs' timings differ)
same_steps() { # A.jsonl B.jsonl
    $PY -c "
import json, sys
f = lambda p: [(r['step'], r['loss'], r['grad_norm']) for r in map(json.loads, open(p))]
sys.exit(0 if f(sys.argv[1]) == f(sys.argv[2]) and f(sys.argv[1]) else 1)" "$1" "$2"
}

# 1 + 2: bf16 fixtures against PyTorch autocast; the guard changes no bits; checkpoints through it
for fam in gpt2-tiny llama-tiny; do
    F=tests/fixtures/$fam
    run="$M train --init $F --data $F/tokens.bin $(flags $F) --device cpu --threads 1"
    if $run --dtype fp32 --log "$T/$fam-fp32.jsonl" >/dev/null 2>"$T/err" &&
        $run --dtype bf16 --log "$T/$fam-bf16.jsonl" >/dev/null 2>"$T/$fam-bf16.err" &&
        compare "$T/$fam-fp32.jsonl" "$F/expected.json" 1e-5 &&
        compare "$T/$fam-bf16.jsonl" "$F/expected_bf16.json" 2e-2 "$T/$fam-fp32.jsonl"; then
        pass "bf16_matches_torch_autocast_$fam"
    else fail "bf16_matches_torch_autocast_$fam" "$(tail -2 $T/err)"; fi
    if MYRIAD_DEVICE_GUARD=1 $run --dtype bf16 --log "$T/$fam-guard.jsonl" >/dev/null 2>"$T/err" &&
        same_steps "$T/$fam-guard.jsonl" "$T/$fam-bf16.jsonl"; then
        pass "guard_changes_no_bits_$fam"
    else fail "guard_changes_no_bits_$fam" "$(tail -2 $T/err)"; fi
done

# the memory planned before allocating is what the run then holds at peak (within 10%; transients
# such as MoE buffers are not planned)
if $PY - "$T/llama-tiny-bf16.err" "$T/llama-tiny-bf16.jsonl" <<'EOF'
import json, re, sys
planned = float(re.search(r"memory planned per rank: .*?device (?:allocations )?([0-9.]+) MiB", open(sys.argv[1]).read()).group(1))
peak = max(json.loads(l)["mem_peak_gib"] for l in open(sys.argv[2])) * 1024
print(f"# planned {planned:.2f} MiB, peak {peak:.2f} MiB")
sys.exit(0 if planned <= peak * 1.001 and peak <= planned * 1.1 else 1)
EOF
then pass "planned_memory_matches_peak"; else fail "planned_memory_matches_peak"; fi

# a checkpoint saved through the device path (the guard: host mirrors) resumes on the plain CPU path
F=tests/fixtures/llama-tiny
run="$M train --init $F --data $F/tokens.bin $(flags $F) --device cpu --dtype bf16 --threads 1"
if MYRIAD_DEVICE_GUARD=1 $run --save "$T/ck" --save-every 5 --stop-after 5 --log "$T/first.jsonl" >/dev/null 2>"$T/err" &&
    $run --save "$T/ck" --resume auto --log "$T/second.jsonl" >/dev/null 2>"$T/err" &&
    cat "$T/first.jsonl" "$T/second.jsonl" >"$T/both.jsonl" && same_steps "$T/both.jsonl" "$T/llama-tiny-bf16.jsonl"; then pass "checkpoint_from_device_path_resumes_bit_exact"
else fail "checkpoint_from_device_path_resumes_bit_exact" "$(tail -2 $T/err)"; fi

# 3: parallel layouts in bf16 under the guard against one bf16 process
if command -v mpirun >/dev/null; then
    # tolerance first: tensor parallelism sums fp32 partial products in another order before they
    # are rounded to bf16, which flips roundings; the other layouts compute the same rows alike
    for layout in "2e-3 2 --dp 2 --zero 1" "2e-3 2 --dp 2 --zero 3" "1e-2 2 --tp 2 --sp" "2e-3 2 --pp 2 --micro-batch 1"; do
        tol=${layout%% *}; layout=${layout#* }
        np=${layout%% *}; lf=${layout#* }
        name="bf16_guarded_$(echo "$lf" | tr -d ' -')"
        if MYRIAD_DEVICE_GUARD=1 timeout 120 $MPI -np $np $run $lf --log "$T/par.jsonl" >/dev/null 2>"$T/err" &&
            compare "$T/par.jsonl" "$T/llama-tiny-bf16.jsonl" $tol; then pass "$name"
        else fail "$name" "$(grep -v '^\[' $T/err | tail -2)"; fi
    done
    F=tests/fixtures/moe-top2-capacity-shared
    moe="$M train --init $F --data tests/fixtures/llama-tiny/tokens.bin --batch 4 --seq 4 --steps 4 --no-shuffle --device cpu --dtype bf16 --threads 1"
    if $moe --log "$T/moe1.jsonl" >/dev/null 2>"$T/err" &&
        MYRIAD_DEVICE_GUARD=1 timeout 120 $MPI -np 2 $moe --ep 2 --log "$T/moe2.jsonl" >/dev/null 2>"$T/err" &&
        compare "$T/moe2.jsonl" "$T/moe1.jsonl" 2e-3; then pass "bf16_guarded_ep2"
    else fail "bf16_guarded_ep2" "$(grep -v '^\[' $T/err | tail -2)"; fi
else
    echo "skip bf16_guarded_layouts (mpirun not installed)"
fi

# 4: bad input: one line, exit 1, nothing written
F=tests/fixtures/gpt2-tiny
base="$M train --init $F --data $F/tokens.bin --batch 2 --seq 8 --steps 2 --log $T/bad.jsonl --save $T/bad"
nothing_written() { [ ! -e "$T/bad.jsonl" ] && [ ! -e "$T/bad" ]; }
check_bad() { # NAME NEEDLE [ENV=...] CMD...
    local name=$1 needle=$2; shift 2
    expect_error "$name" "$needle" "$@"
    nothing_written || fail "${name}_wrote_nothing"
    [ "$(grep -c '^myriad: ' "$T/err")" -eq 1 ] || fail "${name}_one_line" "$(cat $T/err)"
}
if $M train --help | grep -q -- "--device cpu|cuda"; then pass "help_names_device_and_dtype"; else fail "help_names_device_and_dtype"; fi
if ! $M train --init $F --data $F/tokens.bin --batch 2 --seq 8 --steps 1 --device cuda >/dev/null 2>"$T/probe" &&
    grep -q "^myriad: --device cuda: " "$T/probe"; then
    check_bad device_cuda_without_gpu "--device cuda: " $base --device cuda
else
    echo "skip device_cuda_without_gpu (a GPU is visible)"
fi
check_bad device_unknown "unknown --device 'tpu' (use cpu or cuda)" $base --device tpu
check_bad dtype_unknown "unknown --dtype 'fp16' (use fp32 or bf16)" $base --dtype fp16
check_bad model_does_not_fit "bytes) is free per rank" env MYRIAD_TEST_DEVICE_FREE=100000 $base --device cpu
grep -q "the run needs .* GiB ([0-9]* bytes) of cpu memory per rank (parameters .* activations .*) but 0.00 GiB (100000 bytes) is free per rank on .*: \(it would fit\|no data-parallel size fits\)" \
    "$T/err" && pass "does_not_fit_names_bytes_and_fix" || fail "does_not_fit_names_bytes_and_fix" "$(cat $T/err)"
# the first line of a run names the device, its memory and the dtype
$M train --init $F --data $F/tokens.bin --batch 2 --seq 8 --steps 1 --device cpu >/dev/null 2>"$T/err"
head -1 "$T/err" | grep -q "^myriad train: device cpu: .*, [0-9.]* GiB (.* GiB free), fp32 activations" &&
    pass "first_line_names_device" || fail "first_line_names_device" "$(head -1 $T/err)"
