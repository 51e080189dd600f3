#!/usr/bin/env bash
# tests/test_launcher.sh: `myriad run` as a supervisor, end to end, with a stub trainer
# (tests/hb_stub.c: per-rank deterministic chain, state file per step, heartbeats, resume) under
# real mpirun. The oracle of every recovery case is a failure-free run of the same stub: the
# final state (every rank's last step and value) must be identical.
#   kill a rank, hang a rank (declared dead within the hang timeout +-10%), --max-restarts
#   enforced with one clear line, a wrong job secret refused, corrupt@ flips exactly one bit,
#   srun command lines with a fake srun, a random:SEED:COUNT soak (SOAK_FAULTS, default 10), the
#   Poisson clock of --inject-rate (its faults at the seed's draws, python's splitmix64),
#   bad input, and a multi-host run on network namespaces that loses a host and finishes on
#   the spare (skipped when namespaces cannot be created).
# Prints ok/FAIL/skip lines for tests/run.sh.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
M=$(pwd)/bin/myriad
STUB=$(pwd)/build/hb_stub
SOAK_FAULTS=${SOAK_FAULTS:-10}
out=$(mktemp -d /tmp/myriad-launcher-XXXXXX)
NS_PREFIX="myl$$"
. tests/lib.sh
trap 'ns_down "$NS_PREFIX" 3; rm -rf "$out"' EXIT

if ! command -v mpirun >/dev/null; then
    echo "skip test_launcher (mpirun is not installed)"
    exit 0
fi
if ! mpicc -O2 -std=gnu11 -Isrc tests/hb_stub.c build/libmyriad.a -o "$STUB" -lcjson -lm -lpthread 2>"$out/cc.err"; then
    echo "FAIL launcher_build_stub"
    cat "$out/cc.err" >&2
    exit 1
fi

# ev FILE EVENT [JQ-FILTER]: number of events of that name (matching the filter)
ev() { jq -c "select(.event == \"$2\")${3:+ | select($3)}" "$1" 2>/dev/null | wc -l; }
# stub_run NAME ARGS...: supervised run of the stub; state in $out/NAME, events in $out/NAME.jsonl
stub_run() {
    local name=$1
    shift
    rm -rf "$out/$name"
    mkdir -p "$out/$name"
    timeout 180 "$M" run --events "$out/$name.jsonl" --start-timeout 30 "$@" --exec -- "$STUB" --steps "${STEPS:-20}" \
        --step-ms "${STEP_MS:-20}" --state "$out/$name" ${STUB_ARGS:-} >"$out/$name.out" 2>"$out/$name.err"
}
# keep the logs of a failing case for inspection (the temporary dir is removed on exit)
keep() { mkdir -p build/test-logs/launcher && cp "$out/$1".* build/test-logs/launcher/ 2>/dev/null; }
same_final() { [ -s "$out/$1/final.txt" ] && cmp -s "$out/ref/final.txt" "$out/$1/final.txt"; }

# 0. plain runs are unaffected: the stub without the launcher's environment
mkdir -p "$out/plain"
if timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$STUB" --steps 3 --state "$out/plain" >/dev/null 2>&1 &&
    grep -q "rank 1 step 3" "$out/plain/final.txt"; then
    echo "ok launcher_plain_run_without_heartbeat_env"
else
    echo "FAIL launcher_plain_run_without_heartbeat_env"
fi

# a program without heartbeats (bench comm) runs to completion under the supervisor
if timeout 120 "$M" run -n 2 --max-restarts 1 --events "$out/bench.jsonl" -- bench comm -b 64 -e 64 -n 1 -w 0 \
    >"$out/bench.out" 2>"$out/bench.err" && grep -q '0 OK' "$out/bench.out" &&
    [ "$(ev "$out/bench.jsonl" finished '.status == "ok" and .restarts == 0')" -eq 1 ]; then
    echo "ok launcher_supervises_program_without_heartbeats"
else
    echo "FAIL launcher_supervises_program_without_heartbeats"
    tail -5 "$out/bench.err" >&2
fi

# 1. the failure-free reference
stub_run ref -n 3 --max-restarts 0
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$out/ref/final.txt")" -eq 3 ] && grep -q "rank 2 step 20" "$out/ref/final.txt" &&
    [ "$(ev "$out/ref.jsonl" finished '.status == "ok" and .steps == 20 and .goodput > 0 and .goodput <= 1')" -eq 1 ] &&
    [ "$(ev "$out/ref.jsonl" connected)" -eq 1 ]; then
    echo "ok launcher_reference_run"
