#!/usr/bin/env bash
# test_slurm.sh: myriad through a real Slurm cluster started here (tests/slurm/cluster.sh: Debian's
# slurmctld + six slurmd for emulated nodes n1..n6, munge, cons_tres, topology/tree). Cases:
#  - the cluster comes up with every node idle, and slurmctld accepts the topology.conf written by
#    `myriad sched place --slurm-topology` (scontrol show topology lists its switches);
#  - `sched place --from-slurm` with two nodes allocated avoids them and keeps the TP group under
#    one leaf switch (and says clearly when a layout cannot be placed now);
#  - sbatch of the script from `myriad run --slurm-script`: tp 2 x dp 2 over 4 nodes through srun
#    --mpi=pmix; its losses equal the single-process run's (1e-5 relative);
#  - `myriad run --preflight` inside the allocation: the doctor over its 5 nodes through srun, no
#    host flagged, training on the first 4 with the reference run's final weights;
#  - a node of a running job dies (its slurmd, slurmstepd and tasks killed): myriad run relaunches
#    on the allocation's spare node, the event log names the lost node, and the final weights are
#    bit-identical to the failure-free run;
#  - no spare: a node marked down mid-run makes myriad run exit 75, the job requeues itself and
#    resumes from its checkpoint to the same final weights;
#  - the warning signal before the time limit (B:USR1, sent here with scancel): a checkpoint, exit
#    75, requeue, resume, same final weights;
#  - afterwards no process of the cluster is left.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
M=$ROOT/bin/myriad
source tests/slurm/cluster.sh
# each result also goes to stderr with the seconds since the previous one (the time budget)
last=$SECONDS
pass() { echo "ok $1"; echo "[$((SECONDS - last)) s] ok $1" >&2; last=$SECONDS; }
fail() { echo "FAIL $1${2:+ ($2)}"; echo "[$((SECONDS - last)) s] FAIL $1" >&2; last=$SECONDS; }
why=$(slurm_missing)
if [ -n "$why" ]; then echo "skip test_slurm ($why)"; exit 0; fi
D=$(mktemp -d /tmp/myriad-slurm-XXXXXX)
T=$D/work
mkdir -p "$T"
cleanup() { # KEEP_SLURM_TEST=1 keeps DIR (logs, jobs' outputs and events) for a look afterwards
    slurm_cluster_stop "$D" >/dev/null 2>&1
    [ -z "$(slurm_cluster_alive "$D")" ] && [ -z "${KEEP_SLURM_TEST:-}" ] && rm -rf "$D"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive

if ! slurm_cluster_start "$D" "$M" >"$D/start.log" 2>&1; then
    fail slurm_cluster_starts "$(tail -3 "$D/start.log") $(tail -3 "$D/log/slurmctld.log" 2>/dev/null)"
    exit 1
fi
idle=$(with_slurm sinfo -h -N -o '%N %T' | sort -u | tr '\n' ' ')
if [ "$idle" = "n1 idle n2 idle n3 idle n4 idle n5 idle n6 idle " ]; then pass slurm_cluster_nodes_idle
else fail slurm_cluster_nodes_idle "$idle"; fi

topo=$(with_slurm scontrol show topology)
if echo "$topo" | grep -q '^SwitchName=leaf0 Level=0 .*Nodes=n1,n2$' && echo "$topo" | grep -q '^SwitchName=leaf2 Level=0 .*Nodes=n5,n6$' &&
    echo "$topo" | grep -q '^SwitchName=spine0 Level=1 .*Nodes=n\[1-4\] Switches=leaf0,leaf1$' &&
    echo "$topo" | grep -q '^SwitchName=root Level=2 .*Nodes=n\[1-6\] Switches=spine0,spine1$'; then
    pass slurm_accepts_sched_place_topology
else fail slurm_accepts_sched_place_topology "$topo"; fi

# ---- placement from the live cluster: n2 and n3 busy (one in each of the first two leaves)
hold=$(with_slurm sbatch --parsable -N2 -w n2,n3 -o /dev/null --wrap 'sleep 300')
for _ in $(seq 100); do [ "$(with_slurm squeue -h -j "$hold" -o %T)" = RUNNING ] && break; sleep 0.1; done
out=$(with_slurm "$M" sched place --from-slurm --tp 2 --dp 1 2>&1)
if [ "$(echo "$out" | head -1)" = "n[5-6]" ] && echo "$out" | grep -q "under leaf switch leaf2 (level 0), 1 leaf switch;" &&
    echo "$out" | grep -q -- "--nodelist=n\[5-6\] --switches=1"; then
    pass place_from_slurm_avoids_allocated_tp_in_one_leaf
else fail place_from_slurm_avoids_allocated_tp_in_one_leaf "$out"; fi
out=$(with_slurm "$M" sched place --from-slurm --tp 2 --dp 2 2>&1)
rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q "^myriad: sched place: the job needs 4 nodes with every tensor-parallel group of 2 nodes under one leaf switch; 4 idle nodes are, at most 2"; then
    pass place_from_slurm_says_why_not_now
else fail place_from_slurm_says_why_not_now "rc=$rc $out"; fi
with_slurm scancel "$hold"

# ---- training jobs
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
model="--arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 8 --seq 8 --micro-batch 1 --lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --steps 12"
# job NAME SPARES [RUN OPTIONS...] [-- TRAIN FLAGS...]: writes NAME/job.sbatch with --slurm-script
# and submits it; prints the job id
job() {
    local name=$1 spares=$2 run=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do run+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    rm -rf "${T:?}/$name" && mkdir -p "$T/$name"
    (cd "$T/$name" && "$M" run --slurm-script -n 4 --spares "$spares" --gpus-per-task 1 --switches 3 --max-restarts 2 \
        --hang-timeout 60 --probe-timeout 20 --events "$T/$name/events.jsonl" --output "$T/$name/out.txt" "${run[@]}" -- \
        train $model --tp 2 --dp 2 --save "$T/$name/ck" --log "$T/$name/log.jsonl" "$@" >job.sbatch &&
        with_slurm sbatch --parsable job.sbatch)
}
# a fault that the job's own myriad run fires at step 4 (the ranks wait there until it is done),
# in the first start of the job only (a requeued start must not repeat it); NODE2 = the second
# node of the allocation, which holds rank 1
first_start() { echo '[ "${SLURM_RESTART_COUNT:-0}" = 0 ] || exit 0; NODE2=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 2p); '"$1"; }
wait_job() { # JOBID: until Slurm no longer lists it (at most 180 s)
    local t
    for t in $(seq 900); do [ -z "$(with_slurm squeue -h -j "$1" -o %T 2>/dev/null)" ] && return 0; sleep 0.2; done
    return 1
}
job_field() { with_slurm scontrol show job "$1" | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }

# tp 2 x dp 2 over 4 nodes: the losses of the single-process run
"$M" train $model --log "$T/single.jsonl" >/dev/null 2>&1
j=$(job ref 0)
wait_job "$j"
cmp_losses=$(/usr/bin/python3 - "$T/single.jsonl" "$T/ref/log.jsonl" <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) == 12 else float("inf")
print("ok" if worst <= 1e-5 else "bad", len(a), len(b), worst)
PY
)
launch=$(grep -m1 '"event":"launch"' "$T/ref/events.jsonl")
if [ "$(job_field "$j" JobState)" = COMPLETED ] && [[ "$cmp_losses" == ok* ]] && [[ "$launch" == *"srun --ntasks=4 --nodes=4 --distribution=arbitrary"*"--mpi=pmix"* ]] &&
    [ "$(grep -o '"hosts":\[[^]]*\]' <<<"$launch")" = '"hosts":["n1","n2","n3","n4"]' ]; then
    pass "sbatch_tp2_dp2_4_nodes_losses_match_single_process ($cmp_losses)"
