# tests/slurm/cluster.sh: a real Slurm cluster on this machine for the tests (sourced by
# tests/test_slurm.sh; by hand: `source tests/slurm/cluster.sh; slurm_cluster_start DIR; ...;
# slurm_cluster_stop DIR`). Debian 12's slurmctld and slurmd 22.05 with munge authentication
# (a private munged with its own key and socket), six emulated nodes n1..n6 served by six slurmd
# processes (multiple-slurmd mode: NodeHostname=localhost, one port per node, %n in every per-node
# path), select/cons_tres, topology/tree from a topology.conf that `myriad sched place
# --slurm-topology` writes (three leaf switches of two nodes), one fake GPU per node (gres with
# File=/dev/null) so GPU requests are checked by Slurm. All state lives under DIR; the ports are
# chosen free at start, so clusters of concurrent test runs do not meet. Daemons are stopped by
# their pids. Settings for a root container without systemd: docs/SLURM.md.

SLURM_TEST_NODES="n1 n2 n3 n4 n5 n6"
SLURM_TEST_DIR=
SLURM_TEST_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Runs a command against the test cluster. SLURM_CONF is given to it alone, not exported: every
# process that carries this cluster's SLURM_CONF belongs to the cluster (daemons, jobs, their
# tasks), which is how slurm_cluster_stop finds them all.
with_slurm() { SLURM_CONF="$SLURM_TEST_DIR/etc/slurm.conf" "$@"; }