else
    echo "FAIL launcher_reference_run (exit $rc)"; keep ref
    tail -5 "$out/ref.err" >&2
fi

# 2. kill a rank: relaunched with --resume auto, same final state, at most one step recomputed
stub_run kill -n 3 --max-restarts 2 --inject kill@7:1
rc=$?
if [ $rc -eq 0 ] && same_final kill && [ "$(ev "$out/kill.jsonl" inject '.fault == "kill" and .rank == 1')" -eq 1 ] &&
    [ "$(ev "$out/kill.jsonl" exit '.rank == 1')" -eq 1 ] && [ "$(ev "$out/kill.jsonl" restart)" -eq 1 ] &&
    [ "$(ev "$out/kill.jsonl" launch '.attempt == 1 and (.cmd | endswith("--resume auto"))')" -eq 1 ] &&
    [ "$(ev "$out/kill.jsonl" resumed '.recomputed_steps <= 1')" -eq 1 ]; then
    echo "ok launcher_kill_rank_recovers_same_final_state"
else
    echo "FAIL launcher_kill_rank_recovers_same_final_state (exit $rc)"; keep kill
    tail -5 "$out/kill.err" >&2
fi

# 3. hang a rank (SIGSTOP): declared dead within the hang timeout +-10%, killed, recovered
stub_run hang -n 3 --max-restarts 2 --hang-timeout 2 --inject hang@8:2
rc=$?
since=$(jq -r 'select(.event == "heartbeat-timeout") | .since_stop_s' "$out/hang.jsonl" 2>/dev/null | head -1)
if [ $rc -eq 0 ] && same_final hang && [ "$(ev "$out/hang.jsonl" heartbeat-timeout '.rank == 2')" -eq 1 ] &&
    [ "$(ev "$out/hang.jsonl" kill)" -ge 1 ] && [ -n "$since" ] &&
    awk -v s="$since" 'BEGIN { exit !(s >= 1.8 && s <= 2.2) }'; then
    echo "ok launcher_hang_declared_dead_in_timeout (stopped rank declared dead after ${since} s, timeout 2 s)"
else
    echo "FAIL launcher_hang_declared_dead_in_timeout (exit $rc, after '${since}' s)"; keep hang
    tail -5 "$out/hang.err" >&2
fi

# 4. --max-restarts: the third failure exceeds 2 restarts -> one clear line, non-zero exit
stub_run maxr -n 2 --max-restarts 2 --inject kill@3:0,kill@5:0,kill@9:1
rc=$?
msg=$(grep '^myriad: run: giving up' "$out/maxr.err")
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$msg" | grep -c .)" -eq 1 ] && [[ "$msg" == *"after 2 restarts (--max-restarts 2)"* ]] &&
    [ "$(ev "$out/maxr.jsonl" launch)" -eq 3 ] && [ "$(ev "$out/maxr.jsonl" giving-up)" -eq 1 ] &&
    [ "$(ev "$out/maxr.jsonl" finished '.status == "failed"')" -eq 1 ]; then
    echo "ok launcher_max_restarts_enforced"
else
    echo "FAIL launcher_max_restarts_enforced (exit $rc: $msg)"; keep maxr
fi

# 5. a rank presenting a wrong job secret is refused (and says so); the job does not run
STUB_ARGS="--bad-secret-rank 1" stub_run secret -n 2 --max-restarts 0 --start-timeout 30
rc=$?
if [ $rc -ne 0 ] && [ "$(ev "$out/secret.jsonl" auth-refused '(.reason | test("bad MAC"))')" -ge 1 ] &&
    grep -q "hb_stub rank 1: heartbeat: the launcher refused rank 1" "$out/secret.err" && [ ! -e "$out/secret/final.txt" ]; then
    echo "ok launcher_wrong_secret_refused"
else
    echo "FAIL launcher_wrong_secret_refused (exit $rc)"; keep secret
    tail -5 "$out/secret.err" >&2
fi

