# lib.sh: helpers shared by the shell tests, sourced from the repository root. The checks print the
# ok/FAIL lines tests/run.sh counts and write their scratch files under T (test_scratch sets it).

# test_scratch NAME: M, the binary by absolute path; T, a new scratch folder /tmp/myriad-NAME-XXXXXX
# that an EXIT trap removes (a test with more to stop at exit sets its own trap, removing "$T" too).
test_scratch() {
    M=$PWD/bin/myriad
    T=$(mktemp -d "/tmp/myriad-$1-XXXXXX")
    trap 'rm -rf "$T"' EXIT
}

# mpi_env: Open MPI allowed as root; MPI, the tests' mpirun line (shared memory, more ranks than
# cores); OpenMP threads that sleep when idle, not spin (the ranks share the machine's cores).
mpi_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
    MPI="mpirun --oversubscribe --bind-to none --mca btl self,vader"
}

pass() { echo "ok $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; }

# layout_check NAME NP FLAGS...: train "$common FLAGS" on NP ranks ($MPI, from mpi_env) and compare
# its per-step losses and saved weights with the single-process reference in $T/ref.jsonl and
# $T/ref (tests/py/compare_runs.py, the layout tolerances). LAYOUT_TIMEOUT: seconds (120).
layout_check() {
    local name=$1 np=$2 out=""
    shift 2
    if timeout "${LAYOUT_TIMEOUT:-120}" $MPI -np "$np" $M train $common "$@" --log "$T/run.jsonl" --save "$T/run" \
        >"$T/out" 2>"$T/err" &&
        out=$(/usr/bin/python3 tests/py/compare_runs.py "$T/ref.jsonl" "$T/run.jsonl" "$T/ref" "$T/run"); then
        pass "$name"
        echo "# $name: $out"
    else fail "$name" "$out $(grep -m2 myriad: "$T/err" || tail -2 "$T/err")"; fi
    rm -rf "$T/run" "$T/run.jsonl"
}

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

# ---- emulated hosts: network namespaces on a private bridge (test_launcher.sh, test_doctor.sh) ----
# ns_up PREFIX N DIR: namespaces PREFIXh1..N, each with eth0 = $NS_NET.1i/24 on a veth pair
# (root side PREFIXvi) enslaved to bridge PREFIXbr = $NS_NET.1. NS_NET is 10.200.X with X from
# this shell's pid, moved on while that subnet is already in use (concurrent tests). Only these
# addresses are used: no route leaves the bridge. Writes DIR/agent.sh, mpirun's rsh agent
# ("agent HOST CMD..." runs CMD in HOST's namespace with MYRIAD_HOST=HOST), and sets MPI_NS to
# the `myriad run --mpirun-arg` list that makes Open MPI launch and talk through them.
# Returns 1 with NS_WHY set when namespaces cannot be made here (not root, no ip netns).
ns_up() {
    local p=$1 n=$2 dir=$3 i sub
    NS_PREFIX=$p NS_N=$n
    sub=$(( $$ % 200 + 20 ))
    while ip -o addr show 2>/dev/null | grep -q " 10\.200\.$sub\."; do sub=$(( (sub - 19) % 200 + 20 )); done
    NS_NET="10.200.$sub"
    if ! ip netns add "${p}h1" 2>/dev/null; then
        NS_WHY="cannot create network namespaces here: needs root and ip netns"
        return 1
    fi
    if ! _ns_links "$p" "$n" 2>"$dir/ns.err"; then
        NS_WHY="namespace network setup failed: $(head -1 "$dir/ns.err")"
        return 1
    fi
    cat >"$dir/agent.sh" <<AGENT
#!/bin/sh
# rsh agent for mpirun: "agent HOST COMMAND..." runs COMMAND inside HOST's namespace, with a /tmp
# of its own as a real host has: Open MPI's daemons keep their session directories under
# \$TMPDIR/ompi.HOSTNAME.UID, and the emulated hosts share one hostname, so in one shared /tmp a
# finished job's daemon could remove that directory while the next job's daemon was creating its
# own in it (a daemon that dies before calling back: mpirun waits for it forever)
host=\$1; shift
case "\$host" in $NS_NET.1[1-9]) ns=${p}h\${host#$NS_NET.1};; *) echo "agent: unknown host \$host" >&2; exit 1;; esac
mkdir -p "$dir/tmp-\$host"
exec ip netns exec "\$ns" env MYRIAD_HOST="\$host" TMPDIR="$dir/tmp-\$host" sh -c "\$*"
AGENT
    chmod +x "$dir/agent.sh"
    MPI_NS=()
    local kv
    for kv in "plm_rsh_agent $dir/agent.sh" "plm_rsh_no_tree_spawn 1" "btl tcp,self" "btl_tcp_if_include $NS_NET.0/24" \
        "oob_tcp_if_include $NS_NET.0/24"; do
        MPI_NS+=(--mpirun-arg --mca --mpirun-arg "${kv%% *}" --mpirun-arg "${kv#* }")
    done
}

_ns_links() { # PREFIX N: the bridge, and a veth into each namespace (h1 exists already)
    local p=$1 n=$2 i
    ip link add "${p}br" type bridge && ip addr add "$NS_NET.1/24" dev "${p}br" && ip link set "${p}br" up || return 1
    for i in $(seq 1 "$n"); do
        { [ "$i" -eq 1 ] || ip netns add "${p}h$i"; } &&
            ip link add "${p}v$i" type veth peer name eth0 netns "${p}h$i" &&
            ip link set "${p}v$i" master "${p}br" up &&
            ip -n "${p}h$i" addr add "$NS_NET.1$i/24" dev eth0 &&
            ip -n "${p}h$i" link set eth0 up && ip -n "${p}h$i" link set lo up || return 1
    done
}

# ns_down PREFIX [N]: kill every process in the namespaces, delete them, their veths and the bridge.
ns_down() {
    local p=$1 n=${2:-9} i ns pid
    for i in $(seq 1 "$n"); do ip link del "${p}v$i" 2>/dev/null; done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${p}h"); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    ip link del "${p}br" 2>/dev/null
    return 0
}

# ns_slow_link PREFIX I RATE DELAY: slow host I's link both ways (the bridge side of its veth and
# its eth0): tc netem with delay and rate limit; where the kernel lacks sch_netem
# (CONFIG_NET_SCH_NETEM unset), a token bucket (tbf) with the same rate and no added delay.
# Sets NS_SLOW to what was applied; returns 1 (NS_WHY set) when neither works.
ns_slow_link() {
    local p=$1 i=$2 rate=$3 delay=$4
    if tc qdisc add dev "${p}v$i" root netem delay "$delay" rate "$rate" 2>/dev/null; then
        ip netns exec "${p}h$i" tc qdisc add dev eth0 root netem delay "$delay" rate "$rate" &&
            NS_SLOW="netem delay $delay rate $rate" && return 0
    elif tc qdisc add dev "${p}v$i" root tbf rate "$rate" burst 32kb latency 100ms 2>/dev/null; then
        ip netns exec "${p}h$i" tc qdisc add dev eth0 root tbf rate "$rate" burst 32kb latency 100ms &&
            NS_SLOW="tbf rate $rate (this kernel has no sch_netem, so no added delay)" && return 0
    fi
    NS_WHY="tc cannot shape ${p}v$i (neither netem nor tbf qdiscs available)"
    return 1
}
