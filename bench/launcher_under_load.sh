#!/usr/bin/env bash
# bench/launcher_under_load.sh: RUNS (default 10) consecutive runs of tests/test_launcher.sh while
# two busy loops keep both cores busy (issue 14, acceptance 1: the launcher tests must not depend
# on an idle machine). Prints one line per run; exits non-zero if any run had a failure.
# Usage: bash bench/launcher_under_load.sh [RUNS]      (results: bench/launcher_under_load.md)
set -u
cd "$(dirname "$0")/.."
RUNS=${1:-10}
burn() { while :; do :; done; }
burn & b1=$!
burn & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT
bad=0
for i in $(seq 1 "$RUNS"); do
    s=$(date +%s)
    out=$(bash tests/test_launcher.sh 2>/dev/null)
    p=$(grep -c '^ok ' <<<"$out"); f=$(grep -c '^FAIL' <<<"$out")
    echo "run $i: $p ok $f failed $(( $(date +%s) - s )) s, load $(cut -d' ' -f1 /proc/loadavg)"
    grep '^FAIL' <<<"$out"
    [ "$f" -eq 0 ] || bad=1
done
exit $bad
