#!/usr/bin/env python3
"""PyTorch GPU baseline of the device benchmark (bench/gpu_bench.sh): the same GPT-2 or Llama math
as myriad (scripts/make_torch_fixture.py's models, reused here), made the way a PyTorch user runs
it fast on one GPU: bf16 autocast with fp32 master weights, F.scaled_dot_product_attention with
is_causal (the flash kernel), torch.compile of forward + loss, fused AdamW (decay on >= 2-D
tensors), clip_grad_norm_(1.0).

Usage: torch_gpu_step.py gpt2 L C H V B T STEPS WARMUP PEAK_TFLOPS [--no-compile] [--cpu-rehearse]
       torch_gpu_step.py llama L C H KV F V B T STEPS WARMUP PEAK_TFLOPS [--no-compile] [--cpu-rehearse]
--cpu-rehearse runs the same code on the CPU without compiling (a check of the script on a
machine without a GPU or with an older PyTorch; its figures mean nothing).
Prints one JSON line: tokens_per_s over STEPS timed steps after WARMUP untimed ones (the first
compiles), step_ms, mfu (model FLOPs per token as myriad counts them: 6 x matmul parameters +
6 L T C, over PEAK_TFLOPS), peak_mem_gib (torch.cuda.max_memory_allocated over the timed steps),
compile_s (the first step), the torch version and the device name."""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import make_torch_fixture as fx  # noqa: E402


def sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


args = [a for a in sys.argv[1:] if not a.startswith("--")]
rehearse = "--cpu-rehearse" in sys.argv
compile_it = "--no-compile" not in sys.argv and not rehearse
if hasattr(F, "scaled_dot_product_attention") or not rehearse:  # PyTorch < 2.0 rehearses with the fixture's own
    fx.causal_attention = sdpa_causal  # the fixture models call it by this name
arch = args[0]
if arch == "gpt2":
    L, C, H, V, B, T, steps, warmup = map(int, args[1:9])
    peak = float(args[9])
    KV, Fi = H, 4 * C
    cfg = {"n_layer": L, "n_embd": C, "n_head": H, "n_inner": Fi, "vocab_size": V, "n_positions": T,
           "layer_norm_epsilon": 1e-5}
    make = fx.Gpt2
    fc_width = Fi
else:
    L, C, H, KV, Fi, V, B, T, steps, warmup = map(int, args[1:11])
    peak = float(args[11])
    cfg = {"num_hidden_layers": L, "hidden_size": C, "num_attention_heads": H, "num_key_value_heads": KV,
           "intermediate_size": Fi, "vocab_size": V, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    make = fx.Llama
    fc_width = 2 * Fi

if not rehearse and not torch.cuda.is_available():
    print(json.dumps({"skipped": "no CUDA device visible to PyTorch", "torch": torch.__version__}))
    sys.exit(0)
dev = torch.device("cpu" if rehearse else "cuda")
if not rehearse:
    torch.set_default_device(dev)  # the fixture models create their position tensors on it
    torch.backends.cuda.matmul.allow_tf32 = False


def sync():
    if not rehearse:
        torch.cuda.synchronize()

model = make(cfg, torch.Generator(dev).manual_seed(0))
params = list(model.p.values())
with torch.no_grad():  # GPT-2-style init (the fixtures' larger scales would overflow a deep model)
    for p in params:
        if p.dim() >= 2:
            p.normal_(0.0, 0.02)
opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **({} if rehearse else {"fused": True}))


def loss_of(x, y):
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        logits = model.forward(x)
    return F.cross_entropy(logits.float().view(-1, V), y.view(-1))


step_loss = torch.compile(loss_of) if compile_it else loss_of
gen = torch.Generator(dev).manual_seed(1)


def step():
    x = torch.randint(0, V, (B, T), generator=gen)
    y = torch.randint(0, V, (B, T), generator=gen)
    loss = step_loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


t0 = time.perf_counter()
step()
sync()
compile_s = time.perf_counter() - t0
for _ in range(max(warmup - 1, 0)):
    step()
sync()
if not rehearse:
    torch.cuda.reset_peak_memory_stats()
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    loss = step()
    sync()
    times.append(time.perf_counter() - t0)
hd = C // H
matmul_params = C * V + L * (C * (H + 2 * KV) * hd + C * C + C * fc_width + Fi * C)
flops_per_token = 6.0 * matmul_params + 6.0 * L * T * C
tps = B * T * len(times) / sum(times)
print(json.dumps({"framework": "pytorch", "arch": arch, "tokens_per_s": tps,
                  "step_ms": round(1e3 * sum(times) / len(times), 2),
                  "mfu": tps * flops_per_token / (peak * 1e12),
                  "peak_mem_gib": 0.0 if rehearse else torch.cuda.max_memory_allocated() / 2**30,
                  "compile_s": round(compile_s, 1), "compiled": compile_it, "last_loss": float(loss),
                  "params": sum(p.numel() for p in params), "torch": torch.__version__,
                  "device": "cpu (rehearsal)" if rehearse else torch.cuda.get_device_name()}))