else fail sbatch_tp2_dp2_4_nodes_losses_match_single_process "state $(job_field "$j" JobState) losses $cmp_losses $(tail -3 "$T/ref/out.txt")"; fi

# pre-flight through the real daemons: the job's myriad run launches `myriad doctor` with srun
# over all 5 nodes of the allocation (the 4 working ones and the spare), reads its verdict, and
# trains on the first 4. The thresholds are set at 90% because this case checks the plumbing
# (srun, PMIx, the verdict's hosts, the launch), not the judging, which test_doctor.sh covers:
# five emulated nodes sharing two cores must not be flagged by noise.
j=$(job pre 1 --preflight --preflight-out "$T/pre/verdict.json" --doctor-arg --reps --doctor-arg 2 \
    --doctor-arg --threshold --doctor-arg 0.9 --doctor-arg --noise-k --doctor-arg 0)
wait_job "$j"
pre=$(/usr/bin/python3 - "$T/pre/events.jsonl" "$T/pre/verdict.json" <<'PY' 2>&1
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
verdict = json.load(open(sys.argv[2]))
pf = [e for e in ev if e["event"] == "preflight"]
fin = [e for e in ev if e["event"] == "finished"] or [{"event": None}] # the goodput event comes after it
launch = [e for e in ev if e["event"] == "launch"]
hosts = sorted(h["host"] for h in verdict["hosts"])
ok = (len(pf) == 1 and pf[0]["ok"] and pf[0]["hosts"] == 5 and pf[0]["flagged"] == [] and "srun" in pf[0]["cmd"]
      and "doctor" in pf[0]["cmd"] and hosts == ["n1", "n2", "n3", "n4", "n5"] and verdict["ranks"] == 5
      and verdict["setup"]["device"] == "cpu" and launch and launch[0]["hosts"] == ["n1", "n2", "n3", "n4"]
      and fin[-1]["event"] == "finished" and fin[-1]["status"] == "ok")
print("ok" if ok else "bad", "doctor on", ",".join(hosts), "in %.1f s" % pf[0]["seconds"] if pf else "no preflight event")
PY
)
if [ "$(job_field "$j" JobState)" = COMPLETED ] && [[ "$pre" == ok* ]] && cmp -s "$T/ref/ck/model.safetensors" "$T/pre/ck/model.safetensors"; then
    pass "preflight_doctor_over_allocation_then_train (${pre#ok })"
