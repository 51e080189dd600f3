#!/usr/bin/env bash
# tests/test_supervisor_scale.sh: the supervisor holds thousands of heartbeat connections.
# tests/hb_load.c simulates 2,000 ranks in one process (`myriad run --launcher direct`), each
# with its own authenticated connection, a step every 0.25 s. Under a soft open-file limit of
# 1,024 (the usual default) the supervisor raises its limit (event fd-limit) and every rank
# connects; a rank that falls silent is declared dead within the hang timeout (and named); a
# rank whose connection closes is found at once and the job relaunched, all 2,000 ranks
# reconnecting and finishing; under a hard limit of 1,024 the run is refused with one line that
# names the limit and how to raise it. The 10,000-rank run and its CPU use: bench/supervisor_scale.sh.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch scale
LOAD=$PWD/build/hb_load
if ! mpicc -O2 -std=gnu11 -Isrc tests/hb_load.c build/libmyriad.a -o "$LOAD" -lcjson -lm -lpthread 2>"$T/cc.err"; then
    fail supervisor_scale_build_load_generator "$(head -3 "$T/cc.err")"
    exit 1
fi
N=2000
ev() { jq -c "select(.event == \"$2\")${3:+ | select($3)}" "$1" 2>/dev/null | wc -l; }

# a rank falls silent after step 4 (its connection stays open, like a frozen host): hang timeout 2 s
(ulimit -Sn 1024 && timeout 120 "$M" run -n $N --launcher direct --hang-timeout 2 --max-restarts 0 --events "$T/silent.jsonl" \
    --exec -- "$LOAD" --ranks $N --period 0.25 --steps 40 --silence 1234@4) >"$T/silent.out" 2>"$T/silent.err"
rc=$?
silent=$(jq -r 'select(.event == "heartbeat-timeout") | .silent_s' "$T/silent.jsonl" 2>/dev/null | head -1)
if [ $rc -ne 0 ] && [ "$(ev "$T/silent.jsonl" fd-limit '.raised_from == 1024')" -eq 1 ] &&
    [ "$(ev "$T/silent.jsonl" connected ".ranks == $N")" -eq 1 ] && [ "$(ev "$T/silent.jsonl" auth-refused)" -eq 0 ] &&
    [ "$(ev "$T/silent.jsonl" heartbeat-timeout '.rank == 1234 and .step == 4')" -eq 1 ] &&
    awk -v s="$silent" 'BEGIN { exit !(s >= 2 && s <= 3) }' &&
    [ "$(ev "$T/silent.jsonl" kill '(.pids | length) == 1')" -eq 1 ]; then
    pass "supervisor_${N}_ranks_silent_rank_found (soft limit 1024 raised; rank 1234 declared dead after ${silent} s, timeout 2 s)"
else
    fail "supervisor_${N}_ranks_silent_rank_found" "exit $rc, silent '$silent'; $(grep -v rank-times "$T/silent.jsonl" | cut -c1-160 | tail -4)"
fi

# a rank's connection closes at step 3: found at once, the job relaunched, every rank back and done
(ulimit -Sn 1024 && timeout 120 "$M" run -n $N --launcher direct --hang-timeout 5 --max-restarts 1 --events "$T/close.jsonl" \
    --exec -- "$LOAD" --ranks $N --period 0.25 --steps 8 --close 777@3) >"$T/close.out" 2>"$T/close.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(ev "$T/close.jsonl" exit '.rank == 777 and .step == 3')" -eq 1 ] &&
    [ "$(ev "$T/close.jsonl" connected ".ranks == $N")" -eq 2 ] &&
    [ "$(ev "$T/close.jsonl" finished '.status == "ok" and .restarts == 1 and .steps == 8')" -eq 1 ] &&
    grep -q "hb_load: $N ranks, $N finished" "$T/close.out"; then
    pass "supervisor_${N}_ranks_closed_rank_relaunched"
else
    fail "supervisor_${N}_ranks_closed_rank_relaunched" "exit $rc; $(grep -v rank-times "$T/close.jsonl" | cut -c1-160 | tail -4)"
fi

# a hard limit too low for the ranks: refused before launching anything, with the fix
expect_error supervisor_fd_limit_refused "$N ranks need $((N + 192)) open files" \
    bash -c "ulimit -n 1024 && exec '$M' run -n $N --launcher direct --exec -- '$LOAD' --ranks $N"
grep -q "ulimit -n $((N + 192))" "$T/err" && pass supervisor_fd_limit_refusal_says_how || fail supervisor_fd_limit_refusal_says_how "$(cat "$T/err")"
