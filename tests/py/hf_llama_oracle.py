#!/usr/bin/python3
"""PyTorch oracle for Hugging Face Llama checkpoints as the hub ships them (tests/test_hf_sharded.sh).

  make DIR KIND      write a checkpoint DIR in Hugging Face layout, written the way transformers
                     saves one: config.json, model.safetensors.index.json and shard files
                     (model-0000i-of-0000n.safetensors), plus DIR/tokens.bin (an llm.c uint16
                     shard) and DIR/expected.json (the mean cross-entropy of batch 0 in fp32).
                     KIND:
                       llama31   Llama 3.1 style: GQA, rope_scaling llama3, BF16 weights, 3 shards
                       bias      attention_bias + mlp_bias, rope_scaling linear, F16 weights, 2 shards
  loss DIR B T       the fp32 loss of batch 0 (B x T tokens of DIR/tokens.bin, --no-shuffle order)
                     under the weights in DIR (any layout myriad writes: one file or shards,
                     F32 or BF16), printed as JSON {"loss": x}
  same A B           exit 0 when the weights of checkpoints A and B hold the same values after
                     rounding A's to B's dtype (A: fp32 export, B: bf16 export of the same run)

The model is written directly in PyTorch (no transformers package) with Hugging Face's names and
math: RMSNorm, SwiGLU, rotary in the rotate-half convention with the inverse frequencies of
transformers' rope initialisation (default, linear, llama3), grouped-query attention, optional
q/k/v/o and gate/up/down biases.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from safetensors_io import load as read_file, save  # noqa: E402  (the project's reader and writer)

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def read_weights(d):
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return read_file(single)
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    out = {}
    for f in sorted(set(index["weight_map"].values())):
        out.update(read_file(os.path.join(d, f)))
    assert set(out) == set(index["weight_map"]), "index and shard files disagree"
    return out


def write_file(path, tensors, dtype_name):
    save(path, {n: t.detach().to(DTYPES[dtype_name][0]) for n, t in tensors.items()})


def write_sharded(d, tensors, dtype_name, shards):
    names = list(tensors)
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for s in range(shards):
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        write_file(os.path.join(d, fname), part, dtype_name)
        for n, t in part.items():
            weight_map[n] = fname
            total += t.numel() * DTYPES[dtype_name][1]
    json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
              open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=2)


# ---------------------------------------------------------------- the model
def inv_freq(cfg):
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    base = cfg["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    rs = cfg.get("rope_scaling")
    if not rs or rs.get("rope_type", rs.get("type")) == "default":
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv / rs["factor"]
    if kind == "dynamic":  # plain at or below max_position_embeddings (the only lengths trained here)
        return inv
    assert kind == "llama3", kind
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def linear(p, name, x):
    y = x @ p[name + ".weight"].t()
    return y + p[name + ".bias"] if name + ".bias" in p else y


def forward(cfg, p, x):
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = C // H, cfg["rms_norm_eps"]
    Bn, Tn = x.shape
    freqs = torch.outer(torch.arange(Tn).float(), inv_freq(cfg))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    rms = lambda h, w: w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))
    h = p["model.embed_tokens.weight"][x]
    mask = torch.ones(Tn, Tn, dtype=torch.bool).tril()
    for i in range(cfg["num_hidden_layers"]):
        q = f"model.layers.{i}."
        a = rms(h, p[q + "input_layernorm.weight"])
        qq = linear(p, q + "self_attn.q_proj", a).view(Bn, Tn, H, hd).transpose(1, 2)
        kk = linear(p, q + "self_attn.k_proj", a).view(Bn, Tn, KV, hd).transpose(1, 2)
        vv = linear(p, q + "self_attn.v_proj", a).view(Bn, Tn, KV, hd).transpose(1, 2)
        qq, kk = rope(qq, cos, sin), rope(kk, cos, sin)
        kk, vv = kk.repeat_interleave(H // KV, dim=1), vv.repeat_interleave(H // KV, dim=1)
        att = (qq @ kk.transpose(-1, -2)) / math.sqrt(hd)
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ vv).transpose(1, 2).reshape(Bn, Tn, C)
        h = h + linear(p, q + "self_attn.o_proj", y)
        a = rms(h, p[q + "post_attention_layernorm.weight"])
        g, u = linear(p, q + "mlp.gate_proj", a), linear(p, q + "mlp.up_proj", a)
        h = h + linear(p, q + "mlp.down_proj", F.silu(g) * u)
    h = rms(h, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else p["lm_head.weight"]
    return h @ head.t()


def batch0(d, B, T):
    with open(os.path.join(d, "tokens.bin"), "rb") as f:
        hdr = struct.unpack("<256i", f.read(1024))
        toks = struct.unpack(f"<{hdr[2]}H", f.read(2 * hdr[2]))
    w = torch.tensor(toks[:B * T + 1], dtype=torch.long)
    return w[:-1].view(B, T), w[1:].view(B, T)


def loss_of(cfg, weights, d, B, T):
    p = {k: v.float() for k, v in weights.items()}
    x, y = batch0(d, B, T)
    logits = forward(cfg, p, x)
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))


# ---------------------------------------------------------------- commands
def make(d, kind):
    os.makedirs(d, exist_ok=True)
    gen = torch.Generator().manual_seed(31 if kind == "llama31" else 7)
    C, H, KV, L, V, Fi = 32, 4, 2, 4, 97, 48
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": C,
           "num_attention_heads": H, "num_key_value_heads": KV, "num_hidden_layers": L,
           "intermediate_size": Fi, "vocab_size": V, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False, "head_dim": C // H,
           "attention_bias": kind == "bias", "mlp_bias": kind == "bias", "bos_token_id": 1, "eos_token_id": 2,
           "initializer_range": 0.02, "pretraining_tp": 1, "use_cache": True, "attention_dropout": 0.0,
           "transformers_version": "4.43.0"}
    if kind == "llama31":
        # original context 16 so that, at head_dim 8, low, medium and high frequencies all occur
        cfg["rope_scaling"] = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16, "rope_type": "llama3"}
        cfg["torch_dtype"], dtype, shards = "bfloat16", "BF16", 3
    else:
        cfg["rope_scaling"] = {"type": "linear", "factor": 2.0}
        cfg["torch_dtype"], dtype, shards = "float16", "F16", 2
    rnd = lambda *s, std=0.2: torch.randn(*s, generator=gen) * std
    hd = C // H
    p = {"model.embed_tokens.weight": rnd(V, C, std=0.5)}
    for i in range(L):
        q = f"model.layers.{i}."
        p[q + "input_layernorm.weight"] = 1 + rnd(C, std=0.1)
        for n, rows in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
            p[q + "self_attn." + n + ".weight"] = rnd(rows, C)
            if kind == "bias":
                p[q + "self_attn." + n + ".bias"] = rnd(rows, std=0.1)
        p[q + "self_attn.o_proj.weight"] = rnd(C, H * hd)
        if kind == "bias":
            p[q + "self_attn.o_proj.bias"] = rnd(C, std=0.1)
        p[q + "post_attention_layernorm.weight"] = 1 + rnd(C, std=0.1)
        for n, shape in (("gate_proj", (Fi, C)), ("up_proj", (Fi, C)), ("down_proj", (C, Fi))):
            p[q + "mlp." + n + ".weight"] = rnd(*shape)
            if kind == "bias":
                p[q + "mlp." + n + ".bias"] = rnd(shape[0], std=0.1)
    p["model.norm.weight"] = 1 + rnd(C, std=0.1)
    p["lm_head.weight"] = rnd(V, C, std=0.3)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    write_sharded(d, p, dtype, shards)
    tokens = torch.randint(0, V, (4096,), generator=gen).tolist()
    with open(os.path.join(d, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(tokens)] + [0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    # the loss from the file's values (bf16 / f16 as stored, computed in fp32)
    B, T = 4, 32
    w = read_weights(d)
    json.dump({"B": B, "T": T, "loss": loss_of(cfg, w, d, B, T), "dtype": dtype, "shards": shards},
              open(os.path.join(d, "expected.json"), "w"), indent=1)


def main():
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "loss":
        d, B, T = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        data = sys.argv[5] if len(sys.argv) > 5 else d
        cfg = json.load(open(os.path.join(d, "config.json")))
        print(json.dumps({"loss": loss_of(cfg, read_weights(d), data, B, T)}))
    elif cmd == "same":
        a, b = read_weights(sys.argv[2]), read_weights(sys.argv[3])
        assert set(a) == set(b), "different tensors: %s" % sorted(set(a) ^ set(b))
        bad = [n for n in a if not torch.equal(a[n].to(b[n].dtype), b[n])]
        if bad:
            print("differ after rounding: %s" % bad[:5])
            sys.exit(1)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
