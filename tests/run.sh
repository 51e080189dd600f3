#!/usr/bin/env bash
# tests/run.sh: runs every test program (build/tests/test_*) and every shell test
# (tests/test_*.sh) and prints one closing line "N passed, N failed, N skipped".
# Each program prints "ok NAME", "FAIL NAME" or "skip NAME (why)" per case; a program that
# exits non-zero without reporting a failure (a crash) counts as one failure.
# Usage: bash tests/run.sh [FILTER]   (FILTER: substring of the test program's name)
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
filter=${1:-}
passed=0 failed=0 skipped=0
failed_names=()
logdir=build/test-logs
mkdir -p "$logdir"
for t in build/tests/test_* tests/test_*.sh; do
    [ -e "$t" ] || continue
    name=$(basename "$t")
    [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
    start=$(date +%s)
    if [[ "$t" == *.sh ]]; then bash "$t" >"$logdir/$name.out" 2>"$logdir/$name.err"; else "$t" >"$logdir/$name.out" 2>"$logdir/$name.err"; fi
    rc=$?
    p=$(grep -c '^ok ' "$logdir/$name.out"); f=$(grep -c '^FAIL ' "$logdir/$name.out"); s=$(grep -c '^skip ' "$logdir/$name.out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name (exit $rc without a reported failure)" >>"$logdir/$name.out"; fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    printf '%-28s %3d ok %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" $(( $(date +%s) - start ))
    grep '^skip ' "$logdir/$name.out" | sed 's/^/    /'
    if [ "$f" -gt 0 ]; then
        failed_names+=("$name")
        grep '^FAIL ' "$logdir/$name.out" | sed 's/^/    /'
        tail -n 20 "$logdir/$name.err" | sed 's/^/    | /'
    fi
done
[ ${#failed_names[@]} -gt 0 ] && echo "failing programs: ${failed_names[*]} (logs in $logdir)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
