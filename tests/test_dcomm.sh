#!/usr/bin/env bash
# test_dcomm.sh: device-buffer communication (src/parallel/device_comm.h, docs/COMM.md).
#  1. build/tests/test_dcomm (every collective on device buffers against references) through each
#     transport: MPI staged (MYRIAD_DEVICE_GUARD=1), MPI direct on the plain CPU backend, MPI direct
#     under the strict guard with an emulated CUDA-aware MPI (MYRIAD_MPI_CUDA_AWARE=1), flat and
#     hierarchical, and NCCL through the emulation (build/tests/libnccl-emu.so), which also checks
#     the event ordering.
#  2. Under the strict guard a planted host read of device memory faults, and so does the comm
#     layer doing its averaging on the host while MPI is handed device buffers (the CUDA-aware bug).
#  3. NCCL failures: a stopped rank makes the others fail naming it within --comm-timeout (a host
#     wait), or the watchdog end a blocking collective; bad --comm setups get one line.
#  4. Training through the NCCL code path (emulated, strict guard) equals the single-process run
#     with the MPI path's tolerances (tests/py/compare_runs.py): dp 4 with ZeRO 0-3, dp 2 with
#     micro-batches and ZeRO 3, tp 2 with sp, tp 2 x dp 2, pp 2, ep 2; bf16 gradients within bf16
#     rounding; the emulation's log shows NCCL carried each layout's collectives.
#  5. dp 4 with ZeRO 0-3 and bf16 gradients through the CUDA-aware MPI path under the strict guard,
#     against the same oracle.
#  6. bf16 activations through NCCL (tp 2 + sp gathers bf16 rows) against one bf16 process.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch dcomm
mpi_env
if ! command -v mpirun >/dev/null; then echo "skip test_dcomm (mpirun not installed)"; exit 0; fi
P=build/tests/test_dcomm
EMU=$PWD/build/tests/libnccl-emu.so
NCCL="env MYRIAD_NCCL_LIB=$EMU MYRIAD_NCCL_EMU_LOG=$T/emu.log MYRIAD_DEVICE_GUARD=strict"
AWARE="env MYRIAD_DEVICE_GUARD=strict MYRIAD_MPI_CUDA_AWARE=1"

# 1: the program's own ok/FAIL lines, or one FAIL if it died without them
prog() { # NAME NP ENV... -- ARGS...
    local name=$1 np=$2 envs=() ; shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    env "${envs[@]}" timeout 120 $MPI -np "$np" $P "$@" >"$T/p.out" 2>"$T/p.err"
    local rc=$?
    cat "$T/p.out"
    grep -q "^FAIL" "$T/p.out" || [ $rc -eq 0 ] || fail "$name" "exit $rc: $(grep -v '^\[' $T/p.err | tail -3)"
    grep -q "^# transport:" "$T/p.err" && echo "$(grep -m1 '^# transport:' $T/p.err) ($name)"
}
prog staged 3 MYRIAD_DEVICE_GUARD=1 --
prog direct_cpu 2 X=1 --
prog cuda_aware 3 MYRIAD_DEVICE_GUARD=strict MYRIAD_MPI_CUDA_AWARE=1 --
prog cuda_aware_hier 4 MYRIAD_DEVICE_GUARD=strict MYRIAD_MPI_CUDA_AWARE=1 -- --comm-algo hier --ranks-per-node 2
prog nccl 3 MYRIAD_NCCL_LIB=$EMU MYRIAD_DEVICE_GUARD=strict -- --comm nccl
prog nccl_unguarded 4 MYRIAD_NCCL_LIB=$EMU -- --comm nccl

# 2: planted host accesses of device memory under the strict guard
plant() { # NAME MODE ENV...
    local name=$1 mode=$2; shift 2
    env "$@" timeout 60 $MPI -np 2 $P --mode "$mode" >"$T/pl.out" 2>"$T/pl.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "^myriad: host code touched device memory at 0x" "$T/pl.err" &&
        ! grep -q "planted" "$T/pl.out"; then pass "$name"
    else fail "$name" "exit $rc: $(cat $T/pl.out) $(grep -v '^\[' $T/pl.err | tail -2)"; fi
}
plant strict_guard_faults_a_host_read plant-read MYRIAD_DEVICE_GUARD=strict
plant strict_guard_faults_host_averaging_of_mpi_device_buffers plant-comm MYRIAD_DEVICE_GUARD=strict MYRIAD_MPI_CUDA_AWARE=1

