#!/usr/bin/env python3
"""scripts/sim_validation_tables.py: the Markdown tables of docs/SIMULATOR.md's Validation section
from `myriad sim validate A.csv B.csv --json` (per-row in-sample and leave-one-source-out errors,
per-source summary, every FITTED constant with its all-rows value and its value under each fold).
Usage: bin/myriad sim validate ../shared/validation/published_*.csv --json | python3 scripts/sim_validation_tables.py"""
import json
import sys

d = json.load(sys.stdin)
loso = d["loso"]
names = list(loso["fitted_all"].keys())
WHAT = {
    "sustained_hb": "GEMM rate of multi-GPU training steps over single-GPU cuBLASLt microbenchmarks on Hopper and "
                    "Blackwell (configs/hardware h100-sxm, h100-gt500, h200, h800, b200 `sustained`); the dense rows "
                    "of those GPUs that are not MLPerf (both files' Hopper/Blackwell rows: Megatron-LM README, NeMo, torchtitan)",
    "sustained_a100": "the same on A100 (a100-40g, a100-80g); the A100 rows (Narayanan 2021, Korthikanti 2022, torchtitan A100)",
    "mlperf_gemm": "GEMM speed of the `mlperf` preset over the other Megatron/NeMo runs (software.c sw_eff); the six MLPerf rows, given `sustained`",
    "moe_imbalance": "busiest expert's tokens over the mean, dropless routing (layout default); the MoE row (NeMo 25.02 Mixtral 8x7B), given `sustained`",
}
out = []
w = out.append

w("Every FITTED constant, its all-rows fit (what ships) and its value with each source left out:\n")
fa = loso["fitted_all"]
w("| constant | what it is and the rows it is fitted on (src/sim/validate_fit.c) | rows | all-rows fit | shipped | fold range |")
w("|---|---|---|---|---|---|")
for n in names:
    v = [f["values"][n] for f in loso["folds"]]
    w(f"| `{n}` | {WHAT.get(n, '')} | {fa[n]['rows']} | {fa[n]['value']:.3f} | {fa[n]['shipped']} | {min(v):.3f}-{max(v):.3f} |")
w("")
w("| fold: source left out | rows | in-sample med / max | LOSO med / max | " + " | ".join(names) + " |")
w("|---|---|---|---|" + "---|" * len(names))
for f in loso["folds"]:
    ins = sorted(abs(r["in_sample_error"]) for r in f["rows"])
    los = sorted(abs(r["loso_error"]) for r in f["rows"])
    med = lambda v: (v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2)
    w(f"| {f['source']} | {len(f['rows'])} | {100*med(ins):.1f}% / {100*max(ins):.1f}% | "
      f"{100*med(los):.1f}% / {100*max(los):.1f}% | " + " | ".join(f"{f['values'][n]:.3f}" for n in names) + " |")
w("| **all rows** (shipped) | " + str(loso["rows"]) + " | " + f"{100*loso['in_sample_median']:.1f}% / {100*loso['in_sample_max']:.1f}%"
  + " | " + f"{100*loso['median_abs_error']:.1f}% / {100*loso['max_abs_error']:.1f}%" + " | "
  + " | ".join(f"{fa[n]['value']:.3f} ({fa[n]['rows']} rows; {fa[n]['shipped']})" for n in names) + " |")
w("")
lo = {}
for f in loso["folds"]:
    for r in f["rows"]:
        lo[r["case"]] = (f["source"], r["loso_error"])
for fl in d["files"]:
    if fl["kind"] != "step_time":
        continue
    w(f"\n{fl['file'].split('/')[-1]}: in-sample median {100*fl['median_abs_error']:.1f}%, max {100*fl['max_abs_error']:.1f}% "
      f"over {fl['predicted']} rows\n")
    w("| case | GPUs | tp/cp/pp/vpp/dp, mb, recompute | software | published | predicted | in-sample | LOSO | source (fold) |")
    w("|---|---|---|---|---|---|---|---|---|")
    for r in fl["rows"]:
        if not r["simulated"]:
            w(f"| {r['case']} | | | | | not simulated: {r.get('reason','')} | | | |")
            continue
        src, le = lo.get(r["case"], ("-", float("nan")))
        unit = {"tflops_per_gpu": "TF/GPU", "tokens_per_s_per_gpu": "tok/s/GPU", "iter_time_s": "s/step"}.get(r["metric"], r["metric"])
        w(f"| {r['case']} | {r['gpus']} | {r['tp']}/{r['cp']}/{r['pp']}/{r['vpp']}/{r['dp']}, {r['micro_batch']}, {r['recompute']} | "
          f"{r['software']} | {r['published']:.4g} {unit} | {r['predicted']:.4g} | {100*r['error']:+.1f}% | {100*le:+.1f}% | {src} |")
print("\n".join(out))
