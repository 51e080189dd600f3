#!/usr/bin/env bash
# test_interrupt.sh: Ctrl-C (SIGINT) loses no work (src/train/stop_signal.c, src/launch/run_cmd.c,
# src/launch/supervise.c) and `--resume auto` finds what an interrupted job left in memory
# (src/train/train_resume.c, src/train/mem_checkpoint.c):
#   - the first SIGINT to `myriad train`, to `myriad run` and to a supervised `myriad run` stops
#     like SIGTERM: every rank checkpoints the step they agree on, the run says how to resume, exit
#     130; resumed, it ends bit-identical to a run never interrupted (the oracle);
#   - a second SIGINT exits at once, saying what it loses (checked against the log);
#   - copies a supervised job left in shared memory are used by `--resume auto` with a changed
#     --steps (which does not change the math of the constant schedule), said so, and the run ends
#     bit-identical to an uninterrupted run of the new length (that resume is not supervised: the
#     copies of an interrupted `myriad run` are found by a resume by hand too); a changed --lr is refused against
#     them as against a disk checkpoint; copies of another world size are named and not used.
# Where a signal lands does not depend on timing: rank 0's --log is a FIFO this test reads, its pipe
# shrunk to 4 KiB, so the trainer cannot run more than ~20 steps ahead of the line the test has
# seen; a second signal is sent only after the first one's message appeared.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
test_scratch interrupt
mpi_env
export MYRIAD_SHM_DIR=$T/shm OMP_NUM_THREADS=1
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3 >/dev/null
model="--arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 4 --seq 16 --lr 1e-3 --threads 1 --peak-tflops 1"