else fail preflight_doctor_over_allocation_then_train "state $(job_field "$j" JobState): $pre $(grep -h myriad "$T/pre/out.txt" | tail -3)"; fi

# a node dies mid-run; the allocation's spare node takes its place
j=$(job spare 1 --inject cmd@4 --fault-cmd "$(first_start "/usr/bin/python3 $ROOT/tests/slurm/procs.py kill-node $D \$NODE2")")
wait_job "$j"
lost=$(grep -o 'killed node n[0-9]' "$T/spare/out.txt" | head -1 | cut -d' ' -f3)
events=$(/usr/bin/python3 - "$T/spare/events.jsonl" "$lost" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
lost = [e for e in ev if e["event"] == "node-lost"]
fin = [e for e in ev if e["event"] == "finished"] or [{"status": None}] # the goodput event comes after it
spare = [e for e in ev if e["event"] == "spare-used"]
relaunch = [e for e in ev if e["event"] == "launch" and e["attempt"] == 1]
ok = (len(lost) == 1 and lost[0]["node"] == sys.argv[2] and spare and spare[0]["lost"] == sys.argv[2] and relaunch
      and sys.argv[2] not in relaunch[0]["hosts"] and "--exclude=" + sys.argv[2] in relaunch[0]["cmd"]
      and fin[-1]["status"] == "ok" and fin[-1]["restarts"] == 1)
print("ok" if ok else "bad", lost[0]["why"] if lost else "no node-lost", "->", spare[0]["spare"] if spare else "no spare")
PY
)
if cmp -s "$T/ref/ck/model.safetensors" "$T/spare/ck/model.safetensors" && [[ "$events" == ok* ]]; then
    pass "node_dies_relaunch_on_spare_bitidentical ($lost: ${events#ok })"
else fail node_dies_relaunch_on_spare_bitidentical "$events $(grep -h 'myriad' "$T/spare/out.txt" | tail -3)"; fi
with_slurm slurmd -N "$lost" && with_slurm scontrol update nodename="$lost" state=resume 2>/dev/null

# no spare: a node marked down mid-run; exit 75, requeue, resume from the checkpoint on disk (no
# in-memory copies: the emulated nodes' memory would outlive the requeue, a real node's need not)
j=$(job requeue 0 --inject cmd@4 --fault-cmd "$(first_start 'echo "marking $NODE2 down"; scontrol update nodename=$NODE2 state=down reason=myriad-test')" -- --save-every 4 --sync-save --mem-ckpt-every 0)
wait_job "$j"
down=$(grep -o 'marking n[0-9]* down' "$T/requeue/out.txt" | head -1 | cut -d' ' -f2)
if cmp -s "$T/ref/ck/model.safetensors" "$T/requeue/ck/model.safetensors" && [ "$(job_field "$j" Restarts)" = 1 ] &&
    grep -q '"event":"node-lost","node":"'"$down"'"' "$T/requeue/events.jsonl" &&
    grep -q '"event":"finished",.*"status":"requeue",.*"exit_code":75' "$T/requeue/events.jsonl" &&
    grep -q '"event":"resumed","attempt":0,"first_step":5,.*"source":"disk"' "$T/requeue/events.jsonl" &&
    grep -q "^myriad: requeueing job $j" "$T/requeue/out.txt"; then
    pass "no_spare_requeue_resumes_bitidentical (down $down, checkpoint of step 4 from disk, first step 5)"
else fail no_spare_requeue_resumes_bitidentical "restarts $(job_field "$j" Restarts) $(grep -h 'myriad' "$T/requeue/out.txt" | tail -4)"; fi
with_slurm scontrol update nodename="$down" state=resume

# the warning before the time limit (--signal=B:USR1@LEAD; scancel sends it now): checkpoint, requeue, resume
j=$(job signal 0 --inject cmd@4 --fault-cmd "$(first_start 'scancel --signal=USR1 --batch $SLURM_JOB_ID')" -- --mem-ckpt-every 0)
wait_job "$j"
stopped=$(grep -o '"event":"stopped","signal":10,"ranks_checkpointed":4,"step":[0-9]*' "$T/signal/events.jsonl")
if cmp -s "$T/ref/ck/model.safetensors" "$T/signal/ck/model.safetensors" && [ "$(job_field "$j" Restarts)" = 1 ] &&
    [ -n "$stopped" ] && grep -q '"event":"rank-event","rank":0,"name":"restored-from-disk"' "$T/signal/events.jsonl"; then
    pass "usr1_before_time_limit_checkpoint_requeue_bitidentical (${stopped##*:} steps before the signal)"
else fail usr1_before_time_limit_checkpoint_requeue_bitidentical "restarts $(job_field "$j" Restarts) $(grep -h 'myriad' "$T/signal/out.txt" | tail -4)"; fi

# all gone
slurm_cluster_stop "$D"
left=$(slurm_cluster_alive "$D")
if [ -z "$left" ]; then pass slurm_cluster_stopped_no_process_left
else fail slurm_cluster_stopped_no_process_left "left: $left"; fi
