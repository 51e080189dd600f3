#!/usr/bin/env bash
# tests/test_comm.sh: the comm layer under mpirun. Runs build/tests/test_comm (every collective
# against a sequential reference) at 2, 3, 4 and 8 ranks with MPI's algorithms, and with the
# hierarchical all-reduce on emulated nodes (4 and 8 ranks at 2 per node, 6 at 3 per node);
# a rank that stops (SIGSTOP) or never joins must be named by the others within --comm-timeout
# and the job must exit non-zero; `myriad bench comm` must validate every row; `myriad run`
# must fail with one clear line without mpirun, and forward exit codes and SIGTERM.
# Prints ok/FAIL/skip lines for tests/run.sh.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
T=build/tests/test_comm
out=build/test-logs/comm.sh.d
mkdir -p "$out"
if ! command -v mpirun >/dev/null; then
    echo "skip test_comm_mpi (mpirun is not installed)"
    exit 0
fi
# shared memory only, no core binding: ranks outnumber the 2 cores
MPI="mpirun --oversubscribe --bind-to none --mca btl self,vader"

# run NAME NP ARGS...: the program's own ok/FAIL lines are passed through; a crash is a FAIL
run() {
    local name=$1 np=$2
    shift 2
    timeout 90 $MPI -np "$np" $T "$@" >"$out/$name.out" 2>"$out/$name.err"
    local rc=$?
    cat "$out/$name.out"
    if [ $rc -ne 0 ] && ! grep -q '^FAIL' "$out/$name.out"; then
        echo "FAIL $name (exit $rc)"
        tail -n 5 "$out/$name.err" >&2
    fi
}

for np in 2 3 4 8; do run "np$np" "$np"; done
run hier_np4 4 --comm-algo hier --ranks-per-node 2
run hier_np8 8 --comm-algo hier --ranks-per-node 2
run hier_np6 6 --comm-algo hier --ranks-per-node 3
# a large fp32 reduce-scatter goes to MPI in pieces (comm_mpi_ops.c): pieces of 100 elements per
# rank make the tests' 333-element chunks four pieces, the last one short
MYRIAD_RS_PIECE_FLOATS=100 run pieces_np3 3
MYRIAD_RS_PIECE_FLOATS=100 run pieces_np4 4

# A hanging collective: the last rank stops (SIGSTOP) or stays busy without joining.
hang() {
    local name=$1 np=$2 mode=$3 expect=$4
    timeout 60 $MPI -np "$np" $T --hang "$mode" --comm-timeout 2 >"$out/$name.out" 2>"$out/$name.err"
    local rc=$?
    local last=$((np - 1))
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "not complete within 2 s; ranks not arrived:.* $last (world $last, $expect" "$out/$name.err"; then
        echo "ok $name"
    else
        echo "FAIL $name (exit $rc; expected a report naming rank $last)"
        tail -n 5 "$out/$name.err" >&2
    fi
}
hang timeout_names_stopped_rank 4 stop "no answer"
hang timeout_names_late_rank 3 late "still at #1"
timeout 60 $MPI -np 2 $T --hang p2p --comm-timeout 2 >"$out/p2p.out" 2>"$out/p2p.err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "recv (peer rank 1) on group 'world' (rank 0 of 2, world rank 0): did not complete within 2 s; peer rank 1 (world rank 1) is alive (at collective #1 of this group) but has not posted the matching send" "$out/p2p.err"; then
    echo "ok timeout_names_silent_sender"
else
    echo "FAIL timeout_names_silent_sender (exit $rc)"
    tail -n 5 "$out/p2p.err" >&2
fi

# bench comm: every collective, both dtypes, checked; and the hierarchical all-reduce
bench() {
    local name=$1 np=$2
    shift 2
    timeout 60 $MPI -np "$np" bin/myriad bench comm -n 2 -w 1 "$@" >"$out/$name.out" 2>"$out/$name.err"
    local rc=$?
    local rows
    rows=$(grep -c '^ ' "$out/$name.out")
    if [ $rc -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$out/$name.out" && [ "$rows" -gt 0 ]; then
        echo "ok $name ($rows rows)"
    else
        echo "FAIL $name (exit $rc)"
        tail -n 5 "$out/$name.err" >&2
    fi
}
bench bench_comm_all_f32_np3 3 -c all -b 4 -e 4K -f 8 --op all
bench bench_comm_all_bf16_np3 3 -c all -b 2 -e 4K -f 8 -d bfloat16
bench bench_comm_hier_vs_mpi_np4 4 -c all_reduce -b 8 -e 64K -f 16 --algo mpi,hier --ranks-per-node 2 --op all
bench bench_comm_hier_bf16_np4 4 -c all_reduce -b 8 -e 64K -f 16 --algo hier --ranks-per-node 2 -d bf16

# myriad run
M=$(pwd)/bin/myriad
err=$(env PATH=/nonexistent "$M" run -n 2 -- bench comm 2>&1 >/dev/null)
rc=$?
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == *"mpirun not found"* ]]; then
    echo "ok run_without_mpirun_one_line_error"
else
    echo "FAIL run_without_mpirun_one_line_error (exit $rc: $err)"
fi
if "$M" run -n 2 -- bench comm -b 64 -e 64 -n 1 -w 0 >"$out/run_ok.out" 2>&1 && grep -q '0 OK' "$out/run_ok.out"; then
    echo "ok run_launches_ranks"
else
    echo "FAIL run_launches_ranks"
fi
"$M" run -n 2 -- bench comm --no-such-flag >"$out/run_bad.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "unknown option '--no-such-flag'" "$out/run_bad.out"; then
    echo "ok run_forwards_exit_code"
else
    echo "FAIL run_forwards_exit_code (exit $rc)"
fi
# SIGTERM to `myriad run` reaches mpirun, which stops the ranks (a million iterations would
# otherwise run for a long time); no rank may be left behind.
marker="--comm-timeout 50"
"$M" run -n 2 --mpirun-arg --mca --mpirun-arg btl --mpirun-arg self,vader -- bench comm -b 8 -e 8 -n 1000000 $marker >"$out/run_term.out" 2>&1 &
pid=$!
sleep 2
kill -TERM $pid
wait $pid
rc=$?
left=$(pgrep -f -- "bench comm -b 8 -e 8 -n 1000000 $marker" | tr '\n' ' ')
if [ $rc -ne 0 ] && [ -z "$left" ]; then
    echo "ok run_forwards_sigterm (exit $rc)"
else
    echo "FAIL run_forwards_sigterm (exit $rc, left: $left)"
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
fi
