# gpu_report.sh: the report of scripts/gpu_check.sh (gpu_check.md), sourced; write_report prints it
# from the check's work folder W: the machine, each phase with its budget, status and time, the
# speed against PyTorch with the goals (tokens/s and MFU for gpt2-124m and the 1.1B Llama), the
# doctor's rates, the sim probe, and every test case with its measured error.

tests_table() { # FILE: one row per ok / FAIL / skip line
    [ -s "$1" ] || { echo "(not run)"; return; }
    echo "| test | result |"; echo "|---|---|"
    grep -E '^(ok|FAIL|skip) ' "$1" | sed -E 's/^(ok|FAIL|skip) ([^ ]+)(.*)$/| \2\3 | \1 |/'
    echo
    echo "$(grep -c '^ok ' "$1") passed, $(grep -c '^FAIL ' "$1") failed, $(grep -c '^skip ' "$1") skipped"
}

bench_table() { # JSONL: the benchmark rows and the goals
    "$MYRIAD_PYTHON" - "$1" "$REHEARSE" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rehearse = sys.argv[2] == "1"
names = {"gpt2": "gpt2-124m (B 16, T 1024)", "llama": "Llama 1.1B, TinyLlama's shape (B 8, T 2048)"}
print("| model | framework | tokens/s | MFU | step (ms) | peak GPU memory (GiB) | notes |")
print("|---|---|---|---|---|---|---|")
by = {}
for r in rows:
    arch, fw = r.get("arch"), r.get("framework")
    by.setdefault(arch, {})[fw] = r
    label = names.get(arch, arch)
    if "error" in r:
        print(f"| {label} | {fw} | error | | | | {r['error']}: {r.get('stderr', '')[-200:]!r} |")
    elif "skipped" in r:
        print(f"| {label} | {fw} | skipped | | | | {r['skipped']} |")
    else:
        if fw == "pytorch":
            note = f"{'torch.compile' if r.get('compile_s') is not None and not rehearse else 'eager'}, compile {r.get('compile_s')} s, torch {r.get('torch')}"
        else:
            note = f"{r.get('steps')} timed steps"
        print(f"| {label} | {fw} | {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% | {r['step_ms']} | {r.get('peak_mem_gib', 0):.1f} | {note} |")
print()
if rehearse:
    print("(rehearsal on the CPU, tiny shapes: the figures check the command lines and mean nothing)")
    print()
for arch in ("gpt2", "llama"):
    m, t = by.get(arch, {}).get("myriad"), by.get(arch, {}).get("pytorch")
    mok = bool(m and "tokens_per_s" in m)
    tok = bool(t and "tokens_per_s" in t)
    parts = []
    if mok:
        parts.append(f"myriad {m['tokens_per_s']:,.0f} tokens/s, MFU {100 * m['mfu']:.1f}%")
    if tok:
        parts.append(f"PyTorch {t['tokens_per_s']:,.0f} tokens/s, MFU {100 * t['mfu']:.1f}%")
    ratio = m["tokens_per_s"] / t["tokens_per_s"] if mok and tok else None
    if arch == "gpt2":
        ref = "PyTorch (eager: a rehearsal)" if rehearse else "torch.compile"
        goal = (f"myriad / {ref} = **{ratio:.2f}x**: {'meets' if ratio >= 1.0 else 'BELOW'} the goal >= 1.0x"
                if ratio is not None else "no ratio (a run is missing)")
    else:
        goal = (f"MFU **{100 * m['mfu']:.1f}%**: {'meets' if m['mfu'] >= 0.40 else 'BELOW'} the goal >= 40%" if mok
                else "no MFU (the myriad run is missing)")
        if ratio is not None:
            goal += f"; myriad / PyTorch = {ratio:.2f}x"
    print(f"- {names[arch]}: {'; '.join(parts) or 'not run'}. {goal}")
EOF
}

write_report() {
    echo "# myriad device check $([ "$REHEARSE" = 1 ] && echo "(REHEARSAL without a GPU: GPU steps skipped)")"
    echo
    sed 's/^/    /' "$W/facts"
    echo
    echo "Finished in $(( $(date +%s) - START )) s. Phase budgets sum to $TOTAL s (limit 480 s)$([ "$REHEARSE" = 1 ] && echo ", deadlines x$SCALE in a rehearsal")."
    echo
    echo "## Phases"
    echo "| phase | budget (s) | status | seconds | note |"; echo "|---|---|---|---|---|"
    printf '%s\n' "${PHASES[@]}"
    if [ -s "$W/build_errors.txt" ]; then echo; echo "Build errors:"; echo '```'; cat "$W/build_errors.txt"; echo '```'; fi
    if [ -s "$W/deps.txt" ]; then echo; echo "Dependencies (.gpudeps -> prefix):"; echo '```'; cat "$W/deps.txt"; echo '```'; fi
    echo
    echo "## Speed against PyTorch (bench/gpu_bench.sh; method in bench/gpu_results.md)"
    if [ -s "$W/bench.jsonl" ]; then bench_table "$W/bench.jsonl"; else echo "(not run)"; fi
    echo
    echo "## Smoke test and myriad doctor on the device (GEMM and memory checks; docs/OPERATIONS.md)"
    if [ -s "$W/smoke.txt" ]; then echo '```'; grep -v '^\[' "$W/smoke.txt" | tail -25; echo '```'; else echo "(not run)"; fi
    echo
    echo "## CUDA kernel tests ($KBIN)"
    tests_table "$W/kernels.txt"
    if grep -q '^# rerun' "$W/kernels.txt" 2>/dev/null; then
        echo; echo "Reruns, one case a process with CUDA_LAUNCH_BLOCKING=1:"; echo '```'
        sed -n '/^# rerun/,$p' "$W/kernels.txt" | grep -E '^(# rerun|rerun-|myriad:|.*CUDA error)' | head -60; echo '```'
    fi
    if [ -s "$W/kernels.txt" ]; then echo; echo "Measured errors:"; echo '```'; grep -E '^  ' "$W/kernels.txt" | head -150; echo '```'; fi
    if [ -s "$W/sanitizer.txt" ]; then
        echo; echo "## compute-sanitizer (memcheck, racecheck, synccheck; small shapes)"; echo '```'
        grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|=========" "$W/sanitizer.txt" | head -40; echo '```'
    fi
    echo
    echo "## Training through the device (tests/test_cuda_train.sh: fixtures, then dp 2 / tp 2 / checkpoints)"
    tests_table "$W/train.txt"
    grep -h '^#' "$W/train.txt" 2>/dev/null | sed 's/^# */    /'
    echo
    echo "## NCCL (--comm nccl)"
    tests_table "$W/nccl.txt"
    echo
    echo "## Sim probe (bench/gpu_sim_probe.py; what it feeds: docs/SIMULATOR.md, Outside 15%)"
    if [ -s "$RESULT_DIR/sim_probe.md" ]; then sed -e '1d' -e 's/^## /### /' "$RESULT_DIR/sim_probe.md"
    else echo "(not run)"; tail -5 "$W/sim_probe.txt" 2>/dev/null | sed 's/^/    /'; fi
    if [ -s "$W/cputests.txt" ]; then echo; echo "## CPU tests against the prefix (rehearsal)"; echo '```'; tail -5 "$W/cputests.txt"; echo '```'; fi
}