# 3: a stopped rank, with the host waiting (the report names it) or not (the watchdog)
stop() { # NAME MODE NEEDLE
    local name=$1 mode=$2 needle=$3
    $NCCL timeout 60 $MPI -np 3 $P --comm nccl --comm-timeout 2 --mode "$mode" >"$T/st.out" 2>"$T/st.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "$needle" "$T/st.err"; then pass "$name"
    else fail "$name" "exit $rc: $(grep -v '^\[' $T/st.err | tail -3)"; fi
}
stop nccl_timeout_names_stopped_rank stop-wait \
    "all_reduce #3 on group 'world' (rank 0 of 3, world rank 0): did not complete within 2 s; ranks not arrived: 2 (world 2, no answer: stopped, dead, or busy outside comm) (NCCL; the communicator was aborted)"
stop nccl_watchdog_ends_hung_blocking_collective stop-run \
    "all_reduce #3 on group 'world' (rank [01] of 3, world rank [01]): did not complete within 2 s (the host was not waiting for it, or was blocked behind it); the NCCL communicator was aborted (watchdog)"

# NCCL's asynchronous error (a broken connection, emulated on every rank's 2nd call) ends the run
# at once, not at the 60 s timeout: in the host wait, and through the watchdog
async() { # NAME MODE NEEDLE
    local name=$1 mode=$2 needle=$3 t0=$SECONDS
    $NCCL MYRIAD_NCCL_EMU_ASYNC_ERROR_AT=2 timeout 50 $MPI -np 2 $P --comm nccl --comm-timeout 60 --mode "$mode" \
        >"$T/as.out" 2>"$T/as.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "$needle" "$T/as.err"; then pass "$name"; echo "# $name: $((SECONDS - t0)) s"
    else fail "$name" "exit $rc: $(grep -v '^\[' $T/as.err | tail -3)"; fi
}
async nccl_async_error_fails_the_wait async-wait \
    "all_reduce #3 on group 'world' (rank [01] of 2, world rank [01]): NCCL reported an asynchronous error: remote process exited or there was a network error: ncclAllReduce: the connection to a peer broke (emulated)"
async nccl_async_error_ends_a_blocking_collective async-run \
    "NCCL reported an asynchronous error: remote process exited or there was a network error: ncclAllReduce: the connection to a peer broke (emulated); the NCCL communicator was aborted (watchdog)"

/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3 >/dev/null
train="--data $T/tok.bin --batch 8 --seq 8 --steps 20 --lr 3e-3 --lr-schedule cosine --warmup 3 --clip 0.5 --threads 1"
base="--init tests/fixtures/gpt2-tiny --data $T/tok.bin --batch 8 --seq 8 --steps 2"
expect_one_rank_error comm_nccl_without_library "--comm nccl: cannot load NCCL from MYRIAD_NCCL_LIB=/nonexistent/libnccl.so.2" \
    env MYRIAD_NCCL_LIB=/nonexistent/libnccl.so.2 $MPI -np 2 bin/myriad train $base --comm nccl
expect_one_rank_error comm_nccl_under_closed_guard "rehearse NCCL under MYRIAD_DEVICE_GUARD=strict" \
    env MYRIAD_NCCL_LIB=$EMU MYRIAD_DEVICE_GUARD=1 $MPI -np 2 bin/myriad train $base --comm nccl
expect_error comm_unknown "--comm" bin/myriad train $base --comm gloo

