#!/usr/bin/python3
"""safetensors_io.py: read and write safetensors files from Python without the `safetensors`
package (Debian does not ship it), for fixture scripts and tests.

    from safetensors_io import save, load
    save("model.safetensors", {"w": torch_or_numpy_array, ...})   # keeps each tensor's dtype
    tensors = load("model.safetensors")                            # {name: torch.Tensor}

Layout as in docs/FORMATS.md: u64 little-endian header length, JSON header (padded with
spaces to 8 bytes, metadata {"format": "pt"}), tensors back to back in the given order.
"""
import json
import struct

import numpy as np
import torch

_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}
_TORCH = {v: k for k, v in _DTYPES.items()}


def save(path, tensors, metadata=None):
    header = {"__metadata__": {"format": "pt", **(metadata or {})}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        t = torch.as_tensor(t).detach().cpu().contiguous()
        # bytes via a same-width integer view (numpy has no bfloat16)
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _TORCH[info["dtype"]]
        raw = bytearray(data[begin:end])
        if dtype == torch.bfloat16:
            t = torch.from_numpy(np.frombuffer(raw, dtype=np.int16).copy()).view(torch.bfloat16)
        elif len(raw) == 0:
            t = torch.empty(0, dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out
