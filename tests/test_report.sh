#!/usr/bin/env bash
# tests/test_report.sh: `myriad report` on a real supervised run: the trainer on 2 ranks, a rank
# killed at step 6 and the job resumed (restart, failure and recovery events, a recomputed step in
# the training log), validation every 4 steps. Until this branch meets the straggler detector
# (docs/OPERATIONS.md), its `rank-times` and `straggler` events are appended by hand. The page is rendered by headless Chromium; tests/py/check_report.py compares the
# screenshot, the rendered DOM and the page's numbers with the logs. Bad input: one clear line.
# Prints ok/FAIL/skip lines for tests/run.sh.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
. tests/lib.sh
test_scratch report

# ---- bad input: nothing written
echo '{"step": 0, "loss": 1.5}' >"$T/ok.jsonl"
printf '{"step": 0, "loss": 1.5}\nnot json\n{"step": 1, "loss": 1.4}\n' >"$T/broken.jsonl"
expect_error report_bad_line "report: $T/broken.jsonl:2: not a JSON object" "$M" report "$T/broken.jsonl" -o "$T/r.html"
echo '{"hello": 1}' >"$T/other.jsonl"
expect_error report_no_log_lines "holds no training-log steps" "$M" report "$T/other.jsonl" -o "$T/r.html"
expect_error report_needs_output "give the output file with -o" "$M" report "$T/ok.jsonl"
expect_error report_out_looks_like_an_option "-o --title looks like an option, not a file" "$M" report "$T/ok.jsonl" -o --title
expect_error report_missing_input "report: $T/nope: No such file or directory" "$M" report "$T/nope" -o "$T/r.html"
[ ! -e "$T/r.html" ] && pass report_bad_input_writes_nothing || fail report_bad_input_writes_nothing

if ! command -v mpirun >/dev/null; then
    echo "skip report_rendered (mpirun is not installed)"
    exit 0
fi
# ---- a supervised run with a failure and a restart
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
/usr/bin/python3 bench/make_tokens.py "$T/val.bin" 4000 67 4
mkdir -p "$T/run"
timeout 180 "$M" run -n 2 --max-restarts 2 --hang-timeout 30 --inject kill@6:1 --events "$T/run/events.jsonl" -- \
    train --arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data "$T/tok.bin" \
    --val-data "$T/val.bin" --eval-every 4 --batch 8 --seq 8 --steps 12 --lr 3e-3 --threads 1 --peak-tflops 1 --dp 2 \
    --log "$T/run/train.jsonl" --save "$T/run/model" >"$T/run.out" 2>&1
rc=$?
if [ $rc -ne 0 ] || [ "$(jq -c 'select(.event == "restart")' "$T/run/events.jsonl" | wc -l)" -ne 1 ]; then
    fail report_supervised_run "exit $rc"
    tail -5 "$T/run.out" >&2
    exit 0
fi
# the straggler detector's output, in the shapes it logs (`rank-times` every W steps over the last
# 2W: every rank's median step seconds, null where a rank had too few samples, per-section medians
# and scores; `straggler`), plus the one-rank form the report also reads
t=$(jq -r 'select(.event == "connected") | .t' "$T/run/events.jsonl" | tail -1)
for w in 0 1 2; do
    jq -cn --argjson t "$t" --argjson w $w '{t: ($t + $w * 0.05), event: "rank-times", attempt: 1,
        first_step: ([5 * $w - 4, 1] | max), last_step: (5 * $w + 5),
        step_s: [0.02 + $w / 1000, (if $w == 1 then null else 0.031 + $w / 100 end)],
        sections: {data: [0.001, 0.001], forward: [0.006, 0.009], backward: [0.012, null], comm: [0.001, 0.002],
                   optimizer: [0.001, 0.001], checkpoint: [0, 0], compute: [0.02, 0.03]},
        relative: [1, 0.7], individual: [1, 0.8]}'
done >"$T/run/detector.jsonl"
echo "{\"t\": $t, \"event\": \"rank-step\", \"rank\": 1, \"step\": 12, \"step_s\": 0.09}" >>"$T/run/detector.jsonl"
echo "{\"t\": $t, \"event\": \"straggler\", \"attempt\": 1, \"rank\": 1, \"host\": \"$(hostname)\", \"section\": \"forward\", \"relative\": 0.62, \"individual\": 0.7, \"action\": \"warn\"}" >>"$T/run/detector.jsonl"

"$M" report "$T/run" -o "$T/report.html" 2>"$T/report.err"
rc=$?
if [ $rc -eq 0 ] && [ -s "$T/report.html" ] && ! grep -qE '(src|href)="(https?:)?//' "$T/report.html" &&
    ! grep -q '<script src' "$T/report.html"; then
    pass "report_self_contained ($(wc -c <"$T/report.html") bytes, no external references)"
else
    fail report_self_contained "exit $rc: $(head -c 200 "$T/report.err")"
    exit 0
fi

# ---- headless Chromium: screenshot and rendered DOM
if ! command -v chromium >/dev/null; then
    echo "skip report_rendered_in_chromium (chromium is not installed: apt-get install chromium)"
    exit 0
fi
profile=$(mktemp -d /tmp/myriad-chromium-XXXXXX)
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars --window-size=1000,2400 \
    --screenshot="$T/shot.png" --dump-dom "file://$T/report.html" >"$T/dom.html" 2>"$T/chromium.err"
rc=$?
rm -rf "$profile"
if [ $rc -ne 0 ] || [ ! -s "$T/shot.png" ] || [ ! -s "$T/dom.html" ]; then
    fail report_rendered_in_chromium "chromium exit $rc: $(grep -v dbus "$T/chromium.err" | head -c 300)"
    exit 0
fi
/usr/bin/python3 tests/py/check_report.py "$T/report.html" "$T/dom.html" "$T/shot.png" "$T"/run/*.jsonl