# 6. corrupt@STEP flips exactly one bit of one file under --ckpt-dir
mkdir -p "$out/ckpt/step-1"
python3 -c "import sys; open(sys.argv[1],'wb').write(bytes(range(256)))" "$out/ckpt/step-1/shard-0.bin"
cp "$out/ckpt/step-1/shard-0.bin" "$out/shard-0.orig"
stub_run corrupt -n 2 --max-restarts 0 --ckpt-dir "$out/ckpt" --inject corrupt@5
rc=$?
flipped=$(python3 -c "
import sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
print(sum(bin(x ^ y).count('1') for x, y in zip(a, b)) if len(a) == len(b) else -1)" "$out/shard-0.orig" "$out/ckpt/step-1/shard-0.bin")
if [ $rc -eq 0 ] && [ "$flipped" = 1 ] && [ "$(ev "$out/corrupt.jsonl" inject '.fault == "corrupt" and (.file | endswith("shard-0.bin"))')" -eq 1 ]; then
    echo "ok launcher_corrupt_flips_one_bit"
else
    echo "FAIL launcher_corrupt_flips_one_bit (exit $rc, $flipped bits differ)"
fi

# 7. srun inside a Slurm allocation: the command lines (rank placement through SLURM_HOSTFILE),
# a node whose probe step fails after the first failure swapped for the spare (srun --exclude)
# and, as Slurm does not flag it within --node-wait, given back (scontrol update NodeList=), and
# a relaunch with --resume auto. Fake srun/squeue/sinfo; tests/test_slurm.sh has real daemons.
mkdir -p "$out/fakebin"
cat >"$out/fakebin/srun" <<EOF
#!/bin/sh
case "\$*" in *myriad-probe*) case "\$*" in *nodeB*) echo "srun: error: Task launch failed on node nodeB"; exit 1;; esac; exit 0;; esac
echo "\$* | \$(tr '\n' ' ' <"\$SLURM_HOSTFILE")" >>"$out/srun.log"
[ -n "\$MYRIAD_HB_ADDR" ] && [ -n "\$MYRIAD_HB_SECRET" ] || echo "no heartbeat env" >>"$out/srun.log"
[ \$(wc -l <"$out/srun.log") -ge 2 ] && exit 0
exit 1
EOF
printf '#!/bin/sh\necho "nodeA,nodeB,nodeC"\n' >"$out/fakebin/squeue"
printf '#!/bin/sh\necho "$*" >>"%s"\n' "$out/scontrol.log" >"$out/fakebin/scontrol"
printf '#!/bin/sh\nprintf "nodeA mixed\\nnodeB mixed\\nnodeC idle\\n"\n' >"$out/fakebin/sinfo"
chmod +x "$out/fakebin/srun" "$out/fakebin/squeue" "$out/fakebin/sinfo" "$out/fakebin/scontrol"
printf 'nodeA slots=2\nnodeB slots=2\n# spare\nnodeC slots=2\n' >"$out/slurm_hosts"
SLURM_JOB_ID=77 PATH="$out/fakebin:$PATH" timeout 60 "$M" run -n 4 --hosts "$out/slurm_hosts" --spares 1 --max-restarts 1 --node-wait 1 \
    --start-timeout 30 --events "$out/srun.jsonl" --exec -- /opt/train --steps 9 >"$out/srun.out" 2>"$out/srun.err"
rc=$?
want1="--ntasks=4 --nodes=2 --distribution=arbitrary --kill-on-bad-exit=1 --quit-on-interrupt --mpi=pmix /opt/train --steps 9 | nodeA nodeA nodeB nodeB "
want2="--ntasks=4 --nodes=2 --distribution=arbitrary --kill-on-bad-exit=1 --quit-on-interrupt --overlap --mpi=pmix --exclude=nodeB /opt/train --steps 9 --resume auto | nodeA nodeA nodeC nodeC "
if [ $rc -eq 0 ] && [ "$(sed -n 1p "$out/srun.log")" = "$want1" ] &&
    [ "$(sed -n 2p "$out/srun.log")" = "$want2" ] && [ "$(wc -l <"$out/srun.log")" -eq 2 ] &&
    [ "$(ev "$out/srun.jsonl" node-lost '.node == "nodeB" and (.why | test("probe step failed.*on node nodeB"))')" -eq 1 ] &&
    [ "$(ev "$out/srun.jsonl" nodes-settled '.slurm_flagged == false and .released == 1')" -eq 1 ] &&
    [ "$(ev "$out/srun.jsonl" spare-used '.lost == "nodeB" and .spare == "nodeC"')" -eq 1 ] &&
    [ "$(cat "$out/scontrol.log")" = "update JobId=77 NodeList=nodeA,nodeC" ]; then
    echo "ok launcher_srun_command_line"
