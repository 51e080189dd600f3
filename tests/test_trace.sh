#!/usr/bin/env bash
# tests/test_trace.sh: Chrome Trace Event files gathered from several ranks. build/tests/test_trace
# on 3 ranks records known events per rank and writes one file through trace_write_gathered;
# tests/py/check_trace.py validates it with Python's json module (structure, required fields,
# "rank N" processes, monotonic ts per lane, the exact events). Prints ok/FAIL/skip lines.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
out=build/test-logs/trace.sh.d
mkdir -p "$out"
if ! command -v mpirun >/dev/null; then
    echo "skip trace_gathered (mpirun is not installed)"
    exit 0
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
for np in 1 3; do
    rm -f "$out/np$np.json"
    timeout 60 mpirun --oversubscribe --bind-to none --mca btl self,vader -np $np build/tests/test_trace "$out/np$np.json" \
        >"$out/np$np.out" 2>"$out/np$np.err"
    rc=$?
    if [ $rc -eq 0 ] && $PY tests/py/check_trace.py "$out/np$np.json" $np >"$out/np$np.check" 2>&1; then
        echo "ok trace_gathered_np$np ($(cat "$out/np$np.check"))"
    else
        echo "FAIL trace_gathered_np$np (exit $rc): $(cat "$out/np$np.check" 2>/dev/null)"
        tail -n 5 "$out/np$np.err" >&2
    fi
done
