#!/usr/bin/env bash
# tests/test_mesh.sh: the process mesh under mpirun and through the CLI. build/tests/test_mesh on
# 8 ranks checks that the comm groups created for tp 2 x dp 2 x pp 2 (and tp 2 x pp 4) hold the
# hand-listed ranks; `myriad mesh` must print the hand-written groups of world 16 = tp 2 x dp 4 x
# pp 2 and refuse a layout that does not multiply to the world size with one line.
# Prints ok/FAIL/skip lines for tests/run.sh.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
out=build/test-logs/mesh.sh.d
mkdir -p "$out"

# The CLI: groups of world 16, written by hand (rank = tp + 2*(dp + 4*pp))
bin/myriad mesh --world 16 --tp 2 --pp 2 --dp 4 >"$out/mesh16.out" 2>&1
rc=$?
want_tp='tp: 8 groups of 2: [0 1] [2 3] [4 5] [6 7] [8 9] [10 11] [12 13] [14 15]'
want_dp='dp: 4 groups of 4: [0 2 4 6] [1 3 5 7] [8 10 12 14] [9 11 13 15]'
want_pp='pp: 8 groups of 2: [0 8] [1 9] [2 10] [3 11] [4 12] [5 13] [6 14] [7 15]'
want_embed='embed: 8 groups of 2: [0 8] [1 9] [2 10] [3 11] [4 12] [5 13] [6 14] [7 15]'
if [ $rc -eq 0 ] && grep -qxF "$want_tp" "$out/mesh16.out" && grep -qxF "$want_dp" "$out/mesh16.out" \
    && grep -qxF "$want_pp" "$out/mesh16.out" && grep -qxF "$want_embed" "$out/mesh16.out" \
    && grep -qE '^ +13 +1 +0 +2 +0 +1$' "$out/mesh16.out"; then
    echo "ok mesh_cli_world16"
else
    echo "FAIL mesh_cli_world16 (exit $rc)"
    cat "$out/mesh16.out" >&2
fi

bin/myriad mesh --world 4 --tp 2 --pp 2 --dp 2 >"$out/bad.out" 2>"$out/bad.err"
rc=$?
if [ $rc -ne 0 ] && [ ! -s "$out/bad.out" ] && [ "$(wc -l <"$out/bad.err")" -eq 1 ] \
    && grep -qF 'myriad: tp 2 x pp 2 x dp 2 = 8 does not equal the world size 4 (launch 8 processes or change the layout)' "$out/bad.err"; then
    echo "ok mesh_cli_refuses_wrong_world"
else
    echo "FAIL mesh_cli_refuses_wrong_world (exit $rc)"
    cat "$out/bad.err" >&2
fi

if ! command -v mpirun >/dev/null; then
    echo "skip test_mesh_np8 (mpirun is not installed)"
    exit 0
fi
timeout 120 mpirun --oversubscribe --bind-to none --mca btl self,vader -np 8 build/tests/test_mesh \
    >"$out/np8.out" 2>"$out/np8.err"
rc=$?
cat "$out/np8.out"
if [ $rc -ne 0 ] && ! grep -q '^FAIL' "$out/np8.out"; then
    echo "FAIL test_mesh_np8 (exit $rc)"
    tail -n 5 "$out/np8.err" >&2
fi