# 4 + 5: training layouts against the single-process run
declare -A ref_done
reference() { # TAG INIT_FLAGS
    [ -n "${ref_done[$1]:-}" ] && return 0
    bin/myriad train $2 $train --log "$T/ref_$1.jsonl" --save "$T/ref_$1" >/dev/null 2>"$T/err" ||
        { fail "reference_$1" "$(tail -1 $T/err)"; return 1; }
    ref_done[$1]=1
}
# NAME VIA(nccl|aware) TAG INIT NP KINDS FLAGS...: KINDS = the NCCL calls the layout must have made
layout() {
    local name=$1 via=$2 tag=$3 init=$4 np=$5 kinds=$6; shift 6
    reference "$tag" "$init" || return
    rm -rf "$T/run" "$T/run.jsonl" "$T/emu.log"
    local runner=$NCCL comm="--comm nccl" out=""
    [ "$via" = aware ] && runner=$AWARE comm="--comm mpi"
    if $runner timeout 180 $MPI -np "$np" bin/myriad train $init $train $comm "$@" --log "$T/run.jsonl" --save "$T/run" \
            >"$T/out" 2>"$T/err" &&
        out=$(/usr/bin/python3 tests/py/compare_runs.py "$T/ref_$tag.jsonl" "$T/run.jsonl" "$T/ref_$tag" "$T/run"); then
        local first; first=$(head -1 "$T/err")
        case $via in
        nccl) echo "$first" | grep -q ", comm nccl .*(the emulation" || { fail "$name" "first line: $first"; return; } ;;
        aware) echo "$first" | grep -q ", comm mpi (device buffers direct: CUDA-aware)" || { fail "$name" "first line: $first"; return; } ;;
        esac
        for k in $kinds; do
            if ! awk -v k="$k" '{for (i = 2; i < NF; i++) if ($i == k && $(i + 1) > 0) f = 1} END {exit !f}' "$T/emu.log"; then
                fail "$name" "no nccl$k call in the emulation's log: $(head -2 $T/emu.log)"; return
            fi
        done
        pass "$name"; echo "# $name: $out"
    else fail "$name" "${out:-} $(grep 'myriad:' $T/err | head -2)"; fi
}
G="--init tests/fixtures/gpt2-tiny" L="--init tests/fixtures/llama-tiny" E="--init tests/fixtures/moe-top2-capacity-shared"
layout nccl_dp4_zero0_gpt2 nccl gpt2 "$G" 4 "AllReduce" --dp 4 --zero 0
layout nccl_dp4_zero1_llama nccl llama "$L" 4 "ReduceScatter AllGather" --dp 4 --zero 1
layout nccl_dp4_zero2_gpt2 nccl gpt2 "$G" 4 "ReduceScatter AllGather" --dp 4 --zero 2
layout nccl_dp4_zero3_llama nccl llama "$L" 4 "ReduceScatter AllGather" --dp 4 --zero 3
layout nccl_dp2_microbatch2_zero3_gpt2 nccl gpt2 "$G" 2 "ReduceScatter AllGather" --dp 2 --micro-batch 2 --zero 3
layout nccl_tp2_sp_llama nccl llama "$L" 2 "ReduceScatter AllGather" --tp 2 --sp
layout nccl_tp2_dp2_gpt2 nccl gpt2 "$G" 4 "AllReduce" --tp 2 --dp 2
layout nccl_pp2_gpt2 nccl gpt2 "$G" 2 "AllReduce" --pp 2 --micro-batch 1
layout nccl_ep2_moe nccl moe "$E" 2 "Send Recv AllReduce" --ep 2
layout aware_dp4_zero0_gpt2 aware gpt2 "$G" 4 "" --dp 4 --zero 0
layout aware_dp4_zero1_llama aware llama "$L" 4 "" --dp 4 --zero 1
layout aware_dp4_zero2_gpt2 aware gpt2 "$G" 4 "" --dp 4 --zero 2
layout aware_dp4_zero3_llama aware llama "$L" 4 "" --dp 4 --zero 3

# bf16 gradients are lossy by design (NCCL rounds every partial sum): within bf16 rounding of the loss
for via in nccl aware; do
    runner=$NCCL comm="--comm nccl"
    [ $via = aware ] && runner=$AWARE comm="--comm mpi"
    if $runner timeout 120 $MPI -np 4 bin/myriad train $G $train $comm --dp 4 --zero 1 --grad-dtype bf16 \
            --log "$T/bf.jsonl" >/dev/null 2>"$T/err" &&
        /usr/bin/python3 -c "
import json,sys
a=[json.loads(l)['loss'] for l in open('$T/ref_gpt2.jsonl')]; b=[json.loads(l)['loss'] for l in open('$T/bf.jsonl')]
w=max(abs(x-y)/x for x,y in zip(a,b)); print('# $via bf16 gradients: worst rel loss %.2e' % w); sys.exit(0 if len(a)==len(b) and w<1e-3 else 1)"; then
        pass "${via}_dp4_bf16_gradients"
    else fail "${via}_dp4_bf16_gradients" "$(grep 'myriad:' $T/err | head -2)"; fi
done

# bf16 activations through NCCL: tensor-parallel gathers move bf16 rows (ncclBfloat16), against one
# bf16 process (1e-2 per step, as tests/test_device.sh allows tp: partial sums add in another order)
B="--init tests/fixtures/llama-tiny --data tests/fixtures/llama-tiny/tokens.bin --batch 4 --seq 8 --steps 10 --device cpu --dtype bf16 --threads 1"
rm -f "$T/emu.log"
if bin/myriad train $B --log "$T/bf1.jsonl" >/dev/null 2>"$T/err" &&
    $NCCL timeout 120 $MPI -np 2 bin/myriad train $B --tp 2 --sp --comm nccl --log "$T/bf2.jsonl" >/dev/null 2>"$T/err" &&
    awk '{for (i = 2; i < NF; i++) if ($i == "AllGather" && $(i + 1) > 0) f = 1} END {exit !f}' "$T/emu.log" &&
    /usr/bin/python3 -c "
import json,sys
a=[json.loads(l)['loss'] for l in open('$T/bf1.jsonl')]; b=[json.loads(l)['loss'] for l in open('$T/bf2.jsonl')]
w=max(abs(x-y)/x for x,y in zip(a,b)); print('# nccl bf16 tp2 sp: worst rel loss %.2e (tolerance 1e-2)' % w); sys.exit(0 if len(a)==len(b)==10 and w<1e-2 else 1)"; then
    pass nccl_bf16_tp2_sp
else fail nccl_bf16_tp2_sp "$(grep 'myriad:' $T/err | head -2)"; fi
