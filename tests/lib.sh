# lib.sh: helpers shared by the shell tests (sourced after T, the scratch directory, is set).
# Each prints the ok/FAIL lines tests/run.sh counts.

pass() { echo "ok $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; }

# Bad input: non-zero exit, the first "myriad: " line names the problem (NEEDLE), no training step.
expect_error() { # NAME NEEDLE CMD...
    local name=$1 needle=$2; shift 2
    timeout 60 "$@" >"$T/stdout" 2>"$T/err"; local rc=$?
    local line; line=$(grep '^myriad: ' "$T/err" | head -1)
    if [ $rc -ne 0 ] && [ -n "$line" ] && echo "$line" | grep -qF -- "$needle" && ! grep -q '^step ' "$T/err"; then pass "$name"
    else fail "$name" "rc=$rc $(head -c 300 "$T/err")"; fi
}

# The same under mpirun where exactly one rank must report: one "myriad: " in all of stderr
# (mpirun's own notice may interleave with that line, so it is counted, not anchored).
expect_one_rank_error() { # NAME NEEDLE CMD...
    local name=$1 needle=$2; shift 2
    timeout 60 "$@" >"$T/stdout" 2>"$T/err"; local rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -o 'myriad: ' "$T/err" | wc -l)" -eq 1 ] && grep -qF -- "$needle" "$T/err" &&
        ! grep -q '^step ' "$T/err"; then pass "$name"
    else fail "$name" "rc=$rc $(head -c 300 "$T/err")"; fi
}
