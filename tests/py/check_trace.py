#!/usr/bin/env python3
"""check_trace.py FILE NRANKS [--pipeline M COUNT0 COUNT1 ...]: validates a Chrome Trace Event file written by
trace_write_gathered in tests/test_trace.c with Python's json module: the object form with a
traceEvents array; every event has name/ph/pid/tid; complete events ("X") have numeric ts and
dur >= 0, a category and an args object; each rank is a process (pid) named "rank N" by a
process_name metadata event; timestamps never go back within a (pid, tid) lane; and the events
are the ones test_trace.c records: rank r has forwards F0..F(r+1) at ts 100r + 10i (dur 5,
args mb=i, chunk=r) on lane 0 "compute" and one "send" at 100r + 50 (dur 2.5, bytes 1024(r+1),
peer r+1) on lane 1 "comm". With --pipeline, the file is one step of a pipeline schedule
(tests/test_schedule.sh): rank r has COUNTr events in all, among them forwards F0..F(M-1) and
backwards B0..B(M-1) on lane 0 "compute" (categories forward/backward) and the rest on lane 1
"comm" (category comm, with mb, peer and bytes args). Prints one line; exit 1 on the first problem."""
import json
import sys


def fail(msg):
    print("check_trace: " + msg)
    sys.exit(1)


path, n = sys.argv[1], int(sys.argv[2])
pipeline = None
if len(sys.argv) > 3 and sys.argv[3] == "--pipeline":
    pipeline = (int(sys.argv[4]), [int(c) for c in sys.argv[5:]])
with open(path) as f:
    doc = json.load(f)
if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
    fail("top level must be an object with a traceEvents array")
events = doc["traceEvents"]
proc_names, lane_names, last_ts, xs = {}, {}, {}, {}
for e in events:
    for k in ("name", "ph", "pid", "tid"):
        if k not in e:
            fail(f"event without '{k}': {e}")
    if e["ph"] == "M":
        if e["name"] == "process_name":
            proc_names[e["pid"]] = e["args"]["name"]
        elif e["name"] == "thread_name":
            lane_names[(e["pid"], e["tid"])] = e["args"]["name"]
        continue
    if e["ph"] != "X":
        fail(f"unexpected phase {e['ph']}")
    for k in ("ts", "dur", "cat", "args"):
        if k not in e:
            fail(f"complete event without '{k}': {e}")
    if not isinstance(e["ts"], (int, float)) or not isinstance(e["dur"], (int, float)) or e["dur"] < 0:
        fail(f"bad ts/dur: {e}")
    if not isinstance(e["args"], dict):
        fail(f"args must be an object: {e}")
    lane = (e["pid"], e["tid"])
    if e["ts"] < last_ts.get(lane, float("-inf")):
        fail(f"time goes back in lane {lane} at {e['name']}")
    last_ts[lane] = e["ts"]
    xs.setdefault(e["pid"], []).append(e)
if sorted(proc_names) != list(range(n)):
    fail(f"processes {sorted(proc_names)}, want 0..{n - 1}")
for r in range(n):
    if proc_names[r] != f"rank {r}":
        fail(f"pid {r} is named {proc_names[r]!r}")
    if lane_names.get((r, 0)) != "compute" or lane_names.get((r, 1)) != "comm":
        fail(f"lane names of rank {r}: {lane_names}")
    if pipeline:
        m, counts = pipeline
        evs = xs.get(r, [])
        if len(evs) != counts[r]:
            fail(f"rank {r} has {len(evs)} events, want {counts[r]}")
        for kind, cat in (("F", "forward"), ("B", "backward")):
            names = sorted(e["name"] for e in evs if e["cat"] == cat and e["tid"] == 0)
            if names != sorted(f"{kind}{i}" for i in range(m)):
                fail(f"rank {r} {cat} events {names}")
        comm = [e for e in evs if e["tid"] == 1]
        if len(comm) != counts[r] - 2 * m or any(e["cat"] != "comm" or set(e["args"]) != {"mb", "chunk", "peer", "bytes"} for e in comm):
            fail(f"rank {r}: comm events malformed")
        continue
    want = [("F%d" % i, "forward", 0, 100 * r + 10 * i, 5, {"mb": i, "chunk": r}) for i in range(r + 2)]
    want.append(("send", "comm", 1, 100 * r + 50, 2.5, {"bytes": 1024 * (r + 1), "peer": r + 1}))
    got = sorted(((e["name"], e["cat"], e["tid"], e["ts"], e["dur"], e["args"]) for e in xs.get(r, [])),
                 key=lambda x: (x[2], x[3]))
    if len(got) != len(want):
        fail(f"rank {r} has {len(got)} events, want {len(want)}")
    for g, w in zip(got, want):
        if g[:3] != w[:3] or abs(g[3] - w[3]) > 1e-3 or abs(g[4] - w[4]) > 1e-3 or g[5] != w[5]:
            fail(f"rank {r}: event {g}, want {w}")
print(f"trace ok: {n} ranks, {sum(len(v) for v in xs.values())} complete events")
