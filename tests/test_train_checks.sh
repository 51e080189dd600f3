#!/usr/bin/env bash
# test_train_checks.sh: every flag honoured or refused, everything checkable checked before the
# first step, stop and resume as documented (docs/TRAINING.md). Each group is a class, with cases
# across commands:
#  - numbers out of range are refused by every command with the range in the message;
#  - flags that would be ignored in a combination are refused (--trace without --pp, ...);
#  - bad output paths, missing validation data and too little data fail before step 1 (no step
#    line); data read more than once is said; an error every rank meets is printed once;
#  - --stop-after writes step-N and --resume auto continues bit-identically; a changed setting is
#    refused with both values unless --allow-changed; a checkpoint beyond --steps is an error, one
#    at --steps has nothing to train;
#  - a failed final export goes to a fallback directory, said; no terminal escapes in files;
#  - --vpp 2 selects the interleaved schedule, as --help says.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch checks
mpi_env
PY=/usr/bin/python3
$PY bench/make_tokens.py "$T/tok.bin" 20000 67 3
small="--arch gpt2 --layers 1 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --threads 1 --peak-tflops 1"
common="$small --data $T/tok.bin --batch 4 --seq 16 --lr 3e-3"

# 1. out-of-range numbers, one per command: refused, the range given
range_case() { expect_error "range_$1" "is out of range: give" "${@:2}"; }
range_case train_seq $M train $common --steps 2 --seq -5
range_case train_clip $M train $common --steps 2 --clip -1
range_case train_threads $M train $common --steps 2 --threads 100000
range_case train_beta1 $M train $common --steps 2 --beta1 1
range_case train_zero $M train $common --steps 2 --zero 4
range_case eval_batch $M eval --init tests/fixtures/gpt2-tiny --data $T/tok.bin --batch 0 --seq 8
range_case data_fraction $M data prepare README.md --out "$T/d" --val-fraction 1
range_case sim_gpus $M sim --model gpt3-175b --gpus 0
range_case plan_top $M plan --model gpt3-175b --gpus 64 --top 0
range_case sgemm_reps $M bench sgemm --reps 0
range_case mesh_tp $M mesh --tp 0
range_case run_ranks $M run -n 0 -- mesh
range_case sched_load $M sched simulate --synthetic --gpus 64 --policy fifo --load -1
range_case place_dp $M sched place --cluster gen:2x8 --dp 0
expect_error junk_number "--seq expects an integer in [1, 16777216], got '8x'" $M train $common --steps 2 --seq 8x

# 2. flags that would do nothing in this combination are refused, saying what they need
expect_error trace_needs_pp "--trace records the pipeline schedule" $M train $common --steps 2 --trace "$T/t.json"
expect_error schedule_needs_pp "--schedule is the pipeline's" $M train $common --steps 2 --schedule gpipe
expect_error a2a_barrier_needs_ep "--a2a-barrier" $M train $common --steps 2 --a2a-barrier
expect_error min_lr_needs_cosine "--min-lr is where the cosine schedule ends" $M train $common --steps 2 --min-lr 1e-4
expect_error keep_needs_checkpoints "--keep and --sync-save apply to step checkpoints" $M train $common --steps 2 --save "$T/k" --keep 2
expect_error max_nan_skips_needs_skip "--max-nan-skips applies to --on-nan skip" $M train $common --steps 2 --max-nan-skips 3
expect_error allow_changed_needs_resume "--allow-changed only applies to a --resume" $M train $common --steps 2 --allow-changed batch
expect_error allow_changed_unknown "is not a setting a resume compares" $M train $common --steps 2 --save "$T/k" --resume auto --allow-changed colour
expect_error stop_after_needs_save "--stop-after writes a checkpoint" $M train $common --steps 4 --stop-after 2
expect_error stop_after_beyond_steps "--stop-after 9 is beyond --steps 4" $M train $common --steps 4 --stop-after 9 --save "$T/k"
expect_error inject_beyond_steps "--inject-nan 9 is beyond --steps 4" $M train $common --steps 4 --inject-nan 9
expect_error moe_routing_needs_experts "this model has no experts" $M train $common --steps 2 --moe-routing "$T/r"
expect_error max_seq_with_init "drop --preset and the shape flags" $M train --init tests/fixtures/gpt2-tiny --max-seq 32 --data $T/tok.bin --batch 2 --seq 8 --steps 1
# plan fixes a layout flag it is given and searches the rest (issue #17): every ranked row has tp 8
$M plan --model gpt3-175b --gpus 64 --tp 8 >"$T/plan" 2>"$T/err"; rc=$?
rows=$(awk '/^#  *tp/ {t = 1; next} t && $1 ~ /^[0-9]+$/' "$T/plan" | wc -l)
other=$(awk '/^#  *tp/ {t = 1; next} t && $1 ~ /^[0-9]+$/ && $2 != 8' "$T/plan" | wc -l)
[ $rc = 0 ] && [ "$rows" -ge 1 ] && [ "$other" = 0 ] && pass plan_fixes_layout_flags ||
    fail plan_fixes_layout_flags "rc=$rc rows=$rows with another tp=$other $(head -c 300 "$T/err")"
