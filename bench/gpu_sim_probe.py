#!/usr/bin/env python3
"""gpu_sim_probe.py: measurements for the three rows `myriad sim` still mispredicts (docs/SIMULATOR.md,
"Outside 15%"). The simulator may not fit factors to those rows; it needs measured mechanisms, and
this script measures them on one GPU in one call (scripts/gpu_check.sh, phase "sim probe"):

  gemm   bf16 torch.matmul and fp8 torch._scaled_mm (e4m3, per-tensor scales, bf16 output) at the
         linear shapes of Llama 3 8B and of Llama 3 70B at tp 4, forward and both backward shapes,
         plus 8192^3: the rate behind gemm_eff_fp8 (the NeMo 25.11 70B fp8 row, ~13% faster than
         the modelled 1979 x 0.68 x 0.70) and the bf16 rate beside it.
  sdpa   FlashAttention-2 (SDPA's flash backend) at the ring's shapes, forward and forward+backward:
         attn_eff_fa2 by shape (the model assumes 0.30 of peak everywhere).
  ring   a compute-only emulation of PyTorch's experimental ring attention (round-robin load
         balancing, fp32 log-sum-exp merges, K/V and dK/dV concatenated per step) for CP 1/2/4/8 on
         one rank's 32768 tokens, with communication replaced by local tensors; timed against its
         bare SDPA calls and against one causal SDPA of the same FLOPs: the ring's per-step
         compute overhead that torchtitan's CP 4-8 rows (-25% to -28%) point at.
  cp     optionally PyTorch's own context-parallel SDPA on a fake process group (no-op
         collectives), when this torch version offers one.

Writes OUT/sim_probe.jsonl (one JSON object per measurement: kind, shape, dtype, seconds, flops,
tflops; or kind, shape, skipped/unavailable: reason) and OUT/sim_probe.md (tables).
Without CUDA, or with --small, the same code runs on tiny CPU shapes (a rehearsal; figures mean
nothing); with torch < 2.0 (Debian's 1.13 here) a plain math attention with log-sum-exp replaces
SDPA and fp8 is skipped. `--check` runs only the ring's correctness check (CPU, fp32): the emulated
ring over a round-robin split of one sequence must reproduce one causal attention's output and
dQ/dK/dV (tests/test_sim_probe.sh).

Usage: python3 bench/gpu_sim_probe.py --out DIR [--small] [--budget SECONDS]
       python3 bench/gpu_sim_probe.py --check
The ring follows the description in docs/SIMULATOR.md ("Context parallel in PyTorch"); no PyTorch
source is copied.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

PEAK_TFLOPS = {"bf16": 989.4, "fp8": 1978.9}  # H100/H200 SXM dense datasheet figures


# ---------------------------------------------------------------- the run's context
class Probe:
    """Where results go, the device, the time budget; every measurement goes through record()."""

    def __init__(self, out_dir, small, budget_s):
        self.dev = torch.device("cuda" if torch.cuda.is_available() and not small else "cpu")
        self.small = small or self.dev.type == "cpu"
        self.dtype = torch.bfloat16 if self.dev.type == "cuda" else torch.float32
        self.start = time.time()
        self.budget = budget_s
        self.rows = []
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        # the jsonl grows line by line so a run stopped at the phase deadline keeps what it measured
        self.jsonl = open(os.path.join(out_dir, "sim_probe.jsonl"), "w")

    def left(self):
        return self.budget - (time.time() - self.start)

    def record(self, row):
        self.rows.append(row)
        self.jsonl.write(json.dumps(row) + "\n")
        self.jsonl.flush()
        print(json.dumps(row), flush=True)

    def skip(self, kind, shape, why, word="skipped"):
        self.record({"kind": kind, "shape": shape, word: why})

    def measured(self, kind, shape, dtype, seconds, flops, **extra):
        tf = flops / seconds / 1e12 if seconds > 0 else 0.0
        row = {"kind": kind, "shape": shape, "dtype": dtype, "seconds": seconds, "flops": flops, "tflops": round(tf, 3)}
        if dtype in PEAK_TFLOPS and self.dev.type == "cuda":
            row["peak_frac"] = round(tf / PEAK_TFLOPS[dtype], 4)
        row.update(extra)
        self.record(row)
        return row


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def time_fn(dev, fn, warmup, repeats):
    """Median seconds of fn() over repeats after warmup calls: CUDA events on a GPU (the host may
    run ahead of the queue), perf_counter on the CPU."""
    for _ in range(warmup):
        fn()
    sync(dev)
    times = []
    for _ in range(repeats):
        if dev.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def free_bytes(dev):
    if dev.type != "cuda":
        return 1 << 62
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info()[0]


def fits(p, kind, shape, need_bytes):
    """Memory guard: refuse a measurement that would need more than 80% of the free memory."""
    free = free_bytes(p.dev)
    if need_bytes > 0.8 * free:
        p.skip(kind, shape, "needs %.1f GiB, %.1f GiB free" % (need_bytes / 2**30, free / 2**30))
        return False
    return True


# ---------------------------------------------------------------- a: GEMM rates
def linear_shapes(small):
    """(name, M, N, K) of the forward products; backward: dgrad (M, K, N), wgrad (K, N, M)."""
    T = 8192
    rows = [
        # Llama 3 8B: hidden 4096, ffn 14336, q 4096, kv 2 x 1024
        ("8B qkv", T, 4096 + 2 * 1024, 4096),
        ("8B out-proj", T, 4096, 4096),
        ("8B fc1 (gate+up)", T, 2 * 14336, 4096),
        ("8B fc2", T, 4096, 14336),
        # Llama 3 70B at tp 4: column-parallel QKV (16 q heads, 2 kv heads of 128) and fc1, row-parallel
        # out-proj and fc2; M is the whole 8192 tokens (sequence parallelism gathers them first)
        ("70B/tp4 qkv", T, 16 * 128 + 2 * 2 * 128, 8192),
        ("70B/tp4 out-proj", T, 8192, 16 * 128),
        ("70B/tp4 fc1 (gate+up)", T, 2 * 28672 // 4, 8192),
        ("70B/tp4 fc2", T, 8192, 28672 // 4),
        ("cube 8192", 8192, 8192, 8192),
    ]
    if small:
        rows = [(n, m // 64, nn // 64, k // 64) for n, m, nn, k in rows]
    return rows


def gemm_products(small):
    for name, m, n, k in linear_shapes(small):
        yield name, "fwd", (m, n, k)
        yield name, "dgrad", (m, k, n)
        yield name, "wgrad", (k, n, m)


def time_bf16_gemm(p, m, n, k, repeats):
    a = torch.randn(m, k, device=p.dev, dtype=p.dtype)
    b = torch.randn(k, n, device=p.dev, dtype=p.dtype)
    return time_fn(p.dev, lambda: torch.matmul(a, b), 2, repeats)


def fp8_unavailable(p):
    if p.dev.type != "cuda":
        return "no CUDA device (fp8 GEMMs need one)"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return "torch %s has no float8_e4m3fn / _scaled_mm" % torch.__version__
    if torch.cuda.get_device_capability() < (8, 9):
        return "compute capability %s < 8.9" % (torch.cuda.get_device_capability(),)
    return None


def time_fp8_gemm(p, m, n, k, repeats, fast_accum=False):
    # _scaled_mm wants A row-major (M, K) and B column-major (K, N): B is the transpose of an (N, K)
    # row-major tensor; per-tensor fp32 scales as the tensorwise recipes use them. fast_accum: the
    # tensor cores' fp8 accumulation without periodic fp32 promotion, which the fp8 recipes use for
    # the forward GEMM (TE, torchao) and not for the gradients: both are measured
    a = torch.randn(m, k, device=p.dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=p.dev).to(torch.float8_e4m3fn).t()
    sa = torch.tensor(1.0, device=p.dev)
    sb = torch.tensor(1.0, device=p.dev)
    return time_fn(p.dev, lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                                      use_fast_accum=fast_accum), 2, repeats)


def probe_gemms(p):
    why8 = fp8_unavailable(p)
    if why8:
        p.skip("gemm_fp8", "all", why8)
    bf16_name = "bf16" if p.dtype == torch.bfloat16 else "fp32"
    for name, role, (m, n, k) in gemm_products(p.small):
        shape = "%s %s %dx%dx%d" % (name, role, m, n, k)
        flops = 2.0 * m * n * k
        for dt in ("bf16", "fp8", "fp8_fastacc"):
            if dt != "bf16" and why8:
                continue
            if p.left() < 20:
                p.skip("gemm_" + dt, shape, "time budget")
                continue
            try:
                if dt == "bf16":
                    s = time_bf16_gemm(p, m, n, k, 10)
                else:
                    s = time_fp8_gemm(p, m, n, k, 10, dt == "fp8_fastacc")
                p.measured("gemm_" + dt, shape, bf16_name if dt == "bf16" else "fp8", s, flops, m=m, n=n, k=k)
            except Exception as e:  # a kernel this build lacks must not cost the other figures
                p.skip("gemm_" + dt, shape, "%s: %s" % (type(e).__name__, str(e)[:200]), "unavailable")


# ---------------------------------------------------------------- attention primitives
# Tensors are (batch, heads, tokens, head dim); lse is (batch, heads, tokens) in fp32, as the flash
# kernel returns it. Two implementations with one interface: the flash aten ops (what the ring
# calls, since it needs the lse) and a plain math version for the CPU and old torch.
def has_flash_op():
    return hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention")


def math_attn_fwd(q, k, v, causal):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = torch.matmul(torch.exp(s - lse.unsqueeze(-1)), v.float())
    return out.to(q.dtype), lse


def math_attn_bwd(dout, q, k, v, out, lse, causal):
    """Gradients of one block given the GLOBAL out and lse (the ring's backward): with P = exp(S - lse),
    dV = P^T dO, dS = P (dO V^T - rowsum(dO * O)), dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    qf, kf, vf, dof = q.float(), k.float(), v.float(), dout.float()
    s = torch.matmul(qf, kf.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    pr = torch.exp(s - lse.unsqueeze(-1))
    dv = torch.matmul(pr.transpose(-2, -1), dof)
    dp = torch.matmul(dof, vf.transpose(-2, -1))
    delta = (dof * out.float()).sum(-1, keepdim=True)
    ds = pr * (dp - delta) * scale
    return torch.matmul(ds, kf).to(q.dtype), torch.matmul(ds.transpose(-2, -1), qf).to(q.dtype), dv.to(q.dtype)


def causal_mask(lq, lk, dev):
    return torch.ones(lq, lk, dtype=torch.bool, device=dev).triu(1)


class FlashAttn:
    """SDPA's flash kernels called through their aten ops: forward returns (out, lse) and the
    backward takes the global out and lse, as a ring implementation needs. The backward also wants
    the forward's bookkeeping outputs (sequence offsets, maximum lengths, dropout RNG state); they
    depend only on the shapes, so they are kept per (Lq, Lk, causal)."""

    def __init__(self):
        self.meta = {}

    def fwd(self, q, k, v, causal):
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
        self.meta[(q.shape[2], k.shape[2], causal)] = tuple(r[2:8])
        return r[0], r[1]

    def bwd(self, dout, q, k, v, out, lse, causal):
        key = (q.shape[2], k.shape[2], causal)
        if key not in self.meta:
            self.fwd(q, k, v, causal)
        cq, ck, mq, mk, seed, offset = self.meta[key]
        # the kernel reads lse as a dense (batch, heads, Lq) array: a half of the rows is a strided
        # view, so it is made dense (Lq fp32 per head: negligible next to the block)
        g = torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse.contiguous(), cq, ck, mq, mk, 0.0, causal, seed, offset)
        return g[0], g[1], g[2]


class MathAttn:
    def fwd(self, q, k, v, causal):
        return math_attn_fwd(q, k, v, causal)

    def bwd(self, dout, q, k, v, out, lse, causal):
        return math_attn_bwd(dout, q, k, v, out, lse, causal)


def attention_impl(p):
    return FlashAttn() if p.dev.type == "cuda" and has_flash_op() else MathAttn()


def attn_flops(lq, lk, heads, d, causal, batch=1):
    """Forward FLOPs (QK^T and PV); causal blocks count half. Backward is 2.5x this."""
    f = 4.0 * batch * heads * lq * lk * d
    return f * 0.5 if causal else f


# ---------------------------------------------------------------- the ring, emulated
# Round-robin load balancing over c ranks: the sequence is cut into 2c chunks and rank r holds chunks
# r and 2c-1-r (one early, one late), so every rank has the same causal work. At ring step i rank r
# holds the K/V of rank (r - i) mod c. Step 0 is causal over the local Q/K/V. For i <= r the source
# is an earlier rank: both local Q chunks see only its FIRST chunk, completely. For i > r the source
# is a later rank: only the second local Q chunk sees it, both of its chunks, completely.
def step_kind(i, rank):
    if i == 0:
        return "causal"
    return "fullQ_halfKV" if i <= rank else "halfQ_fullKV"


def step_operands(i, rank, q, k, v):
    """(q, k, v, half) of ring step i: half tells which part of the rank's rows the block covers."""
    kind = step_kind(i, rank)
    if kind == "causal":
        return q, k, v, "all"
    if kind == "fullQ_halfKV":
        return q, k.chunk(2, dim=2)[0], v.chunk(2, dim=2)[0], "all"
    return q.chunk(2, dim=2)[1], k, v, "second"


class Merger:
    """fp32 running output and lse, merged per block with the log-sum-exp rule
       out -= sigmoid(lse_blk - lse) (out - out_blk);  lse -= logsigmoid(lse - lse_blk);
    a block covering the second half of the rows updates that half and re-assembles with torch.cat
    (what the eager implementation does: a fresh tensor per partial step)."""

    def __init__(self, out_blk, lse_blk):
        self.out = out_blk.float()
        self.lse = lse_blk.unsqueeze(-1).float()

    @staticmethod
    def merge(out, lse, out_blk, lse_blk):
        out_blk, lse_blk = out_blk.float(), lse_blk.unsqueeze(-1).float()
        out = out - torch.sigmoid(lse_blk - lse) * (out - out_blk)
        lse = lse - F.logsigmoid(lse - lse_blk)
        return out, lse

    def add(self, out_blk, lse_blk, half):
        if half == "all":
            self.out, self.lse = self.merge(self.out, self.lse, out_blk, lse_blk)
            return
        o1, o2 = self.out.chunk(2, dim=2)
        l1, l2 = self.lse.chunk(2, dim=2)
        o2, l2 = self.merge(o2, l2, out_blk, lse_blk)
        self.out = torch.cat([o1, o2], dim=2)
        self.lse = torch.cat([l1, l2], dim=2)

    def result(self, dtype):
        return self.out.to(dtype), self.lse.squeeze(-1)


def split_kv(buf, like):
    n = like.numel()
    return buf[:n].view(like.shape), buf[n:].view(like.shape)


def ring_forward(attn, q, k, v, rank, c, recv_kv, marks=None):
    """One rank's ring forward. recv_kv(i) is the flat K/V buffer received at step i > 0 (here a
    local tensor: communication is emulated away); each step that sends concatenates the K/V it
    holds into one flat buffer, as the implementation does before its send. marks(i) is called
    after each step (per-step timing)."""
    kc, vc = k, v
    merger = None
    for i in range(c):
        if i > 0:
            kc, vc = split_kv(recv_kv(i), k)
        if i < c - 1:
            torch.cat([kc.flatten(), vc.flatten()])  # the send buffer; its transfer is emulated away
        qs, ks, vs, half = step_operands(i, rank, q, kc, vc)
        ob, lb = attn.fwd(qs, ks, vs, i == 0)
        if merger is None:
            merger = Merger(ob, lb)
        else:
            merger.add(ob, lb, half)
        if marks:
            marks(i)
    return merger.result(q.dtype)


def ring_backward(attn, q, k, v, out, lse, dout, rank, c, recv_kv, marks=None):
    """One rank's ring backward as a generator: at each step it yields the flat fp32 dK/dV buffer it
    sends to the next rank and is sent the buffer the previous rank sent. The buffer travels with
    the K/V it belongs to: at step i > 0 this rank adds, to the incoming buffer, its block's dK/dV
    of rank (r - i)'s K/V (into the first half only when the block used only that half). After the
    last step one more hop brings each buffer home: send the final incoming buffer and the generator
    returns (dq, dk, dv). Every block uses the merged (global) out and lse of the forward."""
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kc, vc = k, v
    incoming = None
    for i in range(c):
        if i > 0:
            kc, vc = split_kv(recv_kv(i), k)
        qs, ks, vs, half = step_operands(i, rank, q, kc, vc)
        if half == "all":
            os_, ls, dos = out, lse, dout
        else:
            os_, ls, dos = out.chunk(2, dim=2)[1], lse.chunk(2, dim=2)[1], dout.chunk(2, dim=2)[1]
        gq, gk, gv = attn.bwd(dos, qs, ks, vs, os_, ls, i == 0)
        if half == "all":
            dq += gq
        else:
            dq[:, :, q.shape[2] // 2:] += gq
        if i == 0:  # this rank's own K/V: fresh fp32 accumulators
            dk = torch.zeros(k.shape, dtype=torch.float32, device=q.device)
            dv = torch.zeros(v.shape, dtype=torch.float32, device=q.device)
        else:
            dk, dv = split_kv(incoming, k)
        n = ks.shape[2]
        dk[:, :, :n] += gk
        dv[:, :, :n] += gv
        if marks:
            marks(i)
        incoming = yield torch.cat([dk.flatten(), dv.flatten()])
    dk_home, dv_home = split_kv(incoming, k)
    return dq.to(q.dtype), dk_home.to(k.dtype), dv_home.to(v.dtype)


def run_ring(attn, q, k, v, dout, rank, c, recv_kv, recv_dkv):
    """Forward then backward of one rank, the dK/dV buffer of step i taken from recv_dkv(i)."""
    out, lse = ring_forward(attn, q, k, v, rank, c, recv_kv)
    return out, lse, drive_backward(ring_backward(attn, q, k, v, out, lse, dout, rank, c, recv_kv), c, recv_dkv)


def drive_backward(gen, c, recv_dkv):
    next(gen)
    for i in range(1, c + 1):
        try:
            gen.send(recv_dkv(i))
        except StopIteration as e:
            return e.value
    raise RuntimeError("ring backward did not finish after the homeward hop")


# ---------------------------------------------------------------- the ring's correctness
def round_robin(x, rank, c):
    """Rank's local part of a full-sequence tensor: chunks rank and 2c-1-rank of 2c."""
    ch = x.chunk(2 * c, dim=2)
    return torch.cat([ch[rank], ch[2 * c - 1 - rank]], dim=2)


def reference_attention(q, k, v, dout):
    """One causal attention over the whole sequence in fp32, gradients by autograd (independent of
    the hand-written backward)."""
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    s = torch.matmul(qr, kr.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    o = torch.matmul(torch.softmax(s, dim=-1), vr)
    o.backward(dout.float())
    return o.detach(), qr.grad, kr.grad, vr.grad


def check_ring(attn, c, n, heads, d, dtype, dev, seed=0):
    """All c ranks in lockstep on a round-robin split of one sequence of 2 c n tokens: each rank's
    ring output and, after the dK/dV buffers travelled the ring and came home, its dQ/dK/dV must
    equal the matching rows of one full causal attention. Returns the largest abs difference and
    the largest abs reference value over all of them."""
    g = torch.Generator().manual_seed(seed)
    full = [torch.randn(1, heads, 2 * c * n, d, generator=g).to(dev, dtype) for _ in range(4)]
    ref = reference_attention(*full)
    loc = [[round_robin(x, r, c) for x in full] for r in range(c)]
    kv = [torch.cat([loc[r][1].flatten(), loc[r][2].flatten()]) for r in range(c)]
    outs, gens = [], []
    for r in range(c):
        recv = (lambda i, r=r: kv[(r - i) % c])
        q, k, v, do = loc[r]
        out, lse = ring_forward(attn, q, k, v, r, c, recv)
        outs.append(out)
        gens.append(ring_backward(attn, q, k, v, out, lse, do, r, c, recv))
    sent = [next(gn) for gn in gens]
    for _ in range(1, c):
        sent = [gens[r].send(sent[(r - 1) % c]) for r in range(c)]
    grads = []
    for r in range(c):
        try:
            gens[r].send(sent[(r - 1) % c])
        except StopIteration as e:
            grads.append(e.value)
    diff = scale = 0.0
    for r in range(c):
        mine = [outs[r]] + list(grads[r])
        for got, want in zip(mine, ref):
            w = round_robin(want, r, c)
            diff = max(diff, (got.float() - w).abs().max().item())
            scale = max(scale, w.abs().max().item())
    return diff, scale


def probe_check(p, attn):
    """The ring check on small shapes with this run's attention (flash in bf16 on a GPU, math in
    fp32 on the CPU): the emulation must be the computation it claims to time."""
    exact = p.dtype == torch.float32
    for c in (1, 2, 3, 4, 8):
        n, heads, d = (8, 2, 16) if exact else (64, 4, 64)
        diff, scale = check_ring(attn, c, n, heads, d, p.dtype, p.dev)
        tol = 1e-4 * max(scale, 1.0) if exact else 3e-2 * max(scale, 1.0)
        p.record({"kind": "ring_check", "shape": "cp%d chunk %d heads %d d %d" % (c, n, heads, d),
                  "dtype": str(p.dtype).replace("torch.", ""), "max_abs_diff": diff, "max_abs_ref": scale,
                  "tolerance": tol, "ok": diff <= tol})


# ---------------------------------------------------------------- b: SDPA (FlashAttention-2) by shape
def flash_only():
    """Context forcing SDPA's flash backend (the FA2 kernels torchtitan's CP runs used)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:
        return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)


class _null:
    """A context that does nothing (the CPU path has no backend to force)."""

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def sdpa_function(p):
    """(q, k, v, causal) -> out: SDPA on a GPU, the math attention elsewhere (torch 1.13 has no SDPA)."""
    if p.dev.type == "cuda" and hasattr(F, "scaled_dot_product_attention"):
        return lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return lambda q, k, v, causal: math_attn_fwd(q, k, v, causal)[0]


def sdpa_shapes(small):
    rows = [(32768, 32768, True), (32768, 16384, False), (16384, 32768, False), (8192, 8192, True)]
    return [(lq // 64, lk // 64, cz) for lq, lk, cz in rows] if small else rows


def head_shape(small):
    return (2, 16) if small else (32, 128)  # heads, head dim


def probe_sdpa(p):
    heads, d = head_shape(p.small)
    for lq, lk, causal in sdpa_shapes(p.small):
        shape = "%s %dx%d h%d d%d" % ("causal" if causal else "full", lq, lk, heads, d)
        if p.left() < 15:
            p.skip("sdpa", shape, "time budget")
            continue
        if fits(p, "sdpa", shape, 2 * (2 * lq + 2 * lk) * heads * d * 2 * 2):
            sdpa_one(p, shape, lq, lk, causal, heads, d)


def sdpa_one(p, shape, lq, lk, causal, heads, d):
    """Forward alone and forward+backward (autograd) of one shape; backward = the difference."""
    sdpa = sdpa_function(p)
    dt = "bf16" if p.dtype == torch.bfloat16 else "fp32"
    q = torch.randn(1, heads, lq, d, device=p.dev, dtype=p.dtype, requires_grad=True)
    k = torch.randn(1, heads, lk, d, device=p.dev, dtype=p.dtype, requires_grad=True)
    v = torch.randn(1, heads, lk, d, device=p.dev, dtype=p.dtype, requires_grad=True)
    do = torch.randn(1, heads, lq, d, device=p.dev, dtype=p.dtype)
    f = attn_flops(lq, lk, heads, d, causal)

    def fwd():
        with torch.no_grad():
            sdpa(q, k, v, causal)

    def fwdbwd():
        torch.autograd.grad(sdpa(q, k, v, causal), (q, k, v), do)

    try:
        with flash_only() if p.dev.type == "cuda" else _null():
            tf = time_fn(p.dev, fwd, 2, 5)
            tfb = time_fn(p.dev, fwdbwd, 2, 5)
    except Exception as e:
        p.skip("sdpa", shape, "%s: %s" % (type(e).__name__, str(e)[:200]), "unavailable")
        return
    p.measured("sdpa_fwd", shape, dt, tf, f, lq=lq, lk=lk, causal=causal)
    p.measured("sdpa_fwdbwd", shape, dt, tfb, 3.5 * f, lq=lq, lk=lk, causal=causal)
    if tfb > tf:
        p.measured("sdpa_bwd", shape, dt, tfb - tf, 2.5 * f, lq=lq, lk=lk, causal=causal,
                   note="derived: fwd+bwd minus fwd")
    else:  # timing noise on tiny shapes
        p.skip("sdpa_bwd", shape, "fwd+bwd (%.3g s) not slower than fwd (%.3g s)" % (tfb, tf), "unavailable")


# ---------------------------------------------------------------- c: the ring's compute overhead
def time_marked(dev, run, nsteps, warmup, repeats):
    """run(marks) calls marks(i) after step i; returns the median total seconds (start to return)
    and the median seconds of each step."""
    for _ in range(warmup):
        run(None)
    sync(dev)
    totals, steps = [], [[] for _ in range(nsteps)]
    for _ in range(repeats):
        if dev.type == "cuda":
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(nsteps + 2)]
            ev[0].record()
            run(lambda i: ev[i + 1].record())
            ev[-1].record()
            ev[-1].synchronize()
            t = [0.0] + [ev[0].elapsed_time(e) / 1e3 for e in ev[1:]]
        else:
            t0 = time.perf_counter()
            t = [0.0] * (nsteps + 2)

            def mark(i, t=t, t0=t0):
                t[i + 1] = time.perf_counter() - t0
            run(mark)
            t[-1] = time.perf_counter() - t0
        totals.append(t[-1])
        for i in range(nsteps):
            steps[i].append(t[i + 1] - t[i])
    return statistics.median(totals), [statistics.median(s) for s in steps]


def bare_calls(attn, q, k, v, out, lse, dout, rank, c, recv_kv, backward):
    """The ring's SDPA calls alone: same operands and shapes, no merges, cats or accumulations."""
    def run(marks):
        for i in range(c):
            kc, vc = (k, v) if i == 0 else split_kv(recv_kv(i), k)
            qs, ks, vs, half = step_operands(i, rank, q, kc, vc)
            if not backward:
                attn.fwd(qs, ks, vs, i == 0)
            elif half == "all":
                attn.bwd(dout, qs, ks, vs, out, lse, i == 0)
            else:
                h = lambda t: t.chunk(2, dim=2)[1]
                attn.bwd(h(dout), qs, ks, vs, h(out), h(lse), i == 0)
            if marks:
                marks(i)
    return run


def ring_flops(local, heads, d, rank, c):
    """Forward FLOPs of one rank's ring: step 0 causal over the local tokens, then c - 1 blocks of
    local x local/2 (half of Q or half of K/V, never masked)."""
    f = attn_flops(local, local, heads, d, True)
    for i in range(1, c):
        lq = local // 2 if step_kind(i, rank) == "halfQ_fullKV" else local
        f += attn_flops(lq, local + local // 2 - lq, heads, d, False)
    return f


def local_tokens(small):
    return 256 if small else 32768


def probe_ring(p, attn, repeats=3):
    heads, d = head_shape(p.small)
    L = local_tokens(p.small)
    dt = "bf16" if p.dtype == torch.bfloat16 else "fp32"
    for c in (8, 4, 2, 1):  # the most informative first, in case the budget runs out
        ranks = sorted({0, c - 1}, reverse=True)
        for rank in ranks:
            shape = "cp%d rank%d local %d h%d d%d" % (c, rank, L, heads, d)
            if p.left() < 15 + 1.2 * c:
                p.skip("ring", shape, "time budget")
                continue
            if not fits(p, "ring", shape, 24 * L * heads * d * 2):
                continue
            try:
                ring_one(p, attn, c, rank, L, heads, d, dt, repeats)
            except Exception as e:
                p.skip("ring", shape, "%s: %s" % (type(e).__name__, str(e)[:200]), "unavailable")
        ref_causal(p, attn, c, L, heads, d, dt, repeats)


def ring_one(p, attn, c, rank, L, heads, d, dt, repeats):
    shape = "cp%d rank%d local %d h%d d%d" % (c, rank, L, heads, d)
    mk = lambda: torch.randn(1, heads, L, d, device=p.dev, dtype=p.dtype)
    q, k, v, dout = mk(), mk(), mk(), mk()
    kv_in = torch.randn(2 * q.numel(), device=p.dev, dtype=p.dtype)  # "from the other ranks"
    dkv_in = torch.zeros(2 * q.numel(), device=p.dev, dtype=torch.float32)
    recv_kv, recv_dkv = (lambda i: kv_in), (lambda i: dkv_in)
    out, lse = ring_forward(attn, q, k, v, rank, c, recv_kv)
    ff = ring_flops(L, heads, d, rank, c)
    kinds = [step_kind(i, rank) for i in range(c)]
    runs = {
        "fwd": (lambda m: ring_forward(attn, q, k, v, rank, c, recv_kv, m), 1.0),
        "bwd": (lambda m: drive_backward(ring_backward(attn, q, k, v, out, lse, dout, rank, c, recv_kv, m), c, recv_dkv), 2.5),
    }
    for name, (loop, mult) in runs.items():
        bare = bare_calls(attn, q, k, v, out, lse, dout, rank, c, recv_kv, name == "bwd")
        t_loop, s_loop = time_marked(p.dev, loop, c, 1, repeats)
        t_bare, s_bare = time_marked(p.dev, bare, c, 1, repeats)
        p.measured("ring_" + name, shape, dt, t_loop, mult * ff, cp=c, rank=rank, bare_seconds=t_bare,
                   loop_over_bare=round(t_loop / t_bare, 4), overhead_per_step_s=(t_loop - t_bare) / c,
                   steps=[{"step": i, "kind": kinds[i], "loop_s": s_loop[i], "bare_s": s_bare[i]} for i in range(c)])


def ref_causal(p, attn, c, L, heads, d, dt, repeats):
    """One causal attention with the FLOPs of one rank's ring (c blocks of L x L/2): length
    L sqrt(c), rounded to 128 tokens; what the ring would cost without its splitting."""
    n = int(round(L * math.sqrt(c) / 128.0)) * 128 if not p.small else int(round(L * math.sqrt(c) / 8.0)) * 8
    shape = "causal %dx%d h%d d%d (same FLOPs as cp%d)" % (n, n, heads, d, c)
    if p.left() < 10 or not fits(p, "ring_ref", shape, 10 * n * heads * d * 2):
        if p.left() < 10:
            p.skip("ring_ref", shape, "time budget")
        return
    mk = lambda: torch.randn(1, heads, n, d, device=p.dev, dtype=p.dtype)
    q, k, v, dout = mk(), mk(), mk(), mk()
    f = attn_flops(n, n, heads, d, True)
    try:
        out, lse = attn.fwd(q, k, v, True)
        tf = time_fn(p.dev, lambda: attn.fwd(q, k, v, True), 1, repeats)
        tb = time_fn(p.dev, lambda: attn.bwd(dout, q, k, v, out, lse, True), 1, repeats)
    except Exception as e:
        p.skip("ring_ref", shape, "%s: %s" % (type(e).__name__, str(e)[:200]), "unavailable")
        return
    p.measured("ring_ref_fwd", shape, dt, tf, f, cp=c, tokens=n)
    p.measured("ring_ref_bwd", shape, dt, tb, 2.5 * f, cp=c, tokens=n)


# ---------------------------------------------------------------- d: PyTorch's own CP on a fake group
def probe_torch_cp(p, repeats=2):
    """PyTorch's context-parallel SDPA with world size c on this one GPU: a fake process group
    makes the collectives no-ops (their buffers are allocated, never filled), so what is timed is
    the implementation's compute and its own bookkeeping. Optional: any failure is recorded."""
    if p.dev.type != "cuda":
        p.skip("torch_cp", "all", "no CUDA device")
        return
    try:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except Exception as e:
        p.skip("torch_cp", "all", "%s: %s" % (type(e).__name__, str(e)[:200]), "unavailable")
        return
    heads, d = head_shape(False)
    L = local_tokens(False)
    for c in (8, 2):
        shape = "cp%d rank%d local %d h%d d%d" % (c, c - 1, L, heads, d)
        if p.left() < 20 or not fits(p, "torch_cp", shape, 16 * c * L * heads * d * 2):
            if p.left() < 20:
                p.skip("torch_cp", shape, "time budget")
            continue
        try:
            os.environ.setdefault("LOCAL_RANK", "0")  # every emulated rank is this one GPU
            dist.init_process_group("fake", store=FakeStore(), rank=c - 1, world_size=c)
            mesh = init_device_mesh("cuda", (c,))
            t = torch_cp_time(p, context_parallel, mesh, c * L, heads, d, repeats)
            p.measured("torch_cp_fwdbwd", shape, "bf16", t, 3.5 * ring_flops(L, heads, d, c - 1, c), cp=c, rank=c - 1)
        except Exception as e:
            p.skip("torch_cp", shape, "%s: %s" % (type(e).__name__, str(e)[:300]), "unavailable")
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


def torch_cp_time(p, context_parallel, mesh, tokens, heads, d, repeats):
    mk = lambda: torch.randn(1, heads, tokens, d, device=p.dev, dtype=torch.bfloat16)
    q, k, v, do = mk(), mk(), mk(), mk()
    # context_parallel shards the buffers along the sequence in place (round-robin by default)
    with context_parallel(mesh, buffers=[q, k, v, do], buffer_seq_dims=[2, 2, 2, 2]), flash_only():
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

        def step():
            out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            torch.autograd.grad(out, (qg, kg, vg), do)
        return time_fn(p.dev, step, 1, repeats)


# ---------------------------------------------------------------- the report
def ms(s):
    return "%.2f" % (1e3 * s)


def measured_by_shape(rows, prefix):
    """The measured rows whose kind starts with prefix, as {shape: {kind: row}} in first-seen order."""
    by = {}
    for r in rows:
        if r["kind"].startswith(prefix) and "seconds" in r:
            by.setdefault(r["shape"], {})[r["kind"]] = r
    return by


def md_gemms(rows):
    by = measured_by_shape(rows, "gemm_")
    if not by:
        return []
    out = ["## GEMM rates", "",
           "fp8: e4m3 x e4m3, per-tensor scales, bf16 out; fast acc: use_fast_accum (the recipes' forward GEMM).", "",
           "| product | bf16 ms | bf16 TF/s | of 989.4 | fp8 ms | fp8 TF/s | of 1978.9 | fp8 fast acc TF/s | of 1978.9 | fp8 / bf16 speed |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for shape, d in by.items():
        b, f, fa = d.get("gemm_bf16"), d.get("gemm_fp8"), d.get("gemm_fp8_fastacc")
        cell = lambda r: [ms(r["seconds"]), "%.1f" % r["tflops"], "%.3f" % r.get("peak_frac", 0)] if r else ["", "", ""]
        rate = lambda r: ["%.1f" % r["tflops"], "%.3f" % r.get("peak_frac", 0)] if r else ["", ""]
        speed = "%.2fx" % (b["seconds"] / f["seconds"]) if b and f else ""
        out.append("| %s | %s | %s |" % (shape, " | ".join(cell(b) + cell(f) + rate(fa)), speed))
    return out + [""]


def md_sdpa(rows):
    by = measured_by_shape(rows, "sdpa_")
    if not by:
        return []
    out = ["## SDPA, flash backend (FLOPs: 4 Lq Lk d h forward, causal half, backward 2.5x)", "",
           "| shape | fwd ms | fwd TF/s | of peak | bwd ms (derived) | bwd TF/s | of peak | fwd+bwd TF/s | of peak |",
           "|---|---|---|---|---|---|---|---|---|"]
    for shape, d in by.items():
        cells = []
        for kind in ("sdpa_fwd", "sdpa_bwd", "sdpa_fwdbwd"):
            r = d.get(kind)
            if kind != "sdpa_fwdbwd":
                cells.append(ms(r["seconds"]) if r else "")
            cells += ["%.1f" % r["tflops"], "%.3f" % r.get("peak_frac", 0)] if r else ["", ""]
        out.append("| %s | %s |" % (shape, " | ".join(cells)))
    return out + [""]


def md_ring(rows):
    ring = [r for r in rows if r["kind"] in ("ring_fwd", "ring_bwd") and "seconds" in r]
    refs = {(r["cp"], r["kind"][-3:]): r for r in rows if r["kind"].startswith("ring_ref_") and "seconds" in r}
    if not ring:
        return []
    out = ["## Ring attention, compute only (one rank holding 2 chunks of local/2 tokens, K/V of every query head)", "",
           "loop: the ring's SDPA calls + fp32 merges + K/V cat (forward) or fp32 accumulators, partial updates and the dK/dV "
           "cat (backward); bare: the same SDPA calls alone; ref: one causal SDPA of the same FLOPs.", "",
           "| CP | rank | pass | loop ms | bare ms | loop / bare | ref ms | loop / ref | overhead per step ms | loop TF/s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(ring, key=lambda r: (r["cp"], -r["rank"], r["kind"] == "ring_bwd")):
        ref = refs.get((r["cp"], r["kind"][-3:]))
        out.append("| %d | %d | %s | %s | %s | %.3f | %s | %s | %.3f | %.1f |" % (
            r["cp"], r["rank"], r["kind"][5:], ms(r["seconds"]), ms(r["bare_seconds"]), r["loop_over_bare"],
            ms(ref["seconds"]) if ref else "", "%.3f" % (r["seconds"] / ref["seconds"]) if ref else "",
            1e3 * r["overhead_per_step_s"], r["tflops"]))
    out += ["", "Per ring step (median over the repeats; a step's time runs from the previous step's end):", "",
            "| CP | rank | pass | step | kind | loop ms | bare ms |", "|---|---|---|---|---|---|---|"]
    for r in sorted(ring, key=lambda r: (r["cp"], -r["rank"], r["kind"] == "ring_bwd")):
        for s in r["steps"]:
            out.append("| %d | %d | %s | %d | %s | %s | %s |" % (r["cp"], r["rank"], r["kind"][5:], s["step"], s["kind"],
                                                              ms(s["loop_s"]), ms(s["bare_s"])))
    return out + [""]


def md_other(rows):
    out = []
    cp = [r for r in rows if r["kind"] == "torch_cp_fwdbwd"]
    if cp:
        out += ["## PyTorch's context-parallel SDPA on a fake process group (fwd+bwd, one rank)", "",
                "| shape | ms | TF/s | of peak |", "|---|---|---|---|"]
        out += ["| %s | %s | %.1f | %.3f |" % (r["shape"], ms(r["seconds"]), r["tflops"], r.get("peak_frac", 0)) for r in cp]
        out.append("")
    chk = [r for r in rows if r["kind"] == "ring_check"]
    if chk:
        out += ["## Ring emulation against one full causal attention (out, dQ, dK, dV)", "",
                "| shape | dtype | max abs diff | max abs ref | tolerance | ok |", "|---|---|---|---|---|---|"]
        out += ["| %s | %s | %.2e | %.2e | %.1e | %s |" % (r["shape"], r["dtype"], r["max_abs_diff"], r["max_abs_ref"],
                                                         r["tolerance"], "yes" if r["ok"] else "NO") for r in chk]
        out.append("")
    miss = [r for r in rows if "skipped" in r or "unavailable" in r]
    if miss:
        out += ["## Skipped or unavailable", ""]
        out += ["- %s %s: %s" % (r["kind"], r["shape"], r.get("skipped") or "unavailable: " + r["unavailable"]) for r in miss]
        out.append("")
    return out


def write_md(p):
    head = ["# sim probe (bench/gpu_sim_probe.py)", "",
            "device: %s; torch %s; %s" % (torch.cuda.get_device_name(0) if p.dev.type == "cuda" else "cpu",
                                          torch.__version__, "REHEARSAL on small shapes: the figures mean nothing"
                                          if p.small else "full shapes"),
            "elapsed: %.1f s of a %.0f s budget" % (time.time() - p.start, p.budget), ""]
    body = md_gemms(p.rows) + md_sdpa(p.rows) + md_ring(p.rows) + md_other(p.rows)
    with open(os.path.join(p.out_dir, "sim_probe.md"), "w") as f:
        f.write("\n".join(head + body) + "\n")


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="folder for sim_probe.jsonl and sim_probe.md")
    ap.add_argument("--small", action="store_true", help="tiny shapes on the CPU (a rehearsal)")
    # 75 s after torch's import and CUDA's start: the whole run within 90 s, inside the phase's 100 s
    ap.add_argument("--budget", type=float, default=75.0, help="seconds for the measurements (default 75)")
    ap.add_argument("--check", action="store_true", help="only the ring's correctness check, CPU fp32; exit 1 on a mismatch")
    a = ap.parse_args()
    if a.check:
        ok = True
        for c in (1, 2, 3, 4, 8):
            diff, scale = check_ring(MathAttn(), c, 8, 2, 16, torch.float32, torch.device("cpu"), seed=c)
            good = diff <= 1e-4 * max(scale, 1.0)
            ok &= good
            print("%s ring_cp%d max_abs_diff %.3e (max_abs_ref %.3e)" % ("ok" if good else "FAIL", c, diff, scale))
        return 0 if ok else 1
    if not a.out:
        ap.error("--out DIR is required (or --check)")
    p = Probe(a.out, a.small, a.budget)
    attn = attention_impl(p)
    print("sim probe: %s, torch %s, %s, attention %s" % (p.dev, torch.__version__, "small" if p.small else "full",
                                                          type(attn).__name__), flush=True)
    sections = [("ring check", lambda: probe_check(p, attn)), ("gemm", lambda: probe_gemms(p)),
                ("sdpa", lambda: probe_sdpa(p)), ("ring", lambda: probe_ring(p, attn)),
                ("torch cp", lambda: probe_torch_cp(p))]
    for name, fn in sections:
        try:
            fn()
        except Exception as e:  # one section's failure must not cost the others
            p.skip(name, "all", "%s: %s" % (type(e).__name__, str(e)[:300]), "unavailable")
        try:
            write_md(p)  # after each section: a run stopped at its deadline still leaves a report
        except Exception as e:  # the jsonl holds every figure; a report bug must not stop the run
            print("sim probe: sim_probe.md not written: %s: %s" % (type(e).__name__, e), flush=True)
        if p.dev.type == "cuda":
            torch.cuda.empty_cache()
    print("sim probe: %.1f s; %s" % (time.time() - p.start, os.path.join(p.out_dir, "sim_probe.md")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
