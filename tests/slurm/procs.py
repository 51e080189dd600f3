#!/usr/bin/python3
"""procs.py: the processes of a test cluster, found in one scan of /proc (a shell loop over /proc
takes seconds to minutes on a busy machine).

  procs.py pids DIR        every live process of the cluster in DIR: anything started with its
                           configuration (SLURM_CONF=DIR/etc/slurm.conf in its environment: the daemons,
                           jobs, tasks) and each slurmstepd or slurmd (it holds a node's log open)
  procs.py kill-node DIR N node N dies as a machine would: SIGKILL to its slurmd, its slurmstepd and
                           every task it ran (environment: SLURMD_NODENAME=N and this cluster), and its
                           memory (DIR/shm/N, the node's /dev/shm) is lost
"""
import os, shutil, signal, sys


def environ(pid):
    try:
        return set(open(f"/proc/{pid}/environ", "rb").read().split(b"\0"))
    except OSError:
        return set()


def open_files(pid):
    try:
        return [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []


def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def scan(d, want_env, want_file_prefix):
    me = os.getpid()
    found = set()
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        if want_env <= environ(p) or any(f.startswith(want_file_prefix) for f in open_files(p)):
            found.add(int(p))
    return found


def main():
    cmd, d = sys.argv[1], sys.argv[2].rstrip("/")
    conf = f"SLURM_CONF={d}/etc/slurm.conf".encode()
    if cmd == "pids":
        pids = scan(d, {conf}, f"{d}/log/")
        print(" ".join(str(p) for p in sorted(pids) if alive(p)))
    elif cmd == "kill-node":
        node = sys.argv[3]
        pids = scan(d, {conf, f"SLURMD_NODENAME={node}".encode()}, f"{d}/log/slurmd-{node}.log")
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(f"{d}/shm/{node}", ignore_errors=True)
        os.makedirs(f"{d}/shm/{node}", exist_ok=True)
        print(f"killed node {node}: pids {' '.join(map(str, sorted(pids)))}")
    else:
        sys.exit(f"usage: {sys.argv[0]} pids DIR | kill-node DIR NODE")


main()
