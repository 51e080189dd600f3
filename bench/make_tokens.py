#!/usr/bin/python3
"""Write an llm.c uint16 shard of N uniformly random tokens below VOCAB: make_tokens.py OUT N VOCAB [SEED]."""
import random
import struct
import sys

out, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
toks = [r.randrange(vocab) for _ in range(n)]
with open(out, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *toks))
