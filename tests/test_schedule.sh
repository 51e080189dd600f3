#!/usr/bin/env bash
# tests/test_schedule.sh: the pipeline schedules over real send/recv. build/tests/test_schedule on
# 4 ranks runs GPipe and 1F1B with blocking sends, 1F1B and interleaved (v 2) with nonblocking
# sends, m = 8, 128 KiB messages (above the eager limit, so blocking sends wait for their
# receive); every received value is checked. The 1F1B run's trace (one process per rank, ops on
# lanes "compute" and "comm") is validated by tests/py/check_trace.py: per rank 8 forwards,
# 8 backwards, and 32 / 48 / 48 / 32 events in all (stage 0 has no activation receives or
# gradient sends, the last stage no activation sends or gradient receives).
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
out=build/test-logs/schedule.sh.d
mkdir -p "$out"
if ! command -v mpirun >/dev/null; then
    echo "skip test_schedule_np4 (mpirun is not installed)"
    exit 0
fi
rm -f "$out/1f1b_trace.json"
timeout 120 mpirun --oversubscribe --bind-to none --mca btl self,vader -np 4 build/tests/test_schedule \
    "$out/1f1b_trace.json" >"$out/np4.out" 2>"$out/np4.err"
rc=$?
cat "$out/np4.out"
if [ $rc -ne 0 ] && ! grep -q '^FAIL' "$out/np4.out"; then
    echo "FAIL test_schedule_np4 (exit $rc)"
    tail -n 5 "$out/np4.err" >&2
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if $PY tests/py/check_trace.py "$out/1f1b_trace.json" 4 --pipeline 8 32 48 48 32 >"$out/check.out" 2>&1; then
    echo "ok schedule_trace_1f1b ($(cat "$out/check.out"))"
else
    echo "FAIL schedule_trace_1f1b: $(cat "$out/check.out")"
fi
