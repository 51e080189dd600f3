#!/usr/bin/env python3
"""check_report.py REPORT.html DOM.html SHOT.png LOG.jsonl...: checks a `myriad report` page against
the logs it was made from, read here independently with Python's json module, and against what
headless Chromium made of it (DOM.html from --dump-dom, SHOT.png from --screenshot).
Prints ok/FAIL lines for tests/run.sh:
  report_every_plot_rendered: the eight plots are in Chromium's DOM, none says "no data", and each
    plot's own colour shows in the screenshot (which is not blank: many colours, >2% not white);
  report_loss_plot_equals_log, report_throughput_plots_equal_log: the polylines' pixel coordinates,
    mapped back through the axes the SVG declares, give the log's steps and values; the validation
    markers carry them exactly;
  report_heatmap_equals_log: one cell per (rank, step) with the log's per-rank step seconds;
  report_timeline_equals_log: one marker per timeline event of the log, at its time;
  report_goodput_equals_log: the bar shows the `finished` event's figures;
  report_ledger_equals_log: the time ledger's stacked bar and cause timeline show the `goodput`
    event's seconds by cause and its segments;
  report_summary_cards_equal_log: the cards above the plots (steps, final and best validation loss,
    mean tokens/s and MFU, goodput, effective training time, restarts, status, stragglers) as
    computed from the logs;
  report_data_block_equals_log: the embedded JSON holds exactly the logs' numbers.
Training-log rules: a line with "step" and "loss"; the last line of a step wins (a resumed run
logs the recomputed step again). Event-log rules: docs/OPERATIONS.md."""
import json
import re
import struct
import sys
import zlib
from html.parser import HTMLParser

import numpy as np

TIMELINE_EVENTS = {"launch", "connected", "exit", "heartbeat-timeout", "kill", "giving-up", "auth-refused",
                   "exit-stuck", "interrupted", "restart", "spare-used", "resumed", "preflight", "inject",
                   "link-cut", "straggler", "finished"}
PLOTS = ["loss", "tokens_per_s", "mfu", "rank_step_time", "timeline", "goodput", "time_ledger", "cause_timeline"]
# a colour each plot draws with (report_svg.c / report_html.c): it must show in the screenshot
PLOT_COLOURS = {"loss": (0x1f, 0x77, 0xb4), "tokens_per_s": (0x2c, 0xa0, 0x2c), "mfu": (0x94, 0x67, 0xbd),
                "rank_step_time": (0x44, 0x01, 0x54), "timeline": (0xcf, 0xdc, 0xf0), "goodput": (0xbb, 0xbb, 0xbb),
                "time_ledger": (0x4a, 0x90, 0xd9), "cause_timeline": (0x7f, 0xb2, 0xe5)}


def read_logs(paths):
    steps, events = {}, []
    for p in paths:
        for line in open(p):
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            if isinstance(o.get("event"), str):
                events.append(o)
            elif "step" in o and "loss" in o:
                steps[o["step"]] = o  # the last line of a step wins
    return steps, events


def rank_cells(events):
    cells = {}
    for o in events:
        step = o.get("step", o.get("last_step"))
        if not isinstance(step, (int, float)):
            continue
        ss = o.get("step_s")
        if isinstance(ss, (int, float)) and isinstance(o.get("rank"), (int, float)):
            cells[(int(o["rank"]), int(step))] = ss
        elif isinstance(ss, list):
            for r, v in enumerate(ss):
                if isinstance(v, (int, float)):
                    cells[(r, int(step))] = v
        elif isinstance(o.get("ranks"), list):
            for x in o["ranks"]:
                if isinstance(x.get("rank"), (int, float)) and isinstance(x.get("step_s"), (int, float)):
                    cells[(int(x["rank"]), int(step))] = x["step_s"]
    return cells