else
    echo "FAIL launcher_srun_command_line (exit $rc)"
    cat "$out/srun.log" >&2
fi

# 8. bad input: one clear line, non-zero exit
bad() {
    local name=$1 want=$2
    shift 2
    local err
    err=$("$M" run "$@" 2>&1 >/dev/null)
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == *"$want"* ]]; then
        echo "ok launcher_bad_input_$name"
    else
        echo "FAIL launcher_bad_input_$name (exit $rc: $err)"
    fi
}
printf 'h1 slots=1\nh2 slots=1\n' >"$out/small_hosts"
bad inject_rank "RANK in 0..2" -n 3 --inject kill@4:3 --exec -- /bin/true
bad inject_kind "unknown fault 'boom'" -n 3 --inject boom@4:1 --exec -- /bin/true
bad spares_without_hosts "--spares needs --hosts" -n 2 --spares 1 --exec -- /bin/true
bad too_few_slots "have 1 slots for 2 ranks" -n 2 --hosts "$out/small_hosts" --spares 1 --exec -- /bin/true
bad unknown_host "not in --hosts" -n 2 --hosts "$out/small_hosts" --inject host@3:h9 --exec -- /bin/true
bad inject_rate_kind "unknown fault kind 'kil'" -n 2 --inject-rate kil:20 --exec -- /bin/true
bad inject_rate_mtbf "MTBF_SECONDS must be a positive number" -n 2 --inject-rate kill:0 --exec -- /bin/true
bad inject_rate_host_needs_spares "give --hosts FILE with --spares K" -n 2 --inject-rate host:20 --exec -- /bin/true

# SIGTERM to the supervisor ends the job: the ranks are asked to checkpoint and stop (SIGUSR1; the
# stub has no handler and dies of it), exit 128+15, event "stopped", no rank left behind
mkdir -p "$out/term"
timeout 60 "$M" run -n 2 --max-restarts 3 --events "$out/term.jsonl" --exec -- "$STUB" --steps 1000 --step-ms 20 \
    --state "$out/term" >"$out/term.out" 2>"$out/term.err" &
pid=$!
for _ in $(seq 100); do [ "$(ev "$out/term.jsonl" connected)" -ge 1 ] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
rc=$?
sleep 0.5
left=$(pgrep -f -- "--state $out/term" | tr '\n' ' ')
if [ $rc -eq 143 ] && [ -z "$left" ] && [ "$(ev "$out/term.jsonl" stopped '.signal == 15')" -eq 1 ] &&
    [ "$(ev "$out/term.jsonl" launch)" -eq 1 ]; then
    echo "ok launcher_sigterm_stops_job"
else
    echo "FAIL launcher_sigterm_stops_job (exit $rc, left: $left)"
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
fi

# 9. soak: SOAK_FAULTS random kills/hangs, each costing one restart; same final state
STEPS=40 STEP_MS=20 stub_run soak -n 3 --max-restarts "$SOAK_FAULTS" --hang-timeout 1 --inject "random:11:$SOAK_FAULTS:40"
rc=$?
restarts=$(jq -r 'select(.event == "finished") | .restarts' "$out/soak.jsonl" 2>/dev/null)
goodput=$(jq -r 'select(.event == "finished") | .goodput' "$out/soak.jsonl" 2>/dev/null)
STEPS=40 stub_run soakref -n 3 --max-restarts 0
if [ $rc -eq 0 ] && [ -s "$out/soak/final.txt" ] && cmp -s "$out/soakref/final.txt" "$out/soak/final.txt" &&
    [ "$restarts" = "$SOAK_FAULTS" ] && [ "$(ev "$out/soak.jsonl" inject)" -eq "$SOAK_FAULTS" ]; then
    echo "ok launcher_random_soak ($SOAK_FAULTS faults, $restarts restarts, goodput $goodput)"
else
    echo "FAIL launcher_random_soak (exit $rc, restarts '$restarts' of $SOAK_FAULTS)"; keep soak
    tail -5 "$out/soak.err" >&2
fi

