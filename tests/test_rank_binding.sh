#!/usr/bin/env bash
# test_rank_binding.sh: where `myriad run` asks mpirun to put the ranks (src/launch/rank_binding.c):
#   - one thread per rank on this machine alone: --bind-to core:overload-allowed, plain and
#     supervised (the launch event's command line);
#   - OpenMP threads per rank, or a hostfile (emulated hosts that are all this machine): none;
#   - a binding of the user's own (--mpirun-arg --bind-to ...) replaces ours: exactly one --bind-to;
#   - bound for real: two ranks with OMP_NUM_THREADS=1 each run on one core, and not the same one.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
test_scratch rankbind
mpi_env
unset OMP_NUM_THREADS

# dry NAME WANT ENV... -- RUN_ARGS: the plain launcher's mpirun line has exactly WANT as its --bind-to ("" none given)
dry() {
    local name=$1 want=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local line
    line=$(env "${envs[@]}" "$M" run "$@" --dry-run -- train 2>&1)
    local got n
    n=$(grep -o -- '--bind-to' <<<"$line" | wc -l)
    got=$(sed -n 's/.*--bind-to \([^ ]*\).*/\1/p' <<<"$line")
    if { [ -z "$want" ] && [ "$n" -eq 0 ]; } || { [ "$n" -eq 1 ] && [ "$got" = "$want" ]; }; then pass "$name"
    else fail "$name" "want '$want', got $n: $line"; fi
}
dry binding_one_thread_per_rank_binds_to_cores core:overload-allowed OMP_NUM_THREADS=1 -- -n 2
dry binding_openmp_threads_unbound none OMP_NUM_THREADS=2 -- -n 2
dry binding_users_own_wins socket OMP_NUM_THREADS=1 -- -n 2 --mpirun-arg --bind-to --mpirun-arg socket
dry binding_hostfile_unbound none OMP_NUM_THREADS=1 -- -n 2 --mpirun-arg --hostfile --mpirun-arg "$T/hosts"
# the launcher's default thread count (max(1, cores / N)) decides when none is set
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cores" -le 2 ]; then dry binding_default_threads_on_this_machine core:overload-allowed -- -n 2
else dry binding_default_threads_on_this_machine none -- -n 2; fi

# supervised: the launch event's command line
timeout 120 env OMP_NUM_THREADS=1 "$M" run -n 2 --events "$T/ev.jsonl" --exec -- sh -c 'exit 0' >"$T/sup.out" 2>&1
cmd=$(jq -r 'select(.event == "launch") | .cmd' "$T/ev.jsonl" 2>/dev/null | head -1)
if grep -q -- '--bind-to core:overload-allowed' <<<"$cmd"; then pass binding_supervised_launch
else fail binding_supervised_launch "$cmd $(tail -3 "$T/sup.out")"; fi

# for real: each of two ranks allowed on exactly one core (Cpus_allowed_list), different cores
if [ "$cores" -ge 2 ]; then
    timeout 120 env OMP_NUM_THREADS=1 "$M" run -n 2 --exec -- sh -c 'grep Cpus_allowed_list /proc/self/status' >"$T/cpus" 2>&1
    lists=$(grep '^Cpus_allowed_list' "$T/cpus" | awk '{print $2}' | sort)
    if [ "$(wc -l <<<"$lists")" -eq 2 ] && ! grep -q '[-,]' <<<"$lists" && [ "$(uniq <<<"$lists" | wc -l)" -eq 2 ]; then
        pass binding_ranks_on_distinct_cores
    else fail binding_ranks_on_distinct_cores "$(cat "$T/cpus")"; fi
else
    echo "skip binding_ranks_on_distinct_cores (one core)"
fi
