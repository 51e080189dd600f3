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
check plan_runs bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'do not fit in 80 GiB (e.g. .* needs [0-9.]* GiB per GPU, has 80)' && [ \$(echo \"$out\" | grep -c '^[123] ') -eq 3 ]"
$B plan --model llama2-7b --cluster h100-ib --gpus 256 --json >"$T/plan.json" 2>"$T/err"
check plan_json python3 -c "import json; d=json.load(open('$T/plan.json')); assert d['layouts'] and d['layouts'][0]['days'] <= d['layouts'][-1]['days']"
out=$($B plan --model llama2-70b --gpus 2048 --tokens 2T --compare configs/clusters/h100-ib.json configs/clusters/h100-roce-4to1.json 2>&1); rc=$?
check plan_compare bash -c "[ $rc -eq 0 ] && echo \"$out\" | grep -q 'network capex' && echo \"$out\" | grep -q 'h100-roce-4to1'"

# validation sets
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
