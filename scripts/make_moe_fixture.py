#!/usr/bin/python3
"""Make the PyTorch reference fixtures for tiny mixture-of-experts models (Mixtral layout).

Run with Debian's PyTorch:  /usr/bin/python3 scripts/make_moe_fixture.py [OUTDIR]
(default OUTDIR: tests/fixtures). For each case it writes OUTDIR/moe-<case>/:
  config.json, model.safetensors   the model in Hugging Face Mixtral layout (model_type mixtral,
                                   block_sparse_moe.gate / experts.N.w1,w2,w3) plus myriad's keys
                                   for capacity, shared experts and MoE-every-n-layers
  expected.safetensors             x, y (as F32), logits, loss (cross-entropy + coef x aux), aux,
                                   dropped (assignments over capacity), probs.<layer> (router
                                   softmax [B*T, E]) and grad.<hf name> for every tensor
The MoE block is computed densely here (every expert on every token, masked by the routing),
independently of myriad's gather/scatter implementation. The routing rules are docs/MOE.md's:
softmax top-k (ties to the lower expert index: a stable sort), gates renormalised over the k,
capacity ceil(cf * T * k / E) per sequence and expert with choices taken slot-major (all first
choices in position order, then all second choices), the load-balancing loss
E * sum_e f_e * P_e per sequence (f_e: share of the sequence's k * T choices that picked e,
before dropping; P_e: mean router probability) averaged over sequences and summed over layers.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_fixture import Llama, write_safetensors  # noqa: E402

B, T = 2, 8


class Mixtral(Llama):
    def __init__(self, cfg, gen):
        super().__init__(cfg, gen)
        E, C, Fe = cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"]
        Fd = cfg.get("myriad_dense_intermediate_size", Fe)
        S = cfg.get("myriad_shared_experts", 0)
        rnd = lambda *shape, std=0.2: (torch.randn(*shape, generator=gen) * std)
        p = {k: v.detach() for k, v in self.p.items()}
        for i in range(cfg["num_hidden_layers"]):
            q = f"model.layers.{i}."
            for n in ("gate_proj", "up_proj", "down_proj"):
                del p[q + f"mlp.{n}.weight"]
            if not self.is_moe(i):
                p[q + "mlp.gate_proj.weight"] = rnd(Fd, C)
                p[q + "mlp.up_proj.weight"] = rnd(Fd, C)
                p[q + "mlp.down_proj.weight"] = rnd(C, Fd)
                continue
            m = q + "block_sparse_moe."
            p[m + "gate.weight"] = rnd(E, C, std=0.5)
            for e in range(E):
                p[m + f"experts.{e}.w1.weight"] = rnd(Fe, C)
                p[m + f"experts.{e}.w3.weight"] = rnd(Fe, C)
                p[m + f"experts.{e}.w2.weight"] = rnd(C, Fe)
            if S:
                p[m + "shared_experts.gate_proj.weight"] = rnd(S * Fe, C)
                p[m + "shared_experts.up_proj.weight"] = rnd(S * Fe, C)
                p[m + "shared_experts.down_proj.weight"] = rnd(C, S * Fe)
        self.p = {k: v.clone().requires_grad_(True) for k, v in p.items()}

    def is_moe(self, i):
        return (i + 1) % self.cfg.get("myriad_moe_every", 1) == 0

    def mlp(self, a, i):
        cfg, p = self.cfg, self.p
        q = f"model.layers.{i}."
        if not self.is_moe(i):
            return super().mlp(a, i)
        m = q + "block_sparse_moe."
        E, k, cf = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg.get("myriad_capacity_factor", 0)
        Bn, Tn, _ = a.shape
        probs = F.softmax(a @ p[m + "gate.weight"].t(), dim=-1)  # [B, T, E]
        self.probs[i] = probs
        order = torch.sort(probs.detach(), dim=-1, descending=True, stable=True).indices[..., :k]  # ties: lower index
        top_p = torch.gather(probs, -1, order)
        gates = top_p / top_p.sum(-1, keepdim=True)
        keep = torch.ones(Bn, Tn, k)
        if cf > 0:
            cap = math.ceil(cf * Tn * k / E)
            for b in range(Bn):
                used = [0] * E
                for j in range(k):
                    for t in range(Tn):
                        e = int(order[b, t, j])
                        if used[e] < cap:
                            used[e] += 1
                        else:
                            keep[b, t, j] = 0
                            self.dropped += 1
        out = torch.zeros_like(a)
        for e in range(E):
            w = (gates * keep * (order == e)).sum(-1, keepdim=True)  # [B, T, 1]
            y = (F.silu(a @ p[m + f"experts.{e}.w1.weight"].t()) * (a @ p[m + f"experts.{e}.w3.weight"].t())) \
                @ p[m + f"experts.{e}.w2.weight"].t()
            out = out + w * y
        if cfg.get("myriad_shared_experts", 0):
            s = m + "shared_experts."
            out = out + (F.silu(a @ p[s + "gate_proj.weight"].t()) * (a @ p[s + "up_proj.weight"].t())) \
                @ p[s + "down_proj.weight"].t()
        f = torch.stack([(order == e).float().sum(dim=(1, 2)) for e in range(E)], -1) / (Tn * k)  # [B, E]
        P = probs.mean(1)  # [B, E]
        self.aux = self.aux + (E * (f * P).sum(-1)).mean()
        return out

    def forward(self, x):
        self.aux, self.dropped, self.probs = torch.zeros(()), 0, {}
        return super().forward(x)


def make(outdir, name, cfg, gen):
    import json
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    model = Mixtral(cfg, gen)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), model.state())
    V = cfg["vocab_size"]
    x = torch.randint(0, V, (B, T), generator=gen)
    y = torch.randint(0, V, (B, T), generator=gen)
    logits = model.forward(x)
    loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1)) + cfg["router_aux_loss_coef"] * model.aux
    loss.backward()
    expected = {"x": x.float(), "y": y.float(), "logits": logits.reshape(B * T, V), "loss": loss.reshape(1),
                "aux": model.aux.reshape(1), "dropped": torch.tensor([float(model.dropped)])}
    for i, pr in model.probs.items():
        expected[f"probs.{i}"] = pr.reshape(B * T, -1)
    for k, v in model.p.items():
        expected["grad." + k] = v.grad
    write_safetensors(os.path.join(d, "expected.safetensors"), expected)
    print(f"{name}: loss {float(loss):.6f}, aux {float(model.aux):.6f}, dropped {model.dropped}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    gen = torch.Generator().manual_seed(4321)
    base = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_hidden_layers": 2,
            "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24,
            "vocab_size": 67, "max_position_embeddings": 16, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "hidden_act": "silu", "num_local_experts": 4, "router_aux_loss_coef": 0.05}
    make(outdir, "moe-top1-capacity", dict(base, num_experts_per_tok=1, myriad_capacity_factor=1.0), gen)
    make(outdir, "moe-top2-dropless", dict(base, num_experts_per_tok=2), gen)
    make(outdir, "moe-top2-capacity-shared",
         dict(base, num_experts_per_tok=2, myriad_capacity_factor=1.0, myriad_shared_experts=1, myriad_moe_every=2,
              myriad_dense_intermediate_size=40), gen)
    make(outdir, "moe-top1-dropless", dict(base, num_experts_per_tok=1), gen)


if __name__ == "__main__":
    main()
