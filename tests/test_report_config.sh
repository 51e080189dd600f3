#!/usr/bin/env bash
# test_report_config.sh: a plain `train --log` records the run's whole configuration on the log's
# first line (the resolved settings, defaults included, and the command), and `myriad report` of
# that log alone shows it (lr, batch, layout, ...); a launch command longer than any table cell
# is shown whole, never cut. Prints ok/FAIL lines for tests/run.sh.
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
. tests/lib.sh
test_scratch reportcfg
/usr/bin/python3 bench/make_tokens.py "$T/tok.bin" 20000 67 3
"$M" train --arch gpt2 --layers 2 --hidden 32 --heads 4 --ffn 64 --vocab 67 --max-seq 16 --data "$T/tok.bin" \
    --batch 8 --seq 8 --micro-batch 4 --steps 3 --lr 2.5e-3 --lr-schedule cosine --warmup 1 --clip 0.5 --threads 1 \
    --peak-tflops 1 --log "$T/run.jsonl" >"$T/train.out" 2>&1 || fail train_log_run "$(tail -2 "$T/train.out")"

# the first line, and only the first, carries the configuration: values as the run used them
/usr/bin/python3 - "$T/run.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
c = lines[0].get("config") or {}
want = {"lr": 2.5e-3, "batch": 8, "seq": 8, "steps": 3, "lr_schedule": "cosine", "warmup": 1, "clip": 0.5,
        "weight_decay": 0.1, "device": "cpu", "dtype": "fp32", "seed": 1337}
bad = [f"{k}={c.get(k)!r} (want {v!r})" for k, v in want.items() if c.get(k) != v]
lay = c.get("layout") or {}
bad += [f"layout.{k}={lay.get(k)!r}" for k, v in {"tp": 1, "pp": 1, "dp": 1, "zero": 0, "micro_batch": 4, "ranks": 1}.items()
        if lay.get(k) != v]
if (c.get("model") or {}).get("layers") != 2: bad.append(f"model={c.get('model')}")
if not c.get("command", "").startswith("myriad train --arch gpt2") or "--clip 0.5" not in c.get("command", ""):
    bad.append(f"command={c.get('command')!r}")
if any("config" in l for l in lines[1:]): bad.append("config repeated after the first line")
print("ok train_log_first_line_has_config" if not bad and lines[0].get("step") == 1 else
      "FAIL train_log_first_line_has_config (" + "; ".join(bad) + ")")
PY

# the report of that log alone shows it, in the table and the page's JSON block
"$M" report "$T/run.jsonl" -o "$T/r.html" >"$T/report.out" 2>&1
/usr/bin/python3 - "$T/r.html" <<'PY'
import html, json, re, sys
page = open(sys.argv[1]).read()
rows = dict((html.unescape(k), html.unescape(v)) for k, v in
            re.findall(r"<tr><th>(.*?)</th><td><code>(.*?)</code></td></tr>", page, re.S))
want = {"lr": "0.0025", "batch": "8", "lr_schedule": "cosine", "tp": "1", "dp": "1", "pp": "1", "zero": "0",
        "micro_batch": "4", "clip": "0.5", "model.layers": "2"}
bad = [f"{k}={rows.get(k)!r}" for k, v in want.items() if rows.get(k) != v]
if "--lr 2.5e-3" not in rows.get("command", ""): bad.append(f"command={rows.get('command')!r}")
print("ok report_shows_plain_train_config" if not bad else "FAIL report_shows_plain_train_config (" + "; ".join(bad) + ")")
PY

# a launch event with a long command (a real launch line for a large job is often 300+ characters)
long="$M train --preset gpt2-350m --data /datasets/fineweb-edu/train_*.bin --val-data /datasets/fineweb-edu/val_*.bin"
long="$long --batch 512 --seq 1024 --micro-batch 4 --steps 20000 --lr 3e-4 --lr-schedule cosine --warmup 700"
long="$long --min-lr 3e-5 --weight-decay 0.1 --clip 1.0 --tp 2 --sp --pp 2 --dp 4 --zero 1 --eval-every 500"
long="$long --save /checkpoints/gpt2-350m-fineweb-edu --save-every 1000 --log /logs/gpt2-350m-fineweb-edu.jsonl END"
mkdir -p "$T/run"
cp "$T/run.jsonl" "$T/run/train.jsonl"
/usr/bin/python3 -c 'import json,sys; print(json.dumps({"t": 0.0, "event": "launch", "attempt": 0, "launcher": "mpirun", "hosts": ["h1"], "cmd": sys.argv[1]}))' \
    "$long" >"$T/run/events.jsonl"
"$M" report "$T/run" -o "$T/r2.html" >"$T/report2.out" 2>&1
/usr/bin/python3 - "$T/r2.html" "$long" <<'PY'
import html, re, sys
page, long = open(sys.argv[1]).read(), sys.argv[2]
rows = dict((html.unescape(k), html.unescape(v)) for k, v in
            re.findall(r"<tr><th>(.*?)</th><td><code>(.*?)</code></td></tr>", page, re.S))
ok = len(long) > 400 and rows.get("command") == long
print("ok report_long_command_whole (%d characters)" % len(long) if ok else
      "FAIL report_long_command_whole (shown: %r)" % rows.get("command", "")[-80:])
PY
