#!/usr/bin/python3
"""A padded-vocabulary run against the same run unpadded: vocab_pad_compare.py REF.jsonl RUN.jsonl
REF_DIR RUN_DIR VOCAB [val]. The padding changes no number, so the oracle is equality, not a
tolerance: every step's loss, gradient norm and validation loss as logged (9 significant digits;
with `val`, validation losses must be there) are the same, the exports
(model.safetensors) are the same bytes, and the export holds no padding: every tensor indexed by
the vocabulary (GPT-2's wte, Llama's embed_tokens and lm_head) has exactly VOCAB rows. Exit 1 on
failure, with what differs."""
import json
import struct
import sys


def log(path):
    try:
        return [(r["loss"], r["grad_norm"], r.get("val_loss")) for r in map(json.loads, open(path))]
    except OSError as e:
        sys.exit(f"no log: {e}")


def header(path):
    try:
        b = open(path, "rb").read()
    except OSError as e:
        sys.exit(f"no export: {e}")
    n = struct.unpack("<Q", b[:8])[0]
    return b, {k: v for k, v in json.loads(b[8:8 + n]).items() if k != "__metadata__"}


ref_log, run_log, ref_dir, run_dir, vocab = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
problems = []
a, b = log(ref_log), log(run_log)
if not a or len(a) != len(b):
    problems.append(f"steps {len(b)} vs {len(a)}")
for i, (x, y) in enumerate(zip(a, b)):
    if x != y:
        problems.append(f"step {i + 1}: loss, grad_norm, val_loss {y} vs {x}")
        break
vals = sum(1 for x in b if x[2] is not None)
if len(sys.argv) > 6 and sys.argv[6] == "val" and not vals:
    problems.append("no validation loss logged")
ra, ha = header(ref_dir + "/model.safetensors")
rb, hb = header(run_dir + "/model.safetensors")
vocab_tensors = [k for k in hb if any(s in k for s in ("wte", "embed_tokens", "lm_head"))]
if not vocab_tensors:
    problems.append("no vocabulary tensor in the export")
for k in vocab_tensors:
    if hb[k]["shape"][0] != vocab:
        problems.append(f"{k} has shape {hb[k]['shape']}: not {vocab} rows")
if ra != rb:
    diff = [k for k in ha if k not in hb or ha[k]["shape"] != hb[k]["shape"]]
    problems.append(f"exports differ ({'shapes of ' + ', '.join(diff) if diff else 'values'})")
if problems:
    print("; ".join(problems))
    sys.exit(1)
print(f"{len(b)} steps equal (last loss {b[-1][0]}; {vals} validation losses), exports identical ({len(rb)} bytes), "
      f"{', '.join(vocab_tensors)}: {vocab} rows")