# start CMD... with its --log on FIFO $T/NAME.fifo, stderr in $T/NAME.err; reads LINES log lines
started() { # NAME LINES CMD...
    local name=$1 lines=$2; shift 2
    rm -f "$T/$name.fifo"
    mkfifo "$T/$name.fifo"
    exec 4<>"$T/$name.fifo"                                             # opens without a writer
    /usr/bin/python3 -c 'import fcntl; fcntl.fcntl(4, 1031, 4096)'      # F_SETPIPE_SZ: one page
    exec 3<"$T/$name.fifo"                                              # the read end (fd 4 writes: no EOF yet)
    "$@" --log "$T/$name.fifo" >"$T/$name.out" 2>"$T/$name.err" &
    pid=$!
    # the first line shows the trainer holds the FIFO open: from then on EOF means it closed it
    if IFS= read -r -t 300 -u 3 line; then echo "$line" >>"$T/$name.log"; fi
    exec 4<&-
    for _ in $(seq 2 "$lines"); do IFS= read -r -u 3 line || break; echo "$line" >>"$T/$name.log"; done
}
# the rest of the log, the exit status in rc
finished() { # NAME
    cat <&3 >>"$T/$1.log"
    exec 3<&-
    wait "$pid"
    rc=$?
}
# until the process holding FIFO open for writing (rank 0) is blocked writing to it: the pipe is
# full, so it cannot finish its step (and no rank can stop) until the test reads again
blocked_on_fifo() { # FIFO
    local fifo=$1 p fd
    for _ in $(seq 600); do
        for p in $(pgrep -f "myriad train .*--log $fifo"); do
            for fd in /proc/$p/fd/*; do
                [ "$(readlink "$fd" 2>/dev/null)" = "$fifo" ] || continue
                # /proc/PID/syscall: "1 0xFD ..." while blocked in write(FD, ...)
                [ "$(cut -d' ' -f1,2 "/proc/$p/syscall" 2>/dev/null)" = "1 0x$(printf %x "${fd##*/}")" ] && return 0
            done
        done
        sleep 0.1
    done
    return 1
}
wait_for() { # FILE TEXT: until FILE holds TEXT (at most 60 s)
    for _ in $(seq 600); do grep -qF -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
has() { jq -c "$1" "$2" 2>/dev/null | grep -q .; } # FILTER FILE: some line of FILE passes FILTER
last_step() { tail -1 "$T/$1.log" | sed 's/^{"step": \([0-9]*\),.*/\1/'; }

# --- 1. myriad train: one Ctrl-C -> checkpoint, exit 130, resumed = uninterrupted
"$M" train $model --steps 60 --save "$T/ref1" >/dev/null 2>&1
started a 12 "$M" train $model --steps 60 --save "$T/a" --save-every 50
kill -INT "$pid"
finished a
n=$(last_step a)
resume_rc=1
[ -d "$T/a/step-$(printf %08d "$n")" ] && "$M" train $model --steps 60 --save "$T/a" --resume auto >"$T/a2.out" 2>"$T/a2.err" && resume_rc=0
if [ $rc -eq 130 ] && grep -q "^myriad train: interrupt: stopping after this step with a checkpoint" "$T/a.err" &&
    grep -q "^myriad train: stopped by signal 2 (Interrupt) after step $n; checkpoint saved in $T/a; resume with --resume auto" "$T/a.err" &&
    [ "$resume_rc" -eq 0 ] && grep -q "at step $n" "$T/a2.err" && cmp -s "$T/ref1/model.safetensors" "$T/a/model.safetensors"
then pass "train_ctrl_c_checkpoints_and_resumes_exactly (stopped after step $n)"
else fail train_ctrl_c_checkpoints_and_resumes_exactly "rc=$rc n=$n resume=$resume_rc $(grep -v '^step' "$T/a.err" | tail -3)"; fi

# --- 2. myriad train: a second Ctrl-C exits at once and says what it loses
started b 1 "$M" train $model --steps 100000 --save "$T/b" --save-every 5
blocked_on_fifo "$T/b.fifo" # so that the first Ctrl-C cannot complete its stop before the second
kill -INT "$pid"
wait_for "$T/b.err" "myriad train: interrupt:" && kill -INT "$pid"
finished b
n=$(last_step b)
newest=$(ls "$T"/b/step-*/manifest.json 2>/dev/null | tail -1 | sed 's/.*step-0*\([0-9][0-9]*\)\/manifest.json/\1/') # committed
lost=$(grep -o 'the [0-9]* steps\? after step [0-9]*' "$T/b.err")
# the steps lost end at the last one logged, or at the one whose line it was blocked writing
lost_n=$(echo "$lost" | sed 's/the \([0-9]*\) .*/\1/') lost_from=$(echo "$lost" | sed 's/.* after step //')
if [ $rc -eq 130 ] && grep -q "^myriad train: interrupted again: exiting now without a checkpoint; the [0-9]* steps\? after step [0-9]*, the last checkpoint ($T/b), \(is\|are\) lost" "$T/b.err" &&
    [ -n "$newest" ] && [ $((newest % 5)) -eq 0 ] && [ "$lost_from" = "$newest" ] &&
    { [ $((lost_from + lost_n)) -eq "$n" ] || [ $((lost_from + lost_n)) -eq $((n + 1)) ]; }
then pass "train_second_ctrl_c_exits_saying_what_is_lost ($lost; log at step $n)"
else fail train_second_ctrl_c_exits_saying_what_is_lost "rc=$rc log step $n newest $newest: $(tail -2 "$T/b.err")"; fi

# --- 3. myriad run (plain): the launcher turns one Ctrl-C into a checkpoint of every rank
"$M" run -n 2 -- train $model --dp 2 --steps 60 --save "$T/ref3" >/dev/null 2>&1
started c 12 "$M" run -n 2 -- train $model --dp 2 --steps 60 --save "$T/c" --save-every 50
kill -INT "$pid"
finished c
n=$(last_step c)
resume_rc=1
[ -d "$T/c/step-$(printf %08d "$n")" ] && "$M" run -n 2 -- train $model --dp 2 --steps 60 --save "$T/c" --resume auto >"$T/c2.out" 2>"$T/c2.err" && resume_rc=0
if [ $rc -eq 130 ] && grep -q "^myriad run: interrupt: every rank checkpoints after the step they agree on" "$T/c.err" &&
    grep -q "stopped by signal 10 (User defined signal 1) after step $n; checkpoint saved in $T/c" "$T/c.err" &&
    [ "$resume_rc" -eq 0 ] && cmp -s "$T/ref3/model.safetensors" "$T/c/model.safetensors"
then pass "run_ctrl_c_checkpoints_every_rank (stopped after step $n, resumed exactly)"
else fail run_ctrl_c_checkpoints_every_rank "rc=$rc n=$n resume=$resume_rc $(grep -v '^step' "$T/c.err" | tail -4)"; fi

# --- 4. supervised myriad run: one Ctrl-C stops with a checkpoint (status stopped, exit 130)
started d 12 "$M" run -n 2 --max-restarts 1 --events "$T/d.ev" -- train $model --dp 2 --steps 100000 --save "$T/d" --save-every 1000
kill -INT "$pid"
finished d
n=$(last_step d)
if [ $rc -eq 130 ] && [ -d "$T/d/step-$(printf %08d "$n")" ] &&
    has 'select(.event == "stopped" and .signal == 2 and .ranks_checkpointed == 2 and .exit_code == 130)' "$T/d.ev" &&
    has 'select(.event == "finished" and .status == "stopped")' "$T/d.ev"
then pass "supervised_ctrl_c_checkpoints (step $n)"
else fail supervised_ctrl_c_checkpoints "rc=$rc n=$n $(tail -3 "$T/d.ev")"; fi

# --- 5. supervised, Ctrl-C twice: stopped at once, copies left; --resume auto with more --steps uses them
"$M" run -n 2 -- train $model --dp 2 --steps 60 --save "$T/ref5" >/dev/null 2>&1
started e 1 "$M" run -n 2 --max-restarts 1 --events "$T/e.ev" -- train $model --dp 2 --steps 100000 --save "$T/e"
blocked_on_fifo "$T/e.fifo"
kill -INT "$pid"
wait_for "$T/e.err" "myriad run: interrupt:" && kill -INT "$pid"
finished e
n=$(last_step e)
if [ $rc -eq 130 ] && has 'select(.event == "interrupted" and .signal == 2)' "$T/e.ev" &&
    grep -q "^myriad run: stopped at once at job step [0-9]*: the in-memory copies of step [0-9]* remain" "$T/e.err" &&
    has 'select(.event == "copies-left")' "$T/e.ev" && [ ! -d "$T/e/step-$(printf %08d "$n")" ]
then pass "supervised_second_ctrl_c_stops_at_once (log at step $n, copies left)"
else fail supervised_second_ctrl_c_stops_at_once "rc=$rc n=$n $(grep -v '^step' "$T/e.err" | tail -3)"; fi
copies=$(jq -r 'select(.event == "copies-left") | .dir' "$T/e.ev" | head -1)
# another --lr is refused against the copies' settings, which stay
expect_error resume_refuses_changed_lr_against_copies "--resume auto (in-memory copies): the run's settings changed: lr" \
    "$M" run -n 2 -- train $model --dp 2 --steps 60 --save "$T/e" --resume auto --lr 2e-3
# a single process cannot use copies of 2 ranks: said, not used (--stop-after 1 leaves them, and a
# disk checkpoint of step 1 that the memory copies are newer than)
"$M" train $model --steps 60 --save "$T/e" --resume auto --stop-after 1 >"$T/e1.out" 2>"$T/e1.err"
if grep -q "^myriad train: --resume auto: in-memory copies: [0-9]* in $copies are of another layout or world size (2 ranks; now 1): not usable" "$T/e1.err"
then pass resume_names_copies_of_another_world_size
else fail resume_names_copies_of_another_world_size "$(grep -e '--resume' "$T/e1.err" | head -2)"; fi
"$M" run -n 2 -- train $model --dp 2 --steps 60 --save "$T/e" --resume auto >"$T/e2.out" 2>"$T/e2.err"; rc=$?
from=$(sed -n 's/^resumed from memory .* at step \([0-9]*\)$/\1/p' "$T/e2.err")
if [ $rc -eq 0 ] && grep -q "^myriad train: --resume auto: in-memory copies: [0-9]* of steps [0-9]*\.\.[0-9]* in $copies, complete up to step $from: using them (newer than the disk checkpoint)" "$T/e2.err" &&
    [ -n "$from" ] && [ "$from" -ge 5 ] && cmp -s "$T/ref5/model.safetensors" "$T/e/model.safetensors" && [ ! -d "$copies" ]
then pass "resume_uses_copies_with_changed_steps (from step $from, --steps 100000 -> 60, final weights = uninterrupted; copies freed)"
else fail resume_uses_copies_with_changed_steps "rc=$rc from='$from' $(grep -e '--resume\|resumed' "$T/e2.err" | head -3)"; fi
