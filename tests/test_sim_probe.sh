#!/usr/bin/env bash
# test_sim_probe.sh: bench/gpu_sim_probe.py, the measurement prepared for the device check's "sim
# probe" phase, on the CPU: its ring-attention emulation (round-robin chunks, fp32 log-sum-exp
# merges, dK/dV travelling the ring) must reproduce one full causal attention's output and
# dQ/dK/dV for CP 1, 2, 3, 4, 8, since the GPU run times exactly that code; and a --small run must
# write every kind of row and the report. Rates are not asserted (timing). Skips without
# Debian's python3 + torch (the probe's CPU path is written for its torch 1.13).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch sim-probe
PY=/usr/bin/python3
if ! [ -x $PY ] || ! $PY -c 'import torch' 2>/dev/null; then
    echo "skip sim_probe_ring_matches_full (no torch for $PY)"
    echo "skip sim_probe_small_run (no torch for $PY)"
    exit 0
fi

if timeout 60 $PY bench/gpu_sim_probe.py --check >"$T/check" 2>&1 && [ "$(grep -c '^ok ring_cp' "$T/check")" -eq 5 ]; then
    pass sim_probe_ring_matches_full
else
    fail sim_probe_ring_matches_full "$(tr '\n' ' ' <"$T/check" | tail -c 400)"
fi

if timeout 120 $PY bench/gpu_sim_probe.py --out "$T/out" --small >"$T/log" 2>&1 &&
    $PY - "$T/out" >"$T/why" 2>&1 <<'PY'; then
import json, os, sys
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "sim_probe.jsonl"))]
kinds = {r["kind"] for r in rows}
for k in ("ring_check", "gemm_bf16", "sdpa_fwd", "sdpa_fwdbwd", "ring_fwd", "ring_bwd", "ring_ref_fwd", "ring_ref_bwd"):
    assert k in kinds, ("missing", k, sorted(kinds))
assert all(r["ok"] for r in rows if r["kind"] == "ring_check")
assert sum(r["kind"] == "gemm_bf16" for r in rows) == 27  # 9 linear shapes x forward + 2 backward
ring = {(r["cp"], r["rank"], r["kind"]) for r in rows if r["kind"] in ("ring_fwd", "ring_bwd")}
want = {(c, r, k) for c in (1, 2, 4, 8) for r in {0, c - 1} for k in ("ring_fwd", "ring_bwd")}
assert ring == want, sorted(want - ring)
for r in rows:
    if r["kind"] in ("ring_fwd", "ring_bwd"):
        assert len(r["steps"]) == r["cp"] and r["seconds"] > 0 and r["bare_seconds"] > 0, r
        assert r["steps"][0]["kind"] == "causal"
        assert all(s["kind"] == ("fullQ_halfKV" if s["step"] <= r["rank"] else "halfQ_fullKV") for s in r["steps"][1:]), r
# without a GPU: fp8 and PyTorch's CP are recorded as skipped, not silently missing
assert any(r["kind"] == "gemm_fp8" and "skipped" in r for r in rows)
assert any(r["kind"] == "torch_cp" and "skipped" in r for r in rows)
md = open(os.path.join(sys.argv[1], "sim_probe.md")).read()
for h in ("## GEMM rates", "## SDPA", "## Ring attention", "## Ring emulation against", "## Skipped"):
    assert h in md, h
PY
    pass sim_probe_small_run
else
    fail sim_probe_small_run "$(cat "$T/why" 2>/dev/null | tail -c 300) $(tail -c 300 "$T/log")"
fi