# Free TCP ports on 127.0.0.1, chosen by the kernel (all held open together, so they differ).
slurm_free_ports() { # COUNT
    /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Why the daemons cannot run here (empty when they can).
slurm_missing() {
    local c
    for c in slurmctld slurmd munged munge srun sbatch sinfo scontrol squeue scancel; do
        command -v "$c" >/dev/null 2>&1 || { echo "$c is not installed (apt-get install slurmctld slurmd slurm-client munge)"; return; }
    done
    [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || [ -n "$(ls /usr/lib/*/slurm-wlm/mpi_pmix*.so 2>/dev/null)" ] ||
        { echo "Slurm's PMIx plugin is missing"; return; }
    [ "$(id -u)" -eq 0 ] || echo "the test cluster runs its daemons as root (SlurmUser=root)"
}

# slurm_cluster_start DIR MYRIAD: writes the configuration under DIR and starts munged, slurmctld
# and one slurmd per node; returns once sinfo shows every node idle (non-zero after 60 s).
slurm_cluster_start() {
    local d=$1 myriad=$2
    SLURM_TEST_DIR=$d
    mkdir -p "$d"/{etc,run,log,state,munge}
    local n
    for n in $SLURM_TEST_NODES; do mkdir -p "$d/spool/$n" "$d/tmp/$n" "$d/shm/$n"; done
    read -r -a ports <<<"$(slurm_free_ports 7)"
    # the switch tree: leaves {n1,n2} {n3,n4} {n5,n6}; spine0 over the first two, spine1 over the third
    cat >"$d/etc/cluster.json" <<EOF
{"nodes": [
 {"name": "n1", "gpus": 1, "gpu_type": "fake", "leaf": 0, "spine": 0}, {"name": "n2", "gpus": 1, "gpu_type": "fake", "leaf": 0, "spine": 0},
 {"name": "n3", "gpus": 1, "gpu_type": "fake", "leaf": 1, "spine": 0}, {"name": "n4", "gpus": 1, "gpu_type": "fake", "leaf": 1, "spine": 0},
 {"name": "n5", "gpus": 1, "gpu_type": "fake", "leaf": 2, "spine": 1}, {"name": "n6", "gpus": 1, "gpu_type": "fake", "leaf": 2, "spine": 1}]}
EOF
    "$myriad" sched place --cluster "$d/etc/cluster.json" --slurm-topology "$d/etc/topology.conf" || return 1
    dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 2>/dev/null && chmod 600 "$d/munge/munge.key"
    # a task sees its node's own shared memory, Open MPI shared-memory segments and node name (the
    # emulated nodes share one kernel; on real nodes these are the defaults)
    cat >"$d/etc/taskprolog.sh" <<EOF
#!/bin/sh
echo "export MYRIAD_HOST=\$SLURMD_NODENAME"
echo "export MYRIAD_SHM_DIR=$d/shm/\$SLURMD_NODENAME"
echo "export OMPI_MCA_btl_vader_backing_directory=$d/tmp/\$SLURMD_NODENAME"
echo "export OMPI_MCA_btl_tcp_if_include=127.0.0.0/8"
EOF
    chmod +x "$d/etc/taskprolog.sh"
    printf 'AutoDetect=off\nName=gpu File=/dev/null\n' >"$d/etc/gres.conf"
    # mpi/pmix runs fences without data (Open MPI's last barrier in MPI_Init) over its tree
    # collective by default; with every node at NodeHostname=localhost that tree is degenerate and
    # the barrier returns before the other nodes reach it, so a rank could get an ob1 MATCH before
    # add_procs registered its handlers (SIGSEGV in MPI_Init, ~1 in 15 steps under CPU load).
    # The ring collective, already used for fences with data, waits for every node.
    echo 'PMIxCollFence=ring' >"$d/etc/mpi.conf"
    cat >"$d/etc/slurm.conf" <<EOF
ClusterName=myriadtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket,cred_expire=5
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
TmpFS=$d/tmp/%n
TaskProlog=$d/etc/taskprolog.sh
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
TopologyPlugin=topology/tree
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
MpiDefault=none
GresTypes=gpu
ReturnToService=1
SlurmdTimeout=5
MessageTimeout=5
KillWait=5
InactiveLimit=0
MinJobAge=600
SlurmdParameters=config_overrides
EOF
    local i=1
    for n in $SLURM_TEST_NODES; do
        echo "NodeName=$n NodeHostname=localhost Port=${ports[$i]} CPUs=2 RealMemory=1000 Gres=gpu:1 State=UNKNOWN" >>"$d/etc/slurm.conf"
        i=$((i + 1))
    done
    echo "PartitionName=debug Nodes=n[1-6] Default=YES MaxTime=INFINITE State=UP" >>"$d/etc/slurm.conf"
    with_slurm munged -f --socket="$d/munge/munge.socket" --key-file="$d/munge/munge.key" --log-file="$d/log/munged.log" \
        --pid-file="$d/run/munged.pid" --seed-file="$d/munge/seed" || return 1
    with_slurm slurmctld || return 1
    for n in $SLURM_TEST_NODES; do with_slurm slurmd -N "$n" || return 1; done
    local t
    for t in $(seq 120); do
        [ "$(with_slurm sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq 6 ] && return 0
        sleep 0.5
    done
    echo "the test cluster did not come up; $d/log holds the daemons' logs" >&2
    return 1
}

# Processes of the cluster in DIR still alive (empty when all are gone): see procs.py.
slurm_cluster_alive() { # DIR
    /usr/bin/python3 "$SLURM_TEST_LIB/procs.py" pids "$1"
}

# The emulated node NODE dies with everything on it (procs.py kill-node).
slurm_kill_node() { # DIR NODE
    /usr/bin/python3 "$SLURM_TEST_LIB/procs.py" kill-node "$1" "$2"
}

# Stop everything by pid: SIGTERM, up to 10 s, then SIGKILL.
slurm_cluster_stop() { # DIR
    local d=$1 p t left
    [ -d "$d" ] || return 0
    for p in $(slurm_cluster_alive "$d"); do kill -TERM "$p" 2>/dev/null; done
    for t in $(seq 50); do
        left=$(slurm_cluster_alive "$d")
        [ -z "$left" ] && return 0
        sleep 0.2
    done
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
    sleep 0.5
    [ -z "$(slurm_cluster_alive "$d")" ]
}
