#!/usr/bin/env bash
# mutate.sh: mutation testing of the test suite. Each mutation below is a small, plausible bug
# (one replaced piece of code, at least one per subsystem: kernels, optimizer, DP/ZeRO, TP, PP
# schedule, checkpoint CRC and resume, launcher, simulator, scheduler, non-finite handling). They are applied
# one at a time to a scratch clone of the committed HEAD, which is rebuilt, and the tests that
# cover that subsystem are run (`bash tests/run.sh FILTER` for each filter listed: a subset, to keep
# the run practical). A mutation is killed when some test fails; one that survives is a hole in
# the suite. First the same filters run on the unmutated clone: they must all pass, or a "kill"
# would prove nothing (the script stops). Not part of `make test` (it takes tens of minutes): run
# it by hand and record the score
#     bash scripts/mutate.sh [OUT.md] [NAME...]    (default OUT bench/mutate_results.md)
# With NAMEs only those mutations run; their rows replace the same rows in OUT and the other rows
# of OUT are kept (each row names its commit), so a long run can be done a few mutations at a
# time. OUT is rewritten after every mutation, so an interrupted run keeps what it measured.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
# absolute: the script works in a scratch clone, where a relative OUT would be written and lost
out=$(realpath -m -- "${1:-$repo/bench/mutate_results.md}")
shift $(( $# > 0 ? 1 : 0 ))
only=" $* "
scratch=$(mktemp -d /tmp/myriad-mutate-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# NAME|SUBSYSTEM|FILE|TEST FILTERS (comma-separated)|WHAT, then the line to replace ("-") and its
# replacement ("+"); the "-" text must occur exactly once in FILE.
read -r -d '' MUTATIONS <<'EOF'
dp_grad_sum|DP/ZeRO|src/parallel/data_parallel.c|test_dp.sh|data-parallel gradient summed instead of averaged (ZeRO 0)
-    if (dp->o.zero == 0) must(comm_iall_reduce(b->group, buf, buf, n, dt, COMM_AVG, &b->req));
+    if (dp->o.zero == 0) must(comm_iall_reduce(b->group, buf, buf, n, dt, COMM_SUM, &b->req));
zero_grad_sum|DP/ZeRO|src/parallel/data_parallel.c|test_dp.sh|ZeRO reduce-scatter sums instead of averaging
-                                  COMM_AVG, &b->req));
+                                  COMM_SUM, &b->req));
easy_extra_uncharged|scheduler|src/sched/sim.c|test_sched|EASY backfill does not charge backfilled jobs against the reservation's spare GPUs
-        } else if (g <= r->extra) r->extra -= g;
+        } else if (g <= r->extra) {}
reservation_ignores_repairs|scheduler|src/sched/sim.c|test_sched|the shadow time ignores repairs of failed nodes (the bug fixed for #18)
-    int spares_to_fill = s->pol->hot_spares - s->spares_now, i = 0, k = 0;
+    int spares_to_fill = s->pol->hot_spares - s->spares_now, i = 0, k = 0; nf = 0;
preempt_equal_priority|scheduler|src/sched/sim.c|test_sched|preemption may stop a job of equal priority
-        if (r->priority < j->priority && can_be_victim(s, r) && r->gpus_per_task > 0) {
+        if (r->priority <= j->priority && can_be_victim(s, r) && r->gpus_per_task > 0) {
gelu_constant|kernels|src/kernels/cpu/cpu_pointwise.c|test_torch_fixture,test_kernels_cpu|GELU tanh approximation with a wrong cubic coefficient
-#define GELU_C 0.044715
+#define GELU_C 0.04715
attention_mask|kernels|src/kernels/cpu/cpu_attention.c|test_kernels_cpu,test_torch_fixture|causal mask leaks the next token into the attention weights
-                    for (int s = t + 1; s < T; s++) p[s] = 0;
+                    for (int s = t + 2; s < T; s++) p[s] = 0;
adam_bias_correction|optimizer|src/optim/adamw.c|test_optim,test_torch_fixture|AdamW without the first-moment bias correction
-    real bc2_sqrt = (real)sqrt(bc2), eps = (real)c->eps, neg_step = (real)(-(lr / bc1));
+    real bc2_sqrt = (real)sqrt(bc2), eps = (real)c->eps, neg_step = (real)(-(lr));
clip_scales_up|optimizer|src/optim/clip.c|test_optim,test_torch_fixture|gradient clipping also scales small gradients up to the limit
-    return coef < 1.0 ? coef : 1.0;
+    return coef;
clip_clamped_at_max_norm|optimizer|src/optim/clip.c|test_optim|gradient clipping clamps the coefficient at max_norm instead of 1 (a norm below --clip 0.5 is scaled by 0.5; the same at --clip 1)
-    return coef < 1.0 ? coef : 1.0;
+    return coef < 1.0 ? coef : max_norm;
cosine_full_period|optimizer|src/optim/lr_schedule.c|test_optim|the cosine schedule runs a full period (back up to lr) instead of a half
-    return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1 + cos(M_PI * progress));
+    return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1 + cos(2 * M_PI * progress));
tp_sum_averaged|TP|src/parallel/tensor_parallel.c|test_tp.sh|tensor-parallel partial sums averaged instead of summed
-    if (comm_all_reduce((Comm *)ctx, x, x, n, COMM_F32, COMM_SUM)) myr_die_last();
+    if (comm_all_reduce((Comm *)ctx, x, x, n, COMM_F32, COMM_AVG)) myr_die_last();
onef1b_warmup|PP schedule|src/parallel/schedule.c|test_schedule|1F1B runs one warm-up forward too many (p-s instead of p-1-s)
-        int warm = p - 1 - s < m ? p - 1 - s : m, f = 0, b = 0;
+        int warm = p - s < m ? p - s : m, f = 0, b = 0;
pp_norm_one_stage|PP schedule|src/train/trainer.c|test_pp.sh|pipeline gradient norm not summed over the stages
-    sum_sq = group_sum_exact(pl->pp_group, sum_sq);
+    sum_sq = sum_sq;
ckpt_block_crc_unchecked|checkpoint CRC|src/ckpt/ckpt_reader.c|test_ckpt|a shard block's CRC-32C is not checked on read
-    if (crc32c(buf, n) != p->crc[b])
+    if (0 && crc32c(buf, n) != p->crc[b])
crc32c_polynomial|checkpoint CRC|src/ckpt/crc32c.c|test_ckpt|CRC-32C with the CRC-32 (IEEE) polynomial
-#define CRC32C_POLY_REFLECTED 0x82F63B78u
+#define CRC32C_POLY_REFLECTED 0xEDB88320u
heartbeat_mac_unchecked|launcher|src/launch/heartbeat.c|test_launcher|heartbeat lines accepted without checking their MAC
-    if (!equal_const_time(got, want, 32)) return myr_error("heartbeat: bad MAC (wrong job secret?)");
+    if (0 && !equal_const_time(got, want, 32)) return myr_error("heartbeat: bad MAC (wrong job secret?)");
max_restarts_off_by_one|launcher|src/launch/supervise.c|test_launcher.sh|one restart more than --max-restarts
-        if (s->attempt == o->max_restarts) break;
+        if (s->attempt == o->max_restarts + 1) break;
sim_optimizer_bytes|simulator|src/sim/memory.c|test_sim|mixed-precision optimizer state counted as 16 bytes per parameter instead of 12
-    double ob = wb == 4 ? 8 : 12; /* fp32 training: Adam m, v only */
+    double ob = wb == 4 ? 8 : 16; /* fp32 training: Adam m, v only */
sim_inflight_1f1b|simulator|src/sim/memory.c|test_sim|1F1B holds one more micro-batch's activations than it does
-    else if (v == 1) chunks = fmin(p - stage, mb);
+    else if (v == 1) chunks = fmin(p - stage + 1, mb);
resume_prefers_stale_memory|checkpoint resume|src/train/train_resume.c|test_resume_stale|--resume auto restores an in-memory copy older than the newest disk checkpoint (the staleness check removed)
-    long min_step = disk_step < 0 ? 0 : disk_step;
+    long min_step = 0;
nan_norm_ignored|non-finite|src/train/trainer.c|test_nonfinite|a non-finite gradient norm goes unnoticed when the loss is finite
-    float bad = !isfinite(loss) || !isfinite(norm);
+    float bad = !isfinite(loss);
EOF

cd "$repo"
echo "scratch clone of $(git rev-parse --short HEAD) in $scratch" >&2
git clone -q "$repo" "$scratch/clone" || exit 1
cd "$scratch/clone"
[ -d "$repo/../shared" ] && ln -s "$repo/../shared" "$scratch/shared"
make -j2 >"$scratch/build.log" 2>&1 || { echo "the clone does not build: $scratch/build.log" >&2; tail "$scratch/build.log"; exit 1; }

commit=$(git rev-parse --short HEAD)
t_all=$(date +%s)

# the mutations to run now, and the distinct test filters they use
names=() filters_all=()
while IFS= read -r head <&4 && IFS= read -r _ <&4 && IFS= read -r _ <&4; do
    IFS='|' read -r name _ _ filters _ <<<"$head"
    [ "$only" != "  " ] && [[ "$only" != *" $name "* ]] && continue
    names+=("$name")
    for f in ${filters//,/ }; do [[ " ${filters_all[*]} " == *" $f "* ]] || filters_all+=("$f"); done
done 4<<<"$MUTATIONS"
[ ${#names[@]} -gt 0 ] || { echo "no mutation named:$only" >&2; exit 2; }
for n in $only; do [[ " ${names[*]} " == *" $n "* ]] || { echo "unknown mutation '$n'" >&2; exit 2; }; done

# baseline: the unmutated clone passes every filter used (else a "kill" proves nothing)
t0=$(date +%s)
for f in "${filters_all[@]}"; do
    bash tests/run.sh "$f" >"$scratch/baseline-$f.log" 2>&1 </dev/null
    summary=$(tail -1 "$scratch/baseline-$f.log")
    nfail=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    if [ "${nfail:-1}" -gt 0 ]; then
        echo "baseline: the unmutated tests fail ($f: $summary); fix that first:" >&2
        grep '^    FAIL \|^    | ' "$scratch/baseline-$f.log" | head -20 >&2
        exit 1
    fi
done
baseline_s=$(( $(date +%s) - t0 ))
echo "baseline: ${filters_all[*]} pass on the unmutated clone (${baseline_s}s)" >&2

# rows kept from an earlier OUT (mutations not run now, still on the list)
declare -A row_of=()
if [ -f "$out" ]; then
    while IFS= read -r line; do
        n=$(echo "$line" | cut -d'|' -f2 | tr -d ' ')
        grep -q "^$n|" <<<"$MUTATIONS" && row_of[$n]=$line
    done < <(grep '^| [a-z0-9_]* | ' "$out" | grep -v '^| mutation |')
fi

write_out() { # the table: every mutation on the list, in list order, measured or not
    local k=0 t=0 pending=0 line n
    local body=()
    while IFS= read -r line; do
        [[ "$line" == *"|"*"|"*"|"*"|"* ]] || continue
        n=${line%%|*}
        if [ -n "${row_of[$n]:-}" ]; then
            body+=("${row_of[$n]}"); t=$((t + 1))
            [[ "${row_of[$n]}" == *"| killed"* ]] && k=$((k + 1))
        else pending=$((pending + 1)); fi
    done < <(grep -v '^[-+]' <<<"$MUTATIONS")
    {
        echo "# Mutation testing (\`bash scripts/mutate.sh\`)"
        echo
        echo "Each mutation is applied alone to a scratch clone of the commit in its row, rebuilt, and the"
        echo "listed tests (\`bash tests/run.sh FILTER\`) are run; the same tests first pass unmutated (baseline)."
        echo "Last run: $(date -u +%Y-%m-%d) at $commit ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)): ${#names[@]} mutation(s),"
        echo "baseline ${baseline_s} s, $(( $(date +%s) - t_all )) s in all."
        echo
        echo "**Score: $k of $t mutations killed**$([ $pending -gt 0 ] && echo " ($pending on the list not measured yet)")."
        echo
        echo "| mutation | subsystem | the bug | tests run | result | s | commit |"
        echo "|---|---|---|---|---|---|---|"
        printf '%s\n' "${body[@]}"
    } >"$out"
    score="$k of $t killed$([ $pending -gt 0 ] && echo ", $pending not measured")"
}

killed=0 total=0
while IFS= read -r head <&4 && IFS= read -r minus <&4 && IFS= read -r plus <&4; do
    IFS='|' read -r name sub file filters what <<<"$head"
    [ "$only" != "  " ] && [[ "$only" != *" $name "* ]] && continue
    total=$((total + 1))
    start=$(date +%s)
    if ! /usr/bin/python3 - "$file" "${minus:1}" "${plus:1}" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"{path}: the text to mutate occurs {text.count(old)} times: {old!r}")
open(path, "w").write(text.replace(old, new))
PY
    then
        row_of[$name]="| $name | $sub | $what | - | NOT APPLIED (the code moved: update the mutation) | 0 | $commit |"
        write_out
        continue
    fi
    verdict="survived"
    detail=""
    if ! make -j2 >"$scratch/m.log" 2>&1 </dev/null; then
        verdict="NOT BUILT"; detail="the mutated code does not compile: fix the mutation"
    else
        for f in ${filters//,/ }; do
            # a mutation that hangs a test is caught (a hang fails the suite too), after 30 min
            timeout -k 30 1800 bash tests/run.sh "$f" >"$scratch/$name-$f.log" 2>&1 </dev/null
            rc=$?
            summary=$(tail -1 "$scratch/$name-$f.log")
            nfail=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
            [ $rc -eq 124 ] && nfail=1 summary="timed out after 1800 s"
            [ $rc -ne 0 ] && [ -z "$nfail" ] && nfail=1 summary="tests/run.sh exited $rc without a summary"
            if [ "${nfail:-0}" -gt 0 ]; then
                verdict="killed"
                first=$(grep -m1 '^    FAIL ' "$scratch/$name-$f.log" | sed 's/^    FAIL //' | cut -c1-90)
                detail="$f: $summary; first: $first"
                break
            fi
            detail="$detail $f: $summary;"
        done
    fi
    git checkout -q -- "$file"
    [ "$verdict" = killed ] && killed=$((killed + 1))
    secs=$(( $(date +%s) - start ))
    echo "$name: $verdict ($detail) ${secs}s" >&2
    row_of[$name]="| $name | $sub | $what | \`${filters//,/ }\` | $verdict: ${detail# } | $secs | $commit |"
    write_out
done 4<<<"$MUTATIONS"
write_out
echo "score: $score; written to $out" >&2
[ "$killed" -eq "$total" ]
