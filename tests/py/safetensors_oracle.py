#!/usr/bin/python3
"""safetensors_oracle.py: an independent (Python, numpy/torch) side of the safetensors tests.

  write DIR       writes DIR/py.safetensors (F32, F16, BF16, F64, I64 tensors, written with
                  struct + json exactly as the format specifies) and, for each float tensor,
                  DIR/ref_<name>.f32: its values converted to float32 by numpy/torch.
  check FILE DIR  reads a file written by myriad with its own parser and checks it against
                  DIR/expected.txt ("name d0 d1 ..." per tensor, in order) and the raw bytes
                  DIR/raw_<name>.bin dumped by the C test; prints "ok" or the first problem.
"""
import json
import struct
import sys

import numpy as np


def write(out):
    import torch
    rng = np.random.default_rng(20240520)
    tensors = []  # (name, dtype string, shape, raw bytes, float32 reference or None)

    w = (rng.standard_normal((3, 5)) * 3).astype(np.float32)
    w[0, 0], w[0, 1], w[0, 2] = np.inf, -0.0, np.float32(1e-40)  # inf, negative zero, subnormal
    tensors.append(("w_f32", "F32", [3, 5], w.tobytes(), w))

    h = np.array([1.0, -2.0, 65504.0, 6e-8, 6.1e-5, -0.0, np.inf, -np.inf, 0.333] +
                 list(rng.standard_normal(8)), dtype=np.float16)
    h_bits = h.view(np.uint16).copy()
    h_bits[-1] = 0x0001  # smallest subnormal, 2^-24
    h_bits[-2] = 0x03FF  # largest subnormal
    h = h_bits.view(np.float16)
    tensors.append(("h_f16", "F16", [17], h.tobytes(), h.astype(np.float32)))

    b = torch.from_numpy(rng.standard_normal((2, 3, 4)).astype(np.float32)).to(torch.bfloat16)
    b_raw = b.view(torch.int16).numpy().tobytes()
    tensors.append(("b_bf16", "BF16", [2, 3, 4], b_raw, b.float().numpy()))

    d = np.array([1.0 / 3.0, 1e300, -1e-300, 2.5, -7.0, 123456789.123456789], dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        tensors.append(("d_f64", "F64", [6], d.tobytes(), d.astype(np.float32)))

    s = np.array(42.5, dtype=np.float32)
    tensors.append(("scalar", "F32", [], s.tobytes(), s))
    e = np.zeros((0, 4), dtype=np.float32)
    tensors.append(("empty", "F32", [0, 4], e.tobytes(), e))
    ids = np.arange(5, dtype=np.int64) * 1000
    tensors.append(("ids", "I64", [5], ids.tobytes(), None))

    header = {"__metadata__": {"format": "pt", "source": "numpy"}}
    data = b""
    for name, dt, shape, raw, _ in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - (len(text) + 8) % 8) % 8)
    with open(f"{out}/py.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    sys.path.insert(0, "scripts")  # the same tensors through the repo's helper writer
    from safetensors_io import save
    save(f"{out}/helper.safetensors", {
        "w_f32": torch.from_numpy(w), "h_f16": torch.from_numpy(h), "b_bf16": b,
        "d_f64": torch.from_numpy(d), "scalar": torch.from_numpy(s), "empty": torch.from_numpy(e),
        "ids": torch.from_numpy(ids)})
    for name, _, _, _, ref in tensors:
        if ref is not None:
            np.ascontiguousarray(ref, dtype="<f4").tofile(f"{out}/ref_{name}.f32")


def check(path, d):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        return "header length runs past the file"
    if (8 + n) % 8:
        return f"data section starts at {8 + n}, not 8-byte aligned"
    header = json.loads(blob[8:8 + n].decode())
    data = blob[8 + n:]
    if header.get("__metadata__", {}).get("format") != "pt":
        return "metadata format is not 'pt' (transformers refuses such files)"
    expected = [line.split() for line in open(f"{d}/expected.txt") if line.strip()]
    names = [k for k in header if k != "__metadata__"]
    if names != [e[0] for e in expected]:
        return f"tensor names/order {names} != {[e[0] for e in expected]}"
    offset = 0
    import torch
    for name, *dims in expected:
        info = header[name]
        shape = [int(x) for x in dims]
        if info["dtype"] != "F32" or info["shape"] != shape:
            return f"{name}: dtype/shape {info['dtype']} {info['shape']} != F32 {shape}"
        begin, end = info["data_offsets"]
        if begin != offset or end - begin != 4 * int(np.prod(shape)):
            return f"{name}: offsets {begin},{end} not contiguous/sized (expected start {offset})"
        raw = open(f"{d}/raw_{name}.bin", "rb").read()
        if data[begin:end] != raw:
            return f"{name}: bytes differ from the raw dump"
        if end > begin:  # and torch sees the same values
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).view(shape)
            ref = np.frombuffer(raw, dtype="<f4").reshape(shape)
            if not np.array_equal(t.numpy().view(np.uint32), ref.view(np.uint32)):
                return f"{name}: torch reads different values"
        offset = end
    if offset != len(data):
        return f"data section has {len(data) - offset} trailing bytes"
    # the repo's Python helper (used by fixture scripts) reads it the same way
    sys.path.insert(0, "scripts")
    from safetensors_io import load
    loaded = load(path)
    for name, *dims in expected:
        raw = open(f"{d}/raw_{name}.bin", "rb").read()
        if loaded[name].numpy().tobytes() != raw or list(loaded[name].shape) != [int(x) for x in dims]:
            return f"{name}: scripts/safetensors_io.py reads something else"
    try:  # and Hugging Face's own reader, where it is installed (Debian does not ship it)
        from safetensors.numpy import load_file
    except ImportError:
        return None
    official = load_file(path)
    for name, *dims in expected:
        if official[name].tobytes() != open(f"{d}/raw_{name}.bin", "rb").read():
            return f"{name}: the safetensors package reads something else"
    return None


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
        print("ok")
    else:
        problem = check(sys.argv[2], sys.argv[3])
        print("ok" if problem is None else problem)
        sys.exit(0 if problem is None else 1)