class Page(HTMLParser):
    """The plots' svg attributes and marks, and the JSON data block."""

    def __init__(self):
        super().__init__()
        self.plots, self.cur, self.in_data, self.data, self.text = {}, None, False, "", {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "data-plot" in a:
            self.cur = a["data-plot"]
            self.plots[self.cur] = {"attrs": a, "marks": []}
            self.text[self.cur] = ""
        elif self.cur:
            self.plots[self.cur]["marks"].append((tag, a))
        if tag == "script" and a.get("id") == "report-data":
            self.in_data = True

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
        if tag == "script":
            self.in_data = False

    def handle_data(self, data):
        if self.in_data:
            self.data += data
        if self.cur:
            self.text[self.cur] += data


def parse(path):
    p = Page()
    p.feed(open(path, encoding="utf-8").read())
    return p


def read_png(path):
    """RGB pixels of an 8-bit RGB/RGBA PNG (zlib + the five scanline filters)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, ctype = ihdr[:4]
    if depth != 8 or ctype not in (2, 6):
        raise ValueError("PNG depth %d colour type %d" % (depth, ctype))
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    out, prev = np.zeros((h, stride), dtype=np.uint8), np.zeros(stride, dtype=np.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:
            cur = line.reshape(-1, bpp).cumsum(axis=0).reshape(-1) & 255
        elif f == 2:
            cur = (line + prev) & 255
        else:  # average and Paeth depend on the byte to the left: one at a time
            cur, up = line.tolist(), prev.tolist()
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = up[i], (up[i - bpp] if i >= bpp else 0)
                if f == 3:
                    cur[i] = (cur[i] + ((a + b) >> 1)) & 255
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            cur = np.array(cur, dtype=np.int32)
        out[y], prev = cur, cur
    return out.reshape(h, w, bpp)[:, :, :3]


results = []


def check(name, problems):
    results.append((name, problems))


def close(a, b, tol):
    return abs(a - b) <= tol


def line_points(plot, series):
    """The (x, y) data values a polyline draws, mapped back through the plot's declared axes."""
    at = plot["attrs"]
    x0, x1, y0, y1 = (float(at[k]) for k in ("data-xmin", "data-xmax", "data-ymin", "data-ymax"))
    left, top, width, height = (float(at[k]) for k in ("data-left", "data-top", "data-width", "data-height"))
    for tag, a in plot["marks"]:
        if tag == "polyline" and a.get("data-series") == series:
            pts = [tuple(map(float, p.split(","))) for p in a["points"].split()]
            return [(x0 + (px - left) / width * (x1 - x0), y0 + (top + height - py) / height * (y1 - y0)) for px, py in pts], \
                (x1 - x0, y1 - y0)
    return None, None


def compare_line(page, plot_id, series, expect):
    plot = page.plots.get(plot_id)
    if not plot:
        return ["no plot %s" % plot_id]
    pts, span = line_points(plot, series)
    if pts is None:
        return ["%s: no polyline for %s" % (plot_id, series)]
    if len(pts) != len(expect):
        return ["%s: %d points drawn, the log has %d" % (series, len(pts), len(expect))]
    bad = [(e, p) for e, p in zip(expect, pts)
           if not (close(e[0], p[0], 1e-4 * span[0]) and close(e[1], p[1], 1e-4 * span[1]))]
    return ["%s: drawn %s, log %s" % (series, bad[0][1], bad[0][0])] if bad else []


def main():
    html, dom, shot, logs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    steps, events = read_logs(logs)
    page, rendered = parse(html), parse(dom)
    order = sorted(steps)

    # every plot: in Chromium's DOM, with data, and visible in the screenshot
    problems = []
    for p in PLOTS:
        if p not in rendered.plots:
            problems.append("plot %s missing from the rendered DOM" % p)
        elif "no data" in rendered.text.get(p, ""):
            problems.append("plot %s says: %s" % (p, rendered.text[p].strip()[:80]))
        elif len(rendered.plots[p]["marks"]) < 3:
            problems.append("plot %s is empty" % p)
    try:
        img = read_png(shot)
        flat = img.reshape(-1, 3)
        colours = len(np.unique(flat[::7], axis=0))
        inked = float(np.mean(np.any(flat < 245, axis=1)))
        if colours < 16 or inked < 0.02:
            problems.append("screenshot looks blank: %d colours, %.1f%% not white" % (colours, 100 * inked))
        for p, rgb in PLOT_COLOURS.items():
            near = np.all(np.abs(flat.astype(int) - np.array(rgb)) <= 6, axis=1).sum()
            if near < 20:
                problems.append("plot %s's colour #%02x%02x%02x is not in the screenshot (%d pixels)" % ((p,) + rgb + (near,)))
    except (ValueError, OSError, zlib.error) as e:
        problems.append("screenshot: %s" % e)
    check("report_every_plot_rendered", problems)

    # loss, validation loss, tokens/s, MFU
    problems = compare_line(page, "loss", "loss", [(s, steps[s]["loss"]) for s in order])
    val = [(s, steps[s]["val_loss"]) for s in order if "val_loss" in steps[s]]
    marks = [(float(a["data-x"]), float(a["data-y"])) for t, a in page.plots["loss"]["marks"] if t == "circle"]
    if marks != [(float(s), float(v)) for s, v in val] or not val:
        problems.append("validation markers %s, log %s" % (marks[:3], val[:3]))
    check("report_loss_plot_equals_log", problems)
    problems = compare_line(page, "tokens_per_s", "tokens_per_s", [(s, steps[s]["tokens_per_s"]) for s in order])
    problems += compare_line(page, "mfu", "mfu", [(s, steps[s]["mfu"]) for s in order])
    check("report_throughput_plots_equal_log", problems)

    # per-rank step seconds
    cells = rank_cells(events)
    drawn = {(int(a["data-rank"]), int(a["data-step"])): float(a["data-s"])
             for t, a in page.plots["rank_step_time"]["marks"] if t == "rect" and "data-rank" in a}
    problems = [] if cells and drawn == {k: float(v) for k, v in cells.items()} else \
        ["heat map cells %s, log %s" % (sorted(drawn.items())[:4], sorted(cells.items())[:4])]
    check("report_heatmap_equals_log", problems)

    # timeline markers and goodput
    want = sorted((o["event"], float(o["t"])) for o in events if o["event"] in TIMELINE_EVENTS)
    got = sorted((a["data-event"], float(a["data-t"])) for t, a in page.plots["timeline"]["marks"] if "data-event" in a)
    attempts = [a for t, a in page.plots["timeline"]["marks"] if "data-attempt" in a]
    launches = [o for o in events if o["event"] == "launch"]
    problems = [] if got == want and len(attempts) == len(launches) else \
        ["timeline %d markers, log %d; %d attempt bars for %d launches" % (len(got), len(want), len(attempts), len(launches))]
    check("report_timeline_equals_log", problems)
    fin = [o for o in events if o["event"] == "finished"]
    bar = [a for t, a in page.plots["goodput"]["marks"] if "data-goodput" in a]
    problems = [] if fin and bar and float(bar[0]["data-goodput"]) == fin[-1]["goodput"] and \
        float(bar[0]["data-productive-s"]) == fin[-1]["productive_s"] and float(bar[0]["data-wall-s"]) == fin[-1]["wall_s"] \
        else ["goodput bar %s, log %s" % (bar[:1], fin[-1:])]
    check("report_goodput_equals_log", problems)

    # the time ledger: the stacked bar's causes and the cause timeline's segments are the goodput event's
    gp = [o for o in events if o["event"] == "goodput"]
    problems = []
    if not gp:
        problems.append("no goodput event in the log")
    else:
        g = gp[-1]
        bars = {a["data-cause"]: float(a["data-seconds"]) for t, a in page.plots["time_ledger"]["marks"] if "data-seconds" in a}
        if bars != {c: s for c, s in g["seconds"].items() if s > 0}:
            problems.append("bar %s, log %s" % (bars, g["seconds"]))
        segs = [[float(a["data-t0"]), float(a["data-t1"]), a["data-cause"], int(a["data-attempt"])]
                for t, a in page.plots["cause_timeline"]["marks"] if "data-cause" in a]
        if segs != g["timeline"]:
            problems.append("timeline %d segments, log %d" % (len(segs), len(g["timeline"])))
        if abs(sum(g["seconds"].values()) - g["wall_s"]) > 0.01 * g["wall_s"]:
            problems.append("the log's causes add up to %.3f of %.3f s" % (sum(g["seconds"].values()), g["wall_s"]))
    check("report_ledger_equals_log", problems)

    # the summary cards, as Chromium shows them, against the same figures computed from the logs
    cards = dict(re.findall(r'<div class="card">([^<]*)<b>([^<]*)</b>', open(dom, encoding="utf-8").read()))
    tps, mfu = [steps[s]["tokens_per_s"] for s in order], [steps[s]["mfu"] for s in order]
    want = {"steps logged": "%d" % len(order), "final loss": "%.4f" % steps[order[-1]]["loss"],
            "best val loss": "%.4f" % min(v for _, v in val), "mean tokens/s": "%.0f" % (sum(tps) / len(tps)),
            "mean MFU": "%.3g%%" % (100 * (sum(mfu) / len(mfu))), "goodput": "%.1f%%" % (100 * fin[-1]["goodput"]),
            "restarts": "%d" % fin[-1]["restarts"], "status": fin[-1]["status"],
            "effective training time": "%.1f%%" % (100 * gp[-1]["effective"]) if gp else None,
            "stragglers": "%d" % sum(o["event"] == "straggler" for o in events)}
    check("report_summary_cards_equal_log", ["card %r shows %r, log %r" % (k, cards.get(k), v)
                                             for k, v in want.items() if cards.get(k) != v])

    # the data block
    d = json.loads(page.data)
    problems = []
    for key in ("loss", "val_loss", "tokens_per_s", "mfu"):
        exp = [[s, steps[s][key]] for s in order if key in steps[s]]
        if d[key] != exp:
            problems.append("%s: block %s, log %s" % (key, d[key][:2], exp[:2]))
    if sorted((r, s, v) for r, s, v in d["rank_step_s"]) != sorted((r, s, v) for (r, s), v in cells.items()):
        problems.append("rank_step_s differs")
    strag = [(o["rank"], o.get("host"), o.get("section")) for o in events if o["event"] == "straggler"]
    if [(x["rank"], x["host"], x["section"]) for x in d["stragglers"]] != strag or not strag:
        problems.append("stragglers: block %s, log %s" % (d["stragglers"], strag))
    if d.get("goodput", {}).get("goodput") != fin[-1]["goodput"]:
        problems.append("goodput differs")
    if gp and (d.get("ledger", {}).get("seconds") != gp[-1]["seconds"] or d["ledger"].get("timeline") != gp[-1]["timeline"]):
        problems.append("ledger differs")
    check("report_data_block_equals_log", problems)

    for name, problems in results:
        print(("ok %s" % name) if not problems else ("FAIL %s (%s)" % (name, "; ".join(problems)[:600])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
