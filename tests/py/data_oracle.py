#!/usr/bin/python3
"""data_oracle.py: independent Python side of the shard and loader tests.

  shard PATH VERSION N   writes an llm.c shard the way llm.c's data scripts do (numpy int32
                         header: magic, version, count; then uint16 or uint32 tokens) holding
                         token i = (i * 7919 + 13) mod M, M = 65536 (v1) or 2^31 - 1 (v7)
  perm SEED EPOCH N      prints the shuffle permutation of N windows for (SEED, EPOCH), computed
                         from the algorithm as docs/FORMATS.md describes it
"""
import sys

import numpy as np

MASK = (1 << 64) - 1


def shard(path, version, n):
    modulus = 65536 if version == 1 else 2**31 - 1
    tokens = (np.arange(n, dtype=np.int64) * 7919 + 13) % modulus
    header = np.zeros(256, dtype=np.int32)
    header[0] = 20240520 if version == 1 else 20240801
    header[1] = version
    header[2] = n
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16 if version == 1 else np.uint32).tobytes())


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def perm(seed, epoch, n):
    _, a = splitmix64(seed)
    _, b = splitmix64(epoch ^ 0x6D79726961640001)
    state = a ^ b
    p = list(range(n))
    for i in range(n, 1, -1):
        threshold = (2**64 - i) % i  # = 2^64 mod i
        while True:
            state, r = splitmix64(state)
            if r >= threshold:
                break
        j = r % i
        p[i - 1], p[j] = p[j], p[i - 1]
    return p


if __name__ == "__main__":
    if sys.argv[1] == "shard":
        shard(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        print(" ".join(map(str, perm(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))))
