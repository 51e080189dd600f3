#!/usr/bin/python3
"""relabel_ckpt.py DIR FROM TO: turn the checkpoint DIR/step-FROM into DIR/step-TO (the same state,
labelled as if TO steps were done): the directory is renamed, the manifest's "step" rewritten and
its CRC-32C (docs/CHECKPOINT.md: over the manifest body's bytes) recomputed. A test oracle: resuming
it continues from step FROM's state at step TO + 1, i.e. the run in which steps FROM+1..TO made no
update (the skip of a non-finite step, --on-nan skip)."""
import os
import re
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283
d, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src, dst = f"{d}/step-{a:08d}", f"{d}/step-{b:08d}"
text = open(f"{src}/manifest.json", "rb").read()
m = re.match(rb'\{"crc32c": "([0-9a-f]{8})", "manifest": (.*)\}\n$', text, re.S)
assert m and int(m.group(1), 16) == crc32c(m.group(2)), "manifest CRC"
body, n = re.subn(rb'"step":\s*%d,' % a, b'"step":\t%d,' % b, m.group(2), count=1)
assert n == 1, "no step field"
os.rename(src, dst)
open(f"{dst}/manifest.json", "wb").write(b'{"crc32c": "%08x", "manifest": ' % crc32c(body) + body + b"}\n")
open(f"{d}/latest", "w").write(f"step-{b:08d}\n")
