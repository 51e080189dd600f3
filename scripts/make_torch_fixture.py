#!/usr/bin/python3
"""Make the PyTorch reference fixtures for tiny GPT-2 and Llama (GQA) models.

Run with Debian's PyTorch:  /usr/bin/python3 scripts/make_torch_fixture.py [OUTDIR]
(default OUTDIR: tests/fixtures). For each family it writes OUTDIR/<name>/:
  config.json, model.safetensors   the initial model in Hugging Face layout (GPT-2 without the
                                   "transformer." prefix and with the attention mask buffers,
                                   to exercise both import paths)
  tokens.bin                       an llm.c uint16 token shard (magic 20240520, version 1)
  expected.safetensors             x, y (batch 0, as F32), logits, loss, grad.<hf name> for batch 0
  expected.json                    the training flags and the per-step losses / grad norms of
                                   STEPS AdamW steps with clipping and a warmup+cosine schedule
  expected_bf16.json               the same STEPS from the same weights under CPU autocast bf16
                                   (fp32 master weights; GEMMs in bf16 with fp32 accumulation;
                                   residual stream, norms, softmax and cross-entropy in fp32), the
                                   reference of `--dtype bf16` (docs/GPU.md)
The models are written directly in PyTorch (no transformers package) with Hugging Face's
tensor names and layouts; the math follows transformers' GPT2LMHeadModel / LlamaForCausalLM.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float32)
B, T, STEPS = 2, 8, 10
TRAIN = dict(lr=3e-3, min_lr=3e-4, warmup=2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip=0.5)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def causal_attention(q, k, v):
    # q: [B, H, T, hd], k/v: [B, H, T, hd]
    hd = q.shape[-1]
    att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf"))
    # softmax in fp32 (a no-op in fp32 runs; under autocast bf16 the scores are bf16, and the
    # reference keeps softmax statistics in fp32 as CUDA autocast and our kernels do)
    return F.softmax(att.float(), dim=-1) @ v


class Gpt2:
    def __init__(self, cfg, gen):
        C, L, V, S, Fi = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"], cfg["n_inner"]
        self.cfg = cfg
        p = {}
        rnd = lambda *shape, std=0.02: (torch.randn(*shape, generator=gen) * std)
        p["wte.weight"] = rnd(V, C)
        p["wpe.weight"] = rnd(S, C, std=0.01)
        for i in range(L):
            h = f"h.{i}."
            p[h + "ln_1.weight"] = 1 + rnd(C, std=0.1)
            p[h + "ln_1.bias"] = rnd(C, std=0.1)
            p[h + "attn.c_attn.weight"] = rnd(C, 3 * C, std=0.2)
            p[h + "attn.c_attn.bias"] = rnd(3 * C, std=0.1)
            p[h + "attn.c_proj.weight"] = rnd(C, C, std=0.2)
            p[h + "attn.c_proj.bias"] = rnd(C, std=0.1)
            p[h + "ln_2.weight"] = 1 + rnd(C, std=0.1)
            p[h + "ln_2.bias"] = rnd(C, std=0.1)
            p[h + "mlp.c_fc.weight"] = rnd(C, Fi, std=0.2)
            p[h + "mlp.c_fc.bias"] = rnd(Fi, std=0.1)
            p[h + "mlp.c_proj.weight"] = rnd(Fi, C, std=0.2)
            p[h + "mlp.c_proj.bias"] = rnd(C, std=0.1)
        p["ln_f.weight"] = 1 + rnd(C, std=0.1)
        p["ln_f.bias"] = rnd(C, std=0.1)
        self.p = {k: v.clone().requires_grad_(True) for k, v in p.items()}

    def forward(self, x):
        cfg, p = self.cfg, self.p
        C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
        Bn, Tn = x.shape
        h = p["wte.weight"][x] + p["wpe.weight"][torch.arange(Tn)]
        for i in range(cfg["n_layer"]):
            q = f"h.{i}."
            a = F.layer_norm(h, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], eps)
            qkv = a @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
            qq, kk, vv = qkv.split(C, dim=-1)
            sh = lambda t: t.view(Bn, Tn, H, C // H).transpose(1, 2)
            y = causal_attention(sh(qq), sh(kk), sh(vv)).transpose(1, 2).reshape(Bn, Tn, C)
            h = h + (y @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"])
            a = F.layer_norm(h, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], eps)
            m = gelu_tanh(a @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"])
            h = h + (m @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"])
        h = F.layer_norm(h, (C,), p["ln_f.weight"], p["ln_f.bias"], eps)
        return h @ p["wte.weight"].t()

    def state(self):
        """Tensors as GPT2LMHeadModel would save them (no prefix), plus the mask buffers."""
        out = {k: v.detach() for k, v in self.p.items()}
        S = self.cfg["n_positions"]
        for i in range(self.cfg["n_layer"]):
            out[f"h.{i}.attn.bias"] = torch.ones(S, S).tril().view(1, 1, S, S)
            out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
        return out


class Llama:
    def __init__(self, cfg, gen):
        C, L, V, Fi = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"], cfg["intermediate_size"]
        H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        hd = C // H
        self.cfg = cfg
        rnd = lambda *shape, std=0.2: (torch.randn(*shape, generator=gen) * std)
        p = {"model.embed_tokens.weight": rnd(V, C, std=0.02)}
        for i in range(L):
            q = f"model.layers.{i}."
            p[q + "input_layernorm.weight"] = 1 + rnd(C, std=0.1)
            p[q + "self_attn.q_proj.weight"] = rnd(H * hd, C)
            p[q + "self_attn.k_proj.weight"] = rnd(KV * hd, C)
            p[q + "self_attn.v_proj.weight"] = rnd(KV * hd, C)
            p[q + "self_attn.o_proj.weight"] = rnd(C, H * hd)
            p[q + "post_attention_layernorm.weight"] = 1 + rnd(C, std=0.1)
            p[q + "mlp.gate_proj.weight"] = rnd(Fi, C)
            p[q + "mlp.up_proj.weight"] = rnd(Fi, C)
            p[q + "mlp.down_proj.weight"] = rnd(C, Fi)
        p["model.norm.weight"] = 1 + rnd(C, std=0.1)
        p["lm_head.weight"] = rnd(V, C, std=0.05)
        self.p = {k: v.clone().requires_grad_(True) for k, v in p.items()}

    def rms(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.cfg["rms_norm_eps"]))

    def rope(self, x, Tn):
        hd = x.shape[-1]
        inv_freq = 1.0 / (self.cfg["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(Tn).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def attention(self, a, i):
        cfg, p = self.cfg, self.p
        C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        hd = C // H
        Bn, Tn, _ = a.shape
        q = f"model.layers.{i}."
        qq = (a @ p[q + "self_attn.q_proj.weight"].t()).view(Bn, Tn, H, hd).transpose(1, 2)
        kk = (a @ p[q + "self_attn.k_proj.weight"].t()).view(Bn, Tn, KV, hd).transpose(1, 2)
        vv = (a @ p[q + "self_attn.v_proj.weight"].t()).view(Bn, Tn, KV, hd).transpose(1, 2)
        qq, kk = self.rope(qq, Tn), self.rope(kk, Tn)
        kk = kk.repeat_interleave(H // KV, dim=1)
        vv = vv.repeat_interleave(H // KV, dim=1)
        y = causal_attention(qq, kk, vv).transpose(1, 2).reshape(Bn, Tn, C)
        return y @ p[q + "self_attn.o_proj.weight"].t()

    def mlp(self, a, i):
        p, q = self.p, f"model.layers.{i}."
        g = a @ p[q + "mlp.gate_proj.weight"].t()
        u = a @ p[q + "mlp.up_proj.weight"].t()
        return (F.silu(g) * u) @ p[q + "mlp.down_proj.weight"].t()

    def forward(self, x):
        p = self.p
        h = p["model.embed_tokens.weight"][x]
        for i in range(self.cfg["num_hidden_layers"]):
            q = f"model.layers.{i}."
            h = h + self.attention(self.rms(h, p[q + "input_layernorm.weight"]), i)
            h = h + self.mlp(self.rms(h, p[q + "post_attention_layernorm.weight"]), i)
        h = self.rms(h, p["model.norm.weight"])
        return h @ p["lm_head.weight"].t()

    def state(self):
        return {k: v.detach() for k, v in self.p.items()}


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().to(torch.float32)
        data = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_shard(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def lr_at(step):
    t = TRAIN
    if step < t["warmup"]:
        return t["lr"] * (step + 1) / t["warmup"]
    progress = (step - t["warmup"]) / (STEPS - t["warmup"])
    return t["min_lr"] + (t["lr"] - t["min_lr"]) * 0.5 * (1 + math.cos(math.pi * progress))


def train(model, batch, vocab, autocast):
    """STEPS AdamW steps with clipping and the warmup+cosine schedule; (losses, grad norms)."""
    params = list(model.p.values())
    decay = [v for v in params if v.dim() >= 2]
    no_decay = [v for v in params if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": TRAIN["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=TRAIN["lr"], betas=(TRAIN["beta1"], TRAIN["beta2"]), eps=TRAIN["eps"])
    losses, norms = [], []
    for s in range(STEPS):
        x, y = batch(s)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(model.forward(x).view(-1, vocab), y.reshape(-1))
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, TRAIN["clip"])))
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    return losses, norms


def make(outdir, name, model, cfg, vocab, gen):
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), model.state())
    tokens = torch.randint(0, vocab, (STEPS * B * T + 1,), generator=gen).tolist()
    write_shard(os.path.join(d, "tokens.bin"), tokens)
    tok = torch.tensor(tokens, dtype=torch.long)

    def batch(k):
        w = tok[k * B * T: k * B * T + B * T + 1]
        return w[:-1].view(B, T), w[1:].view(B, T)

    x, y = batch(0)
    logits = model.forward(x)
    loss = F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
    loss.backward()
    expected = {"x": x.float(), "y": y.float(), "logits": logits.reshape(B * T, vocab), "loss": loss.reshape(1)}
    for k, v in model.p.items():
        expected["grad." + k] = v.grad
    write_safetensors(os.path.join(d, "expected.safetensors"), expected)
    for v in model.p.values():
        v.grad = None

    initial = {k: v.detach().clone() for k, v in model.p.items()}
    losses, norms = train(model, batch, vocab, autocast=False)
    flags = ["--batch", str(B), "--seq", str(T), "--steps", str(STEPS), "--no-shuffle", "--lr-schedule", "cosine",
             "--lr", repr(TRAIN["lr"]), "--min-lr", repr(TRAIN["min_lr"]), "--warmup", str(TRAIN["warmup"]),
             "--beta1", repr(TRAIN["beta1"]), "--beta2", repr(TRAIN["beta2"]), "--eps", repr(TRAIN["eps"]),
             "--weight-decay", repr(TRAIN["weight_decay"]), "--clip", repr(TRAIN["clip"])]
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump({"B": B, "T": T, "steps": STEPS, "train": TRAIN, "flags": flags, "losses": losses,
                   "grad_norms": norms, "torch": torch.__version__}, f, indent=1)
    print(f"{name}: loss {losses[0]:.6f} -> {losses[-1]:.6f}, grad norms {norms[0]:.3f}..{norms[-1]:.3f}")
    # the same steps from the same weights under CPU autocast bf16
    with torch.no_grad():
        for k, v in model.p.items():
            v.copy_(initial[k])
    losses, norms = train(model, batch, vocab, autocast=True)
    with open(os.path.join(d, "expected_bf16.json"), "w") as f:
        json.dump({"B": B, "T": T, "steps": STEPS, "train": TRAIN, "flags": flags + ["--dtype", "bf16"],
                   "losses": losses, "grad_norms": norms, "autocast": "cpu bfloat16",
                   "torch": torch.__version__}, f, indent=1)
    print(f"{name} bf16: loss {losses[0]:.6f} -> {losses[-1]:.6f}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    gen = torch.Generator().manual_seed(1234)
    g2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4,
          "n_inner": 96, "vocab_size": 67, "n_positions": 16, "layer_norm_epsilon": 1e-5,
          "activation_function": "gelu_new", "tie_word_embeddings": True}
    make(outdir, "gpt2-tiny", Gpt2(g2, gen), g2, 67, gen)
    ll = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 32,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 48, "vocab_size": 67,
          "max_position_embeddings": 16, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "hidden_act": "silu"}
    make(outdir, "llama-tiny", Llama(ll, gen), ll, 67, gen)


if __name__ == "__main__":
    main()
