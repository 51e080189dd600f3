#!/usr/bin/env bash
# test_sim_cli.sh: `myriad sim`, `myriad sim validate` and `myriad plan` from the command line:
# output contracts (--json keys, trace file), error messages for impossible layouts, memory
# overflow and malformed JSON, and the validation sets when ../shared is present.
set -u
cd "$(dirname "$0")/.."
B=./bin/myriad
T=$(mktemp -d /tmp/myriad-sim-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
ok() { echo "ok $1"; }
fail() { echo "FAIL $1"; shift; echo "  $*" >&2; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name" "$*"; fi; }

check sim_help bash -c "$B sim --help >/dev/null && $B plan --help >/dev/null"

# --json: one object with the documented keys
if $B sim --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --global-batch 1536 --micro-batch 1 --tokens 300B --json >"$T/out.json" 2>"$T/err" &&
   python3 - "$T/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("step_time_s", "mfu", "tokens_per_s", "memory_gib", "days"):
    assert k in d, k
assert 0 < d["mfu"] < 1 and d["step_time_s"] > 0 and d["days"] > 0
assert abs(d["zflops_6nd"] - 315) < 3 and abs(d["zflops_8nd"] - 420) < 4
b = d["breakdown_s"]
assert abs(sum(b.values()) - d["step_time_s"]) < 1e-3 * d["step_time_s"], (sum(b.values()), d["step_time_s"])
PY
then ok sim_json_keys; else fail sim_json_keys "$(cat "$T/err")"; fi

# text output names the compute totals of the GPT-3 estimate
out=$($B sim --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --global-batch 1536 --micro-batch auto --recompute full \
      --software megatron-2021 --no-sp --tokens 300B 2>&1)
days=$(echo "$out" | sed -n 's/^ *\([0-9.]*\) days without failures.*/\1/p')
check sim_gpt3_34_days python3 -c "import sys; d=float('$days' or 0); sys.exit(0 if 30.6 <= d <= 37.4 else 1)"
check sim_prints_zflops bash -c "echo '$out' | grep -q '6ND = 31[45] ZFLOPs, 8ND (with full recompute) = 4[12][09] ZFLOPs'"

# impossible layouts: the reason, a non-zero exit
err=$($B sim --model gpt3-175b --gpus 1024 --tp 16 --global-batch 1536 2>&1); rc=$?
check sim_tp_exceeds_domain bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q 'tp 16 exceeds the 8-GPU scale-up domain'"
err=$($B sim --model gpt3-175b --gpus 8 --tp 8 --global-batch 8 --zero 0 2>&1); rc=$?
check sim_memory_overflow bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -Eq 'needs [0-9]+\.[0-9] GiB per GPU, has 80'"
err=$($B sim --gpu h100-sxm --gpus 16384 --model llama3-70b --tp 8 --pp 8 --vpp 5 --dtype fp8 --global-batch 512 2>&1); rc=$?
check sim_interleave_says_way_out bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q 'give --global-batch a multiple of dp 256 x micro-batch 1 x pp 8 = 2048, or --vpp 1'"
err=$($B sim --model gpt3-175b --tp x 2>&1); rc=$?
check sim_bad_number bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q -- '--tp expects an integer'"
err=$($B sim --model gpt3-175b --frobnicate 2>&1); rc=$?
check sim_unknown_option bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q \"unknown option '--frobnicate'\""
err=$($B sim --model no-such-model 2>&1); rc=$?
check sim_unknown_model bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q \"unknown models 'no-such-model'\""

# malformed JSON: file, line, what was expected
printf '{\n  "name": "x",\n  "gpus_per_node": 8\n  "scaleup_domain": 8\n}\n' >"$T/bad.json"
err=$($B sim --model gpt3-175b --cluster "$T/bad.json" 2>&1); rc=$?
check sim_malformed_json bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q \"$T/bad.json:4:3: malformed JSON: expected ',' or '}'\""

# --trace: Chrome trace with one lane per pipeline stage
$B sim --model gpt3-13b --gpus 64 --tp 4 --pp 4 --global-batch 64 --micro-batch 1 --trace "$T/trace.json" >/dev/null 2>"$T/err"
check sim_trace python3 - "$T/trace.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
lanes = {e["tid"] for e in ev if e["ph"] == "X"}
assert lanes == set(range(5)), lanes           # 4 stages + the data-parallel/optimizer lane
assert sum(1 for e in ev if e["ph"] == "X" and e["tid"] == 0) == 2 * 16
PY

# plan: ranks layouts, says why others were dropped, --json, --compare
out=$($B plan --model gpt3-175b --gpus 1024 --tokens 300B --global-batch 1536 --top 3 2>&1); rc=$?
check plan_runs bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'above the memory limit; e.g. .* needs [0-9.]* GiB per GPU, above 72.0 GiB' && [ \$(echo \"$out\" | grep -c '^[123] ') -eq 3 ]"
$B plan --model llama2-7b --cluster h100-ib --gpus 256 --json >"$T/plan.json" 2>"$T/err"
check plan_json python3 -c "import json; d=json.load(open('$T/plan.json')); assert d['layouts'] and d['layouts'][0]['days'] <= d['layouts'][-1]['days']"
out=$($B plan --model llama2-70b --gpus 2048 --tokens 2T --compare configs/clusters/h100-ib.json configs/clusters/h100-roce-4to1.json 2>&1); rc=$?
check plan_compare bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'network capex' && echo \"$out\" | grep -q 'h100-roce-4to1'"

# the cluster follows --gpu, is named, and is built to size (issue 17, acceptance 4)
out=$($B sim --gpu h100-sxm --gpus 16384 --model llama3-70b --tp 8 --pp 8 --vpp 5 --global-batch 2048 2>&1); rc=$?
check sim_default_cluster_named bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'cluster h100-ib (the default for h100-sxm' && echo \"$out\" | grep -q '16384 x h100-sxm'"
out=$($B sim --gpu h100-sxm --gpus 24576 --model llama3-70b --tp 8 --pp 8 --vpp 5 --global-batch 3072 2>&1); rc=$?
check sim_cluster_built_bigger bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'cluster h100-ib holds 16384 GPUs; built the same design with 24576 GPUs'"
out=$($B sim --gpu no-such-gpu --gpus 8 --model llama3-8b 2>&1); rc=$?
check sim_unknown_gpu bash -c "[ $rc -ne 0 ] && echo \"$out\" | grep -q \"unknown hardware 'no-such-gpu'\""

# Llama 3 405B's layout: 126 layers over pp 16 with one layer fewer on the first and the last stage,
# tp 8, cp 1 at 8k and cp 16 at 128k, on the 24,576-GPU RoCE cluster (acceptance 2)
for v in "8192 1 2048" "131072 16 128"; do
    set -- $v
    $B sim --model llama3-405b --cluster llama3-24k --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 --last-stage-layers 7 \
        --seq $1 --cp $2 --global-batch $3 --micro-batch 1 --recompute full --json >"$T/l3.json" 2>"$T/err"
    check llama3_405b_seq$1 python3 - "$T/l3.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
l = d["layout"]
assert l["stage_layers"][0] == 7 and l["stage_layers"][-1] == 7 and sum(l["stage_layers"]) == 126, l["stage_layers"]
assert d["memory_gib"]["total"] <= 80 and d["cluster"] == "llama3-24k", (d["memory_gib"], d["cluster"])
assert d["step_time_s"] > 0
PY
done
err=$($B sim --model llama3-405b --gpus 16384 --gpu h100-sxm --tp 8 --pp 16 2>&1); rc=$?
check sim_uneven_named bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q 'pp 16 x vpp 1 does not divide the 126 layers (give --first-stage-layers'"

# plan: the flags fix their dimension; one default batch with sim; the headroom; binding constraints
$B plan --model llama3-70b --gpu h100-sxm --gpus 512 --tp 8 --json >"$T/p8.json" 2>"$T/err"
check plan_tp_fixed python3 -c "import json; d=json.load(open('$T/p8.json')); assert d['layouts'] and all(x['tp'] == 8 for x in d['layouts']); assert all(x['memory_gib'] <= d['memory_limit_gib'] for x in d['layouts'])"
$B plan --model llama3-70b --gpu h100-sxm --gpus 512 --json >"$T/pd.json" 2>"$T/err"
$B sim --model llama3-70b --gpu h100-sxm --gpus 512 --tp 8 --pp 4 --json >"$T/sd.json" 2>"$T/err"
check plan_sim_same_default_batch python3 -c "import json; p=json.load(open('$T/pd.json')); s=json.load(open('$T/sd.json')); assert p['global_batch'] == 512 and s['layout']['global_batch'] == 512, (p['global_batch'], s['layout']['global_batch'])"
$B plan --model llama3-70b --gpu h100-sxm --gpus 512 --hot-spares 0 --json >"$T/p0.json" 2>"$T/err"
check plan_hot_spares python3 -c "import json; a=json.load(open('$T/pd.json')); b=json.load(open('$T/p0.json')); assert a['hot_spares'] >= 1 and b['hot_spares'] == 0 and b['goodput'] < a['goodput']; assert abs(b['goodput'] - a['goodput_without_spares']) < 1e-6"
out=$($B plan --model gpt3-175b --gpus 1024 --dtype fp8 2>&1); rc=$?
check plan_fp8_on_a100 bash -c "[ $rc -ne 0 ] && echo \"$out\" | grep -q 'no layout fits: of [0-9]* layouts' && echo \"$out\" | grep -q 'a100-80g has no fp8 tensor cores'"
err=$($B plan --model llama3-70b --gpus 64 --dp 8 2>&1); rc=$?
check plan_dp_refused bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q -- '--dp is what plan derives'"
check sim_software_list bash -c "$B sim --software list | grep -q '^torchtitan-eager'"

# honest answers (issue 29, acceptance 3). Case 1: the README's 405B run on 16,384 GPUs with pp 16:
# the default batch no longer leaves 4 micro-batches for 16 stages (raised to dp x pp, and said so);
# a batch that does is warned about, and so is a bubble above 25%
out=$($B sim --model llama3-405b --gpu h100-sxm --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 --last-stage-layers 7 --recompute full 2>&1); rc=$?
check sim_default_batch_fills_pipeline bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'note: global batch: the default 2^22 tokens (512 sequences) would give 4 micro-batches for 16 pipeline stages; raised to dp 128 x pp 16 x micro-batch 1 = 2048 sequences' && echo \"$out\" | grep -q 'micro batch 1 x 16 per step'"
check sim_warns_bubble bash -c "echo \"$out\" | grep -q 'warning: the pipeline bubble is [0-9]*% of the step (above 25%)'"
out=$($B sim --model llama3-405b --gpu h100-sxm --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 --last-stage-layers 7 --recompute full --global-batch 512 2>&1); rc=$?
check sim_warns_few_microbatches bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'warning: 4 micro-batches for 16 pipeline stages.*give --global-batch 2048 or more'"
out=$($B sim --model llama3-405b --gpu h100-sxm --gpus 16384 --tp 8 --pp 16 --vpp 4 --first-stage-layers 7 --last-stage-layers 7 --recompute full --global-batch 8192 2>&1)
check sim_no_warning_when_full bash -c "! echo \"$out\" | grep -q 'warning:'"
# Case 2: plan of GPT-3 175B on 1,024 A100 with today's software marks its answers as unvalidated
# (no published A100 run of that software; the best A100 run is below them); with the software of
# the published run it gives the published ~34 days, and marks what lies above that run's MFU
out=$($B plan --model gpt3-175b --gpu a100-80g --gpus 1024 --tokens 300B 2>&1); rc=$?
check plan_marks_unvalidated bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q '^software megatron-core (the default' && echo \"$out\" | grep -Eq '^1 .* v$' && echo \"$out\" | grep -q '^v: unvalidated: no published 16-bit run of megatron-core on a100-80g.*56.3%'"
# The published run's layout pattern (tp 8 x pp 8, micro-batch 1, as Table 1 runs its 145.6B and
# 310.1B models) gives the published 140 TF/s and 34 days within 10%; the planner may find a faster
# layout the paper did not run, but none faster than Table 1's best MFU (39.2%) unmarked, so its
# best lies between 34 days x 33.6/39.2 and the published layout's days.
$B sim --model gpt3-175b --gpu a100-80g --gpus 1024 --tokens 300B --software megatron-2021 --recompute full --global-batch 1536 --tp 8 --pp 8 --micro-batch 1 --json >"$T/s2021.json" 2>"$T/err"
$B plan --model gpt3-175b --gpu a100-80g --gpus 1024 --tokens 300B --software megatron-2021 --recompute full --global-batch 1536 --json >"$T/p2021.json" 2>"$T/err"
check plan_published_software python3 - "$T/p2021.json" "$T/s2021.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
assert 30.6 <= s["days"] <= 37.4 and 126 <= s["tflops_per_gpu"] <= 154, s   # Narayanan et al. 2021: 140 TF/s, 34 days
assert d["software"] == "megatron-2021"
L = d["layouts"]
assert 34 * 0.336 / 0.392 * 0.98 <= L[0]["days"] <= s["days"] * 1.001, (L[0]["days"], s["days"])
for x in L:                                                    # marked exactly when above 39.2% (Table 1's best)
    assert x["flags"]["mfu_unvalidated"] == (x["mfu"] > 0.392), x
assert all(x["recompute"] in ("none", "full") and not x["sp"] for x in L)   # 2021: no selective, no sp
PY
# Case 3: "what if 1% of GPUs fail per day?": --failure-rate per GPU-day, --mtbf of the job
$B sim --model llama3-405b --gpu h100-sxm --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 --last-stage-layers 7 --recompute full --tokens 15T --json >"$T/r0.json" 2>"$T/err"
$B sim --model llama3-405b --gpu h100-sxm --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 --last-stage-layers 7 --recompute full --tokens 15T --failure-rate 0.01 --json >"$T/r1.json" 2>>"$T/err"
$B sim --model llama3-405b --gpu h100-sxm --gpus 16384 --tp 8 --pp 16 --first-stage-layers 7 --last-stage-layers 7 --recompute full --tokens 15T --mtbf 12 --json >"$T/r2.json" 2>>"$T/err"
check sim_failure_rate_and_mtbf python3 - "$T/r0.json" "$T/r1.json" "$T/r2.json" <<'PY'
import json, sys
r0, r1, r2 = (json.load(open(p))["reliability"] for p in sys.argv[1:])
assert abs(r0["mtbf_h"] - 3.09) < 0.02, r0                      # Llama 3's rates
assert abs(r1["failures_per_gpu_day"] - 0.01) < 1e-9 and abs(r1["mtbf_h"] - 24 / (0.01 * 16384)) < 1e-3, r1
assert r1["goodput"] < r0["goodput"] and r1["days_with_failures"] > r0["days_with_failures"], (r0, r1)
assert r1["hot_spares"] > r0["hot_spares"]                      # more nodes in repair: more spares by default
assert abs(r2["mtbf_h"] - 12) < 1e-6 and r2["goodput"] > r0["goodput"], r2
PY
out=$($B sim --model llama3-8b --gpus 8 --tokens 1T --failure-rate 0.01 --mtbf 3 2>&1); rc=$?
check sim_failure_rate_xor_mtbf bash -c "[ $rc -ne 0 ] && echo \"$out\" | grep -q 'give --failure-rate or --mtbf, not both'"
out=$($B plan --model llama3-70b --gpus 2048 --tokens 15T --failure-rate 0.01 --top 1 2>&1); rc=$?
check plan_failure_rate bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'failures: job MTBF 1.17 h (--failure-rate)'"

# validation sets
if [ -r ../shared/validation/published_modern.csv ]; then
    $B sim validate ../shared/validation/published_modern.csv --json >"$T/vm.json" 2>"$T/err"
    # acceptance: median <= 5%, every row within 15% but the three that docs/SIMULATOR.md lists as
    # known misses (torchtitan's context-parallel rows -28%, -22%; NeMo 25.11's Llama 3 70B +16%;
    # MLPerf v3.0 on CoreWeave is back inside at -14.0% since its fc2 userbuffers SM margin);
    # every row reported, every layout fits
    check validate_modern python3 - "$T/vm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("# modern median", d["median_abs_error"], "max", d["max_abs_error"])
assert len(d["rows"]) == 54 and d["predicted"] + d["not_simulated"] == 54
assert all(r.get("reason") for r in d["rows"] if not r["simulated"])
assert d["median_abs_error"] <= 0.05, d["median_abs_error"]
known = {"llama3.1-8b-t2-fsdp1-cp8-256k-8gpu", "llama3.1-405b-t6-4d-cp8-256k-512gpu", "llama3-70b-64gpu-fp8cs"}
out = [(r["case"], round(r["error"], 3)) for r in d["rows"] if r["simulated"] and abs(r["error"]) > 0.15]
print("# outside 15%:", out)
assert all(c in known for c, _ in out), out
assert all(abs(e) <= 0.30 for _, e in out), out                 # the known misses do not grow
assert d["fit_in_memory"] == d["predicted"]
PY
else
    echo "skip validate_modern (../shared/validation not present)"
fi
if [ -r ../shared/validation/published_a100.csv ] && [ -r ../shared/validation/memory_a100.csv ]; then
    $B sim validate ../shared/validation/published_a100.csv --json >"$T/v.json" 2>"$T/err"
    check validate_step_time python3 -c "import json; d=json.load(open('$T/v.json')); print('# step time median', d['median_abs_error'], 'max', d['max_abs_error']); assert d['median_abs_error'] <= 0.05 and d['max_abs_error'] <= 0.15 and len(d['rows']) == 18"
    $B sim validate ../shared/validation/memory_a100.csv --json >"$T/m.json" 2>"$T/err"
    check validate_memory python3 -c "import json; d=json.load(open('$T/m.json')); print('# memory median', d['median_abs_error']); assert d['median_abs_error'] <= 0.05"
else
    echo "skip validate_step_time (../shared/validation not present)"
    echo "skip validate_memory (../shared/validation not present)"
fi
err=$($B sim validate "$T/nope.csv" 2>&1); rc=$?
check validate_missing_file bash -c "[ $rc -ne 0 ] && echo \"$err\" | grep -q 'cannot open'"
