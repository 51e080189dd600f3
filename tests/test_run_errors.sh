#!/usr/bin/env bash
# test_run_errors.sh: errors under `myriad run` are one clear line (src/launch/run_cmd.c's check
# before launch, src/train/train_precheck.c, src/launch/mpi_noise.c):
#   - a train command line that cannot work with N ranks (a shape tensor parallelism cannot split,
#     an option out of range, a layout that does not divide the world) is refused by the launcher
#     itself, before any rank starts: exactly one line, exit 1, no mpirun (no log of its messages);
#   - an error every rank finds alike at run time (a checkpoint with a shard missing) is printed
#     once, mpirun's boxes go to the log file named in the last line, not to the terminal; the same
#     under the supervisor.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
test_scratch runerr
mpi_env
export OMP_NUM_THREADS=1
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3 >/dev/null
model="--arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data $T/tok.bin --batch 4 --seq 16 --lr 1e-3 --threads 1 --peak-tflops 1"

# one_line_before_launch NAME WANT RUN_ARGS... -- TRAIN_ARGS: exactly WANT on stderr, exit 1, nothing launched
one_line_before_launch() {
    local name=$1 want=$2; shift 2
    rm -f "$T/mpi.log"
    timeout 120 "$M" run --mpi-log "$T/mpi.log" "$@" >"$T/out" 2>"$T/err"; local rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && [ "$(cat "$T/err")" = "$want" ] && [ ! -e "$T/mpi.log" ] &&
        [ ! -s "$T/out" ]; then pass "$name"
    else fail "$name" "rc=$rc $(head -c 400 "$T/err")"; fi
}
one_line_before_launch tp_does_not_split_heads "myriad: heads 4 are not divisible by --tp 3 (attention is split by heads)" \
    -n 3 -- train $model --steps 2 --tp 3
one_line_before_launch zero_out_of_range "myriad: train: --zero 5 is out of range: give an integer in [0, 3]" \
    -n 2 -- train $model --steps 2 --dp 2 --zero 5
one_line_before_launch layout_does_not_divide_world "myriad: --tp 2 does not divide the world size 3" \
    -n 3 -- train $model --steps 2 --tp 2
one_line_before_launch supervised_checks_before_launch "myriad: --batch 4 is not divisible by --dp 3 x --ep 1: each data-parallel rank takes an equal slice" \
    -n 3 --max-restarts 0 --events "$T/ev.jsonl" -- train $model --steps 2 --dp 3
if [ ! -s "$T/ev.jsonl" ] || ! grep -q '"event":"launch"' "$T/ev.jsonl"; then pass supervised_launched_nothing
else fail supervised_launched_nothing "$(head -2 "$T/ev.jsonl")"; fi

# a run-time error every rank meets: said once, mpirun's own messages in the log it names
"$M" run -n 2 -- train $model --dp 2 --steps 4 --save "$T/ck" --stop-after 2 >/dev/null 2>&1
rm -f "$T/ck/step-00000002/rank-00001.bin"
for how in plain supervised; do
    extra=()
    [ $how = supervised ] && extra=(--max-restarts 0)
    rm -f "$T/mpi.log"
    timeout 120 "$M" run -n 2 "${extra[@]}" --mpi-log "$T/mpi.log" -- train $model --dp 2 --steps 4 --save "$T/ck" \
        --resume auto >"$T/out" 2>"$T/err"; rc=$?
    said=$(grep -c 'rank-00001.bin is missing' "$T/err")
    if [ $rc -ne 0 ] && [ "$said" -eq 1 ] && ! grep -q -e '^-----' -e '^mpirun' -e 'Primary job' "$T/err" &&
        grep -q "^myriad run: mpirun's own messages ([0-9]* lines\?.*) are in $T/mpi.log$" "$T/err" &&
        grep -q 'mpirun detected that one or more processes exited with non-zero status' "$T/mpi.log"
    then pass "rank_error_once_mpirun_noise_in_log_$how"
    else fail "rank_error_once_mpirun_noise_in_log_$how" "rc=$rc said=$said $(grep -v '^myriad train' "$T/err" | head -c 600)"; fi
done
