#!/usr/bin/env bash
# tests/test_straggler_run.sh: straggler detection and eviction with the real trainer under
# `myriad run`, on three emulated hosts (network namespaces, tests/lib.sh ns_up; the third a
# spare). 4 ranks (dp 4, two per host), in-memory copies every step, no disk checkpoint.
#   - a failure-free reference run: no straggler event;
#   - rank 2 slowed 2x from step 20 (--inject slow@20:2:2, its compute stretched by the rank
#     itself) with --straggler-action evict: flagged once (rank 2, its host, action evict, compute
#     scores under 0.75 over the window and over the horizon), not before the horizon spans its
#     H seconds and within 2 windows after it does, its host replaced by the spare, the job
#     resumed from the in-memory replicas recomputing at most one step, and the final weights
#     bit-identical to the reference (the oracle).
# Both runs use --straggler-horizon 5 (the default 30 s, sized for a shared machine's passing
# slowdowns of 3-6 s, would need ~600 steps here; test_straggler.c covers it); 5 s is 100-150 steps here, 220 leave room.
# Skipped with the reason when namespaces cannot be made here. An Open MPI daemon on an emulated host
# was seen to die before calling back (2 launches in ~20 under load: mpirun then waits for it
# forever, no rank starts); the launcher's --start-timeout relaunch is what covers that, so such a
# relaunch is counted apart (and said) rather than failing the eviction it did not touch.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
. tests/lib.sh
test_scratch straggler
P="mys$$"
trap 'ns_down "$P" 3; [ -n "${KEEP:-}" ] && cp "$T"/*.jsonl "$T"/*.out "$KEEP"/; rm -rf "$T"' EXIT
if ! command -v mpirun >/dev/null; then echo "skip straggler_evict_on_spare_bitidentical (mpirun is not installed)"; exit 0; fi
if ! ns_up "$P" 3 "$T"; then echo "skip straggler_evict_on_spare_bitidentical ($NS_WHY)"; exit 0; fi
printf '%s slots=2\n%s slots=2\n%s slots=2\n' "$NS_NET.11" "$NS_NET.12" "$NS_NET.13" >"$T/hosts"
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 50000 67 5 >/dev/null
export MYRIAD_SHM_DIR="$T/shm"
# the model of bench/straggler_fp.sh (whose 3 x 200 steps found no false positive)
train="--arch gpt2 --layers 2 --hidden 128 --heads 4 --ffn 512 --vocab 67 --max-seq 64 --data $T/tok.bin --batch 16 --seq 64 \
--lr 3e-3 --lr-schedule cosine --warmup 3 --threads 1 --peak-tflops 1 --dp 4 --steps 220"
H=5
ev() { jq -c "select(.event == \"$2\")${3:+ | select($3)}" "$1" 2>/dev/null | wc -l; }
run() { # NAME ARGS...: supervised run on the namespace hosts
    local name=$1
    shift
    timeout 300 "$M" run -n 4 --hosts "$T/hosts" --spares 1 --start-timeout 30 --hb-addr "$NS_NET.1" "${MPI_NS[@]}" \
        --events "$T/$name.jsonl" --straggler-horizon $H "$@" -- train $train --save "$T/$name" >"$T/$name.out" 2>&1
}

run ref --max-restarts 2
rc_ref=$?
# 2x, not 1.5x: the slowdown is in CPU time, and with 4 ranks on 2 cores the waiting ranks hand
# the slow one their cores, which dilutes its wall-clock score toward 0.75 (a CI run under load saw
# the horizon score at 0.7499 for 55 steps with 1.5x: flagged late, a test assumption, not a race)
run slow --max-restarts 3 --hang-timeout 60 --inject slow@20:2:2 --straggler-action evict
rc=$?
never=$(ev "$T/slow.jsonl" restart '.after | test("never connected")')
relaunched=""
[ "$never" -gt 0 ] && relaunched="; relaunched $never time(s) after a launch that never connected"
flag=$(jq -c 'select(.event == "straggler")' "$T/slow.jsonl" 2>/dev/null | head -1)
last=$(echo "$flag" | jq -r '.last_step // empty' 2>/dev/null)
# the first window whose horizon spans H (of the first attempt: the flag comes before the restart),
# and where the window rule alone (3 windows below in a row) would have flagged
full=$(jq -s "[.[] | select(.event == \"rank-times\" and .horizon_s != null and .horizon_s >= $H) | .last_step] | first // empty" "$T/slow.jsonl")
window_only=$(jq -s '[.[] | select(.event == "rank-times") | .relative[2] < 0.75] as $b | [.[] | select(.event == "rank-times") | .last_step] as $s |
    [range(2; $b | length) | select($b[.] and $b[. - 1] and $b[. - 2]) | $s[.]] | first // "never"' "$T/slow.jsonl")
if [ $rc_ref -eq 0 ] && [ "$(ev "$T/ref.jsonl" straggler)" -eq 0 ] && [ $rc -eq 0 ] &&
    [ "$(ev "$T/slow.jsonl" straggler)" -eq 1 ] &&
    [ "$(ev "$T/slow.jsonl" straggler ".rank == 2 and .host == \"$NS_NET.12\" and .action == \"evict\" and (.relative < 0.75 or .individual < 0.75) and (.horizon_relative < 0.75 or .horizon_individual < 0.75) and .horizon_s >= $H")" -eq 1 ] &&
    [ -n "$full" ] && [ "$last" -ge "$full" ] && [ "$last" -le $((full + 10)) ] &&
    [ "$(ev "$T/slow.jsonl" spare-used ".lost == \"$NS_NET.12\" and .spare == \"$NS_NET.13\"")" -eq 1 ] &&
    [ "$(ev "$T/slow.jsonl" launch ".hosts == [\"$NS_NET.11\", \"$NS_NET.13\"]")" -ge 1 ] &&
    [ "$(ev "$T/slow.jsonl" resumed '.source == "replica" and .recomputed_steps <= 1')" -eq 1 ] &&
    [ "$(ev "$T/slow.jsonl" finished ".status == \"ok\" and .restarts == 1 + $never")" -eq 1 ] &&
    cmp -s "$T/ref/model.safetensors" "$T/slow/model.safetensors"; then
    pass "straggler_evict_on_spare_bitidentical (flagged at step $last of a slowdown from step 20, the horizon full at $full, the window rule alone at $window_only: $(echo "$flag" |
        jq -c '{section, relative, individual, horizon_relative, horizon_individual, horizon_s}'); $(jq -c 'select(.event == "resumed" and .source == "replica") | {source, recomputed_steps}' "$T/slow.jsonl")$relaunched)"
else
    fail straggler_evict_on_spare_bitidentical "exit ref $rc_ref, slow $rc; horizon full at ${full:-never}; straggler: ${flag:-none}"
    mkdir -p build/test-logs/straggler && cp "$T"/*.jsonl "$T"/*.out build/test-logs/straggler/ 2>/dev/null
    grep -h '"event":"straggler"\|"event":"resumed"\|"event":"restart"\|giving' "$T/slow.out" "$T/ref.out" | tail -6 >&2
fi