expect_error sim_spares_need_tokens "give --tokens X" $M sim --model gpt3-175b --gpus 64 --hot-spares 2
expect_error eval_batches_need_val "this run has no validation data" $M train $common --steps 2 --eval-batches 3
expect_error cut_link_needs_host_fault "--cut-link-cmd runs when a host@ fault fires" $M run -n 2 --cut-link-cmd true -- mesh
expect_error skip_bad_needs_trace "--resample and --skip-bad apply to a --trace" $M sched simulate --synthetic --gpus 64 --policy fifo --skip-bad
# a layout that fits (tp 8 pp 8 on 1,024 GPUs), so that the schedule is what is refused
expect_error sim_interleaved_needs_vpp "--schedule interleaved needs --vpp 2" $M sim --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --schedule interleaved
expect_error sim_gpipe_refuses_vpp "--schedule gpipe runs one model chunk per stage" $M sim --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --vpp 2 --schedule gpipe

# 3. before the first step: output paths, validation data, data size (no "step" line printed)
expect_error save_unwritable "--save /proc/x: cannot write in /proc" $M train $common --steps 2 --save /proc/x
expect_error save_is_a_file "exists and is not a directory" $M train $common --steps 2 --save "$T/tok.bin/out"
expect_error log_dir_missing "the directory $T/nope does not exist" $M train $common --steps 2 --log "$T/nope/log.jsonl"
mkdir -p "$T/text" && head -c 3000 README.md >"$T/text/a.txt"
$M data prepare "$T/text" --out "$T/d0" --val-fraction 0 >/dev/null
expect_error eval_every_needs_val_tokens "the validation data holds 0 tokens" $M train $small --data "$T/d0" --batch 2 --seq 16 --steps 2 --eval-every 1
expect_error too_little_data "one batch of 64 x 64 needs" $M train $small --data "$T/d0" --batch 64 --seq 64 --max-seq 64 --steps 1
$M train --preset tiny --layers 1 --hidden 32 --heads 2 --threads 1 --data "$T/d0" --batch 2 --seq 16 --steps 200 --save "$T/s0" \
    >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q "no validation loss will be computed" "$T/err" && grep -q "read the data 2.2 times (steps 94 onward repeat it" "$T/err" &&
    [ -s "$T/s0/model.safetensors" ] && ! grep -q "validation loss" "$T/out" && pass "empty_val_noted_and_data_passes_stated" ||
    fail "empty_val_noted_and_data_passes_stated" "rc=$rc $(grep myriad "$T/err" | head -3)"

# 4. stop and resume: --stop-after writes step-N; the resumed run equals the uninterrupted one
$M train $common --steps 6 --save "$T/full" --log "$T/full.jsonl" >/dev/null 2>&1
$M train $common --steps 6 --stop-after 3 --save "$T/sr" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ -e "$T/sr/step-00000003/manifest.json" ] && [ ! -e "$T/sr/model.safetensors" ] &&
    grep -q "the checkpoint $T/sr/step-00000003 continues it" "$T/err" && pass "stop_after_writes_its_checkpoint" ||
    fail "stop_after_writes_its_checkpoint" "rc=$rc $(tail -1 "$T/err")"
$M train $common --steps 6 --save "$T/sr/" --resume auto --log "$T/sr.jsonl" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && cmp -s "$T/full/model.safetensors" "$T/sr/model.safetensors" &&
    [ "$($PY -c "import json,sys; print([json.loads(l)['step'] for l in open(sys.argv[1])])" "$T/sr.jsonl")" = "[4, 5, 6]" ] &&
    ! grep -q '//' "$T/err" && pass "resume_auto_continues_bitidentical" || fail "resume_auto_continues_bitidentical" "rc=$rc $(tail -2 "$T/err")"
# a save directory holding only interrupted saves (no manifest): no checkpoint yet, --resume auto starts at step 1
mkdir -p "$T/inc/step-00000002" && echo partial >"$T/inc/step-00000002/shard-0.bin"
$M train $common --steps 2 --save "$T/inc" --resume auto --log "$T/inc.jsonl" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ "$($PY -c "import json,sys; print([json.loads(l)['step'] for l in open(sys.argv[1])])" "$T/inc.jsonl")" = "[1, 2]" ] &&
    pass "resume_auto_over_interrupted_saves_starts_fresh" || fail "resume_auto_over_interrupted_saves_starts_fresh" "rc=$rc $(tail -2 "$T/err")"
# --save-every auto: the Young/Daly interval, said on the first line; until a save is measured no
# more often than every 10 steps (an MTBF below half a save asks for every step: Daly's tau = M),
# then re-chosen from the measured save and step (every step again)
$M train $common --steps 24 --save "$T/auto" --save-every auto --mtbf 0.000001 >/dev/null 2>"$T/err"; rc=$?
first=$(grep -m1 "checkpoint policy" "$T/err")
later=$(grep "step 10: checkpoint policy" "$T/err")
n_later=$(sed -n 's/.*--save-every auto = \([0-9]*\) step.*/\1/p' <<<"$later")
[ $rc = 0 ] && [[ "$first" == *"Young/Daly, MTBF 1e-06 s from --mtbf"*"--save-every auto = 10 steps"*estimated* ]] &&
    [ -e "$T/auto/step-00000010/manifest.json" ] && [[ "$later" == *measured* ]] && [ -n "$n_later" ] && [ "$n_later" -lt 10 ] &&
    pass "save_every_auto_chosen_and_rechosen" || fail "save_every_auto_chosen_and_rechosen" "rc=$rc $first | $later"
