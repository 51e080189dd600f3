#!/usr/bin/python3
"""PyTorch CPU baseline for the training-step benchmark: the same GPT-2 math as myriad
(scripts/make_torch_fixture.py's model), AdamW with decay on >= 2-D tensors, clip_grad_norm_.
Usage: torch_gpt2_step.py LAYERS HIDDEN HEADS VOCAB SEQ_MAX B T STEPS THREADS
Prints one JSON line: {"tokens_per_s": x, "step_ms": [...]} (the first step is warm-up)."""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from make_torch_fixture import Gpt2  # noqa: E402

L, C, H, V, S, B, T, steps, threads = map(int, sys.argv[1:10])
torch.set_num_threads(threads)
cfg = {"n_layer": L, "n_embd": C, "n_head": H, "n_inner": 4 * C, "vocab_size": V, "n_positions": S,
       "layer_norm_epsilon": 1e-5}
model = Gpt2(cfg, torch.Generator().manual_seed(0))
params = list(model.p.values())
opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr=3e-4,
                        betas=(0.9, 0.95), eps=1e-8)
gen = torch.Generator().manual_seed(1)
times = []
for s in range(steps + 1):
    x = torch.randint(0, V, (B, T), generator=gen)
    y = torch.randint(0, V, (B, T), generator=gen)
    t0 = time.perf_counter()
    loss = F.cross_entropy(model.forward(x).view(-1, V), y.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t0)
steady = times[1:]
print(json.dumps({"tokens_per_s": B * T * len(steady) / sum(steady), "step_ms": [round(t * 1e3, 1) for t in steady],
                  "torch": torch.__version__, "threads": threads}))