# 9b. the Poisson clock (--inject-rate): every clock fault is the seed's draw of its attempt (its
# wait, kind and rank equal an independent splitmix64 in Python), each costs one restart, and the
# final state is the failure-free one. The first draw of seed 2 (0.263 s) is shorter than the
# stub's 1.2 s of steps, so at least one fault fires however fast the machine is.
STEPS=60 STEP_MS=20 stub_run clock -n 3 --max-restarts 100 --hang-timeout 1 --inject-rate kill+hang:0.5,seed=2
rc=$?
STEPS=60 stub_run clockref -n 3 --max-restarts 0
if [ $rc -eq 0 ] && [ -s "$out/clock/final.txt" ] && cmp -s "$out/clockref/final.txt" "$out/clock/final.txt" &&
    /usr/bin/python3 - "$out/clock.jsonl" <<'PY'
import json, math, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
inj = [e for e in ev if e["event"] == "inject"]
fin = [e for e in ev if e["event"] == "finished"][-1]
st, M = 2, 2 ** 64
def nxt():
    global st
    st = (st + 0x9E3779B97F4A7C15) % M
    z = st
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % M
    return z ^ (z >> 31)
bad = [] if inj and fin["restarts"] == len(inj) else ["%d faults, %d restarts" % (len(inj), fin["restarts"])]
for i, e in enumerate(inj):
    t = -0.5 * math.log(((nxt() >> 11) + 0.5) / 2 ** 53)
    kind, rank = "kh"[nxt() % 2], nxt() % 3
    if e.get("clock_index") != i or abs(e["after_s"] - t) > 0.0011 or e["fault"][0] != kind or e["rank"] != rank:
        bad.append("fault %d: %s, want wait %.3f %s rank %d" % (i, e, t, kind, rank))
if bad: print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
then
    echo "ok launcher_poisson_clock ($(ev "$out/clock.jsonl" inject) faults at the seed's times)"
else
    echo "FAIL launcher_poisson_clock (exit $rc)"; keep clock
    tail -5 "$out/clock.err" >&2
fi

# 10. multi-host: 3 hosts as network namespaces on a private bridge (the last one a spare),
# Open MPI over TCP between them through an rsh agent that runs `ip netns exec`. Only addresses
# on this bridge are used. Losing host 2 (its processes killed, its link cut) must move the job
# to the spare and finish with the failure-free final state.
if ! ns_up "$NS_PREFIX" 3 "$out"; then
    echo "skip launcher_multihost_namespaces ($NS_WHY)"
    exit 0