expect_error mtbf_needs_auto "--mtbf sets the automatic checkpoint intervals" $M train $common --steps 2 --save "$T/k" --mtbf 2h
expect_error save_every_junk "--save-every expects a number of steps >= 0 or auto, got 'often'" $M train $common --steps 2 --save "$T/k" --save-every often
expect_error mtbf_junk "--mtbf expects a duration > 0" $M train $common --steps 2 --save "$T/k" --save-every auto --mtbf 2x
expect_error mem_auto_needs_save "--mem-ckpt-every needs --save DIR" $M train $common --steps 2 --mem-ckpt-every auto
expect_error resume_changed_batch "batch 4 (checkpoint) -> 8 (now)" $M train ${common/--batch 4/--batch 8} --steps 6 --save "$T/sr" --resume "$T/sr/step-00000003"
expect_error resume_changed_seed "seed 1337 (checkpoint) -> 5 (now)" $M train $common --seed 5 --steps 6 --save "$T/sr" --resume "$T/sr/step-00000003"
$M train ${common/--batch 4/--batch 8} --steps 6 --save "$T/sr" --resume "$T/sr/step-00000003" --allow-changed batch >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q "resuming with changed settings (--allow-changed): batch 4 (checkpoint) -> 8 (now)" "$T/err" &&
    pass "allow_changed_accepts_and_says_so" || fail "allow_changed_accepts_and_says_so" "rc=$rc $(tail -1 "$T/err")"
expect_error checkpoint_beyond_steps "the checkpoint is at step 3, beyond --steps 2" $M train $common --steps 2 --save "$T/sr" --resume "$T/sr/step-00000003"
$M train $common --steps 3 --save "$T/sr" --resume "$T/sr/step-00000003" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q "nothing to train" "$T/err" && ! grep -q '^step ' "$T/err" && pass "resume_at_the_end_says_nothing_to_train" ||
    fail "resume_at_the_end_says_nothing_to_train" "rc=$rc $(tail -1 "$T/err")"

# 5. a failed final export: the model goes to a fallback directory, said, exit 1. The export
#    writes DIR/model.safetensors through DIR/model.safetensors.tmp (io/atomic_file.h); a directory
#    in that place makes it fail at the end, deterministically, while DIR itself is writable.
mkdir -p "$T/fb/out/model.safetensors.tmp" "$T/cwd"
(cd "$T/cwd" && $M train $common --steps 3 --save "$T/fb/out" --sample 8 >"$T/fb.out" 2>"$T/fb.err"; echo $? >"$T/fb.rc")
rescue=$(ls -d "$T"/cwd/myriad-rescue-* 2>/dev/null | head -1)
$M train $common --steps 3 --save "$T/fbref" >/dev/null 2>&1
[ "$(cat "$T/fb.rc")" = 1 ] && [ -n "$rescue" ] && cmp -s "$rescue/model.safetensors" "$T/fbref/model.safetensors" &&
    grep -q "cannot save the model to $T/fb/out .* saved it to $rescue instead" "$T/fb.err" &&
    pass "failed_export_saved_to_fallback" || fail "failed_export_saved_to_fallback" "rc=$(cat "$T/fb.rc") $(grep myriad "$T/fb.err")"
if grep -q $'\033' "$T/fb.out" "$T/fb.err"; then fail "no_terminal_escapes_in_files"; else pass "no_terminal_escapes_in_files"; fi

if ! command -v mpirun >/dev/null; then echo "skip distributed checks (mpirun not installed)"; exit 0; fi
# 6. an error every rank meets alike is printed once (command line; data; a path)
expect_one_rank_error once_bad_number "--seq -5 is out of range" $MPI -np 2 $M train $common --steps 2 --seq -5
expect_one_rank_error once_missing_data "does-not-exist" $MPI -np 2 $M train ${common/$T\/tok.bin/$T/does-not-exist.bin} --steps 2
expect_one_rank_error once_bad_save "cannot write in /proc" $MPI -np 2 $M train $common --steps 2 --save /proc/x

# 7. --vpp 2 runs the interleaved schedule (as --help says) without --schedule
if timeout 120 $MPI -np 2 $M train --arch gpt2 --layers 4 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --threads 1 \
        --peak-tflops 1 --data $T/tok.bin --batch 4 --seq 16 --steps 1 --pp 2 --vpp 2 --micro-batch 1 >"$T/out" 2>"$T/err" &&
    grep -q "(interleaved)" "$T/err"; then pass "vpp_selects_interleaved"; else fail "vpp_selects_interleaved" "$(grep myriad "$T/err" | head -2)"; fi
