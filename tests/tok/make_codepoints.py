#!/usr/bin/env python3
"""make_codepoints.py: OUT_FILE gets N random code points from every plane, as UTF-8, with a
space now and then (same bytes every run: seeded).

Only code points assigned in Python's Unicode database are used. That database is Unicode 14.0
on Debian 12, the version of Debian's PCRE2 tables; Hugging Face's Oniguruma knows Unicode 16.0,
so letters assigned since (CJK Extension H, Garay, ...) are \\p{L} there and not here. That
difference is documented in docs/FORMATS.md; this corpus checks everything else.
Usage: make_codepoints.py OUT_FILE [N]"""
import random
import sys
import unicodedata

out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20000
rng = random.Random(20240520)
chars = []
while len(chars) < n:
    r = rng.random()
    cp = rng.randrange(0x800) if r < 0.25 else rng.randrange(0x10000) if r < 0.5 else rng.randrange(0x10000, 0x30000) if r < 0.75 else rng.randrange(0x110000)
    if 0xD800 <= cp <= 0xDFFF or unicodedata.category(chr(cp)) == "Cn":
        continue
    chars.append(chr(cp))
    if rng.random() < 0.125:
        chars.append(" ")
with open(out, "w", encoding="utf-8", newline="") as f:
    f.write("".join(chars))