fi
net=$NS_NET
# host loss = every process in its namespace killed (its daemon included) and its link down
cat >"$out/cut.sh" <<EOF
#!/bin/sh
i=\${MYRIAD_LOST_HOST#$net.1}
for p in \$(ip netns pids ${NS_PREFIX}h\$i); do kill -9 \$p; done
ip link set ${NS_PREFIX}v\$i down
EOF
chmod +x "$out/cut.sh"
printf '%s slots=2\n%s slots=2\n%s slots=2\n' "$net.11" "$net.12" "$net.13" >"$out/ns_hosts"
# (--max-restarts on the reference too: see the note below; a launch that never starts is relaunched)
STEPS=15 STEP_MS=40 stub_run nsref -n 4 --hosts "$out/ns_hosts" --spares 1 --max-restarts 2 --hb-addr "$net.1" "${MPI_NS[@]}"
rc_ref=$?
# (--max-restarts 3: an mpirun launch into the namespaces occasionally never starts its ranks;
#  the launcher then restarts it, which is what it is for, and the checks below allow for it)
STEPS=15 STEP_MS=40 stub_run nshost -n 4 --hosts "$out/ns_hosts" --spares 1 --max-restarts 3 --hang-timeout 5 --hb-addr "$net.1" \
    --inject "host@6:$net.12" --cut-link-cmd "$out/cut.sh" "${MPI_NS[@]}"
rc=$?
hosts_ref=$(jq -c 'select(.event == "connected")' "$out/nsref.jsonl" | wc -l)
if [ $rc_ref -eq 0 ] && [ -s "$out/nsref/final.txt" ] && grep -q "rank 3 step 15" "$out/nsref/final.txt" && [ "$hosts_ref" -eq 1 ] &&
    [ $rc -eq 0 ] && cmp -s "$out/nsref/final.txt" "$out/nshost/final.txt" &&
    [ "$(ev "$out/nshost.jsonl" spare-used ".lost == \"$net.12\" and .spare == \"$net.13\"")" -eq 1 ] &&
    [ "$(ev "$out/nshost.jsonl" launch ".hosts == [\"$net.11\", \"$net.13\"]")" -ge 1 ] &&
    [ "$(ev "$out/nshost.jsonl" link-cut '.status == 0')" -eq 1 ]; then
    echo "ok launcher_multihost_lose_host_resumes_on_spare"
else
    echo "FAIL launcher_multihost_lose_host_resumes_on_spare (exit ref $rc_ref, faulted $rc)"; keep nsref; keep nshost
    tail -n 5 "$out/nsref.err" "$out/nshost.err" >&2
fi

# 11. the real trainer loses a host: tp 2 x dp 2, two ranks on each of hosts 1 and 2, host 3 a
# spare; in-memory copies every step (the default under `myriad run`), each rank's copy also
# replicated to a rank on the other host; no disk checkpoints at all. Host 2 dies at step 5: its
# processes, its link and its shared memory (the copies there) are gone. The job must resume on
# hosts 1 + 3 from the replicas held on host 1, recomputing at most one step (when any rank has
# reported step s, step s - 1 has every copy and every replica: CHECKPOINT.md, host-loss
# guarantee), and finish bit-identical to a failure-free run on the same hosts.
/usr/bin/python3 bench/make_tokens.py "$out/tok.bin" 20000 67 3
export MYRIAD_SHM_DIR="$out/shm"
cat >"$out/cut_train.sh" <<CUT
#!/bin/sh
"$out/cut.sh"
rm -rf "$out"/shm/myriad-*/"\$MYRIAD_LOST_HOST"
CUT
chmod +x "$out/cut_train.sh"
train="--arch gpt2 --layers 4 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $out/tok.bin --batch 8 --seq 8 \
--micro-batch 1 --steps 10 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --tp 2 --dp 2"
ip link set "${NS_PREFIX}v2" up
# (--start-timeout 20 --max-restarts: as above, a launch into the namespaces that never starts its
#  ranks is relaunched instead of waiting out the default 300 s)
timeout 180 "$M" run -n 4 --hosts "$out/ns_hosts" --spares 1 --max-restarts 2 --start-timeout 20 --hb-addr "$net.1" "${MPI_NS[@]}" \
    --events "$out/nstref.jsonl" -- train $train --save "$out/nstref" >"$out/nstref.out" 2>&1
rc_ref=$?
timeout 180 "$M" run -n 4 --hosts "$out/ns_hosts" --spares 1 --max-restarts 3 --hang-timeout 10 --start-timeout 20 --hb-addr "$net.1" \
    --inject "host@5:$net.12" --cut-link-cmd "$out/cut_train.sh" "${MPI_NS[@]}" --events "$out/nsthost.jsonl" -- \
    train $train --save "$out/nsthost" >"$out/nsthost.out" 2>&1
rc=$?
if [ $rc_ref -eq 0 ] && [ $rc -eq 0 ] && cmp -s "$out/nstref/model.safetensors" "$out/nsthost/model.safetensors" &&
    [ "$(ev "$out/nsthost.jsonl" spare-used ".lost == \"$net.12\" and .spare == \"$net.13\"")" -eq 1 ] &&
    [ "$(ev "$out/nsthost.jsonl" launch ".hosts == [\"$net.11\", \"$net.13\"]")" -ge 1 ] &&
    [ "$(ev "$out/nsthost.jsonl" resumed '.source == "replica" and .recomputed_steps <= 1')" -ge 1 ] &&
    [ "$(ev "$out/nsthost.jsonl" finished '.status == "ok"')" -eq 1 ]; then
    echo "ok launcher_multihost_trainer_lose_host_resumes_from_replicas_bitidentical ($(jq -c 'select(.event == "resumed") | {source, recomputed_steps}' "$out/nsthost.jsonl" | tr '\n' ' '))"
else
    echo "FAIL launcher_multihost_trainer_lose_host_resumes_from_replicas_bitidentical (exit ref $rc_ref, faulted $rc)"
    keep nstref; keep nsthost
    grep -v '^step' "$out/nstref.out" "$out/nsthost.out" | tail -8 >&2
fi
