#!/usr/bin/python3
"""PyTorch oracle for packed documents (--doc-mask, tests/test_cp.sh).

  doc_mask_oracle.py INIT_DIR TOKENS B T SEP LR LOG SAVE_DIR

INIT_DIR is a Hugging Face Llama directory (the run's --init), TOKENS an llm.c shard whose first
B x T + 1 tokens are the run's first batch (--no-shuffle). A document starts at every token SEP.
The model (hf_llama_oracle.py's math) runs with an explicit block-diagonal causal mask (query t
sees keys s <= t of its own document) and positions restarting at 0 at each document; one
torch.optim.AdamW step (lr LR, betas 0.9/0.95, eps 1, no weight decay: with eps 1 the update
lr g / (|g| + 1) carries the gradient's size, not only its sign) must give the run's step-1 loss
(LOG, within 1e-5 relative) and its saved weights (SAVE_DIR/model.safetensors: each tensor's update
within 1e-3 of the largest update of that tensor). The masked loss must also differ from the plain
causal one by 10x the loss tolerance, so that a run ignoring the masks fails. Exit 1 on failure."""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_llama_oracle as hf  # noqa: E402


def forward(cfg, p, x, sep, doc_mask):
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = C // H, cfg["rms_norm_eps"]
    Bn, Tn = x.shape
    t = torch.arange(Tn)
    if doc_mask:  # each position's document start: the latest SEP at or before it (0 if none)
        starts = torch.where(x == sep, t.expand(Bn, Tn), torch.zeros_like(x))
        lo = torch.cummax(starts, dim=1).values
    else:
        lo = torch.zeros(Bn, Tn, dtype=torch.long)
    pos = t.expand(Bn, Tn) - lo
    freqs = pos.float()[..., None] * hf.inv_freq(cfg)[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # [B, 1, T, hd]: per sequence positions
    mask = (t[None, :] <= t[:, None])[None] & (t[None, None, :] >= lo[:, :, None])  # [B, Tq, Tk]
    rms = lambda h, w: w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))
    h = p["model.embed_tokens.weight"][x]
    for i in range(cfg["num_hidden_layers"]):
        q = f"model.layers.{i}."
        a = rms(h, p[q + "input_layernorm.weight"])
        qq = hf.linear(p, q + "self_attn.q_proj", a).view(Bn, Tn, H, hd).transpose(1, 2)
        kk = hf.linear(p, q + "self_attn.k_proj", a).view(Bn, Tn, KV, hd).transpose(1, 2)
        vv = hf.linear(p, q + "self_attn.v_proj", a).view(Bn, Tn, KV, hd).transpose(1, 2)
        qq, kk = hf.rope(qq, cos, sin), hf.rope(kk, cos, sin)
        kk, vv = kk.repeat_interleave(H // KV, dim=1), vv.repeat_interleave(H // KV, dim=1)
        att = (qq @ kk.transpose(-1, -2)) / math.sqrt(hd)
        att = F.softmax(att.masked_fill(~mask[:, None], float("-inf")), dim=-1)
        y = (att @ vv).transpose(1, 2).reshape(Bn, Tn, C)
        h = h + hf.linear(p, q + "self_attn.o_proj", y)
        a = rms(h, p[q + "post_attention_layernorm.weight"])
        g, u = hf.linear(p, q + "mlp.gate_proj", a), hf.linear(p, q + "mlp.up_proj", a)
        h = h + hf.linear(p, q + "mlp.down_proj", F.silu(g) * u)
    h = rms(h, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else p["lm_head.weight"]
    return h @ head.t()


def main():
    init, tokens, B, T, sep, lr, log, save = sys.argv[1:9]
    B, T, sep, lr = int(B), int(T), int(sep), float(lr)
    cfg = json.load(open(os.path.join(init, "config.json")))
    w0 = {k: v.double() for k, v in hf.read_weights(init).items()}
    x, y = hf.batch0_from(tokens, B, T)
    params = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    logits = forward(cfg, params, x, sep, True)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    with torch.no_grad():
        plain = float(F.cross_entropy(forward(cfg, w0, x, sep, False).reshape(-1, logits.shape[-1]), y.reshape(-1)))
    opt = torch.optim.AdamW(list(params.values()), lr=lr, betas=(0.9, 0.95), eps=1.0, weight_decay=0.0)
    opt.step()
    ran = json.loads(open(log).readline())["loss"]
    rel = abs(ran - float(loss)) / float(loss)
    ok = rel < 1e-5
    differs = abs(plain - float(loss)) / float(loss)
    ok = ok and differs > 10 * 1e-5  # a run ignoring the masks would miss the 1e-5 above
    got = hf.read_weights(save)
    worst, where = 0.0, ""
    for k, v in params.items():
        want = (v.detach() - w0[k])
        have = got[k].double() - w0[k]
        scale = float(want.abs().max())
        if scale == 0:
            continue
        e = float((have - want).abs().max()) / scale
        if e > worst:
            worst, where = e, k
    ok = ok and worst < 1e-3
    print(f"step-1 loss {ran:.7f} vs torch {float(loss):.7f} (rel {rel:.2e}; plain causal {plain:.5f}, "
          f"{differs:.1e} apart); updates worst rel {worst:.2e} ({where})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
