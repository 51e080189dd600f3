/* layer.c: the time of one transformer layer's forward and backward for one micro-batch on one
 * GPU, by parts: weight GEMMs at their local shapes and dtype (fp8 or 16-bit), the attention core
 * (fused kernels or unfused softmax/dropout), memory-bound kernels (fused, or eager PyTorch ops),
 * fp8 casts/transposes/amax passes, and the tensor-, context- and expert-parallel communication
 * with the overlap the software does. step.c puts layers into pipeline stages. Every rule and its
 * source is in docs/SIMULATOR.md ("Model of one step"). */
#include <math.h>
#include <string.h>

#include "sim/sim.h"

static Group grp(int size, int stride) { Group g = {size, stride}; return g; }

/* Weight GEMMs of one layer, local shapes (M tokens, N outputs, K inputs). */
typedef struct {
    double M, N, K, batch;
    int up;        /* an MLA up-projection (DeepSeek-V3 re-runs them in backward) */
    int fp8;       /* runs in fp8 (Transformer Engine / torchao linears) */
    int ln_input;  /* input comes from a norm (TE fuses the fp8 cast into LayerNormLinear) */
    double op_rec; /* fraction re-run by torchtitan's op-level selective recompute */
} Gemm;

/* Tokens a rank's experts take over the mean, dropless: the busiest expert's load (moe_imbalance)
 * is what a rank holding one expert waits for; a rank holding E/ep experts sums their loads, and with
 * ep = 1 it holds all of them (its tokens are exactly top_k per token). The excess is scaled by the
 * finite-population factor sqrt((ep - 1) / (E - 1)) of a sum of E/ep of the E loads (assumption:
 * independent expert loads). With a capacity factor every expert is padded to its capacity. */
double sim_moe_load(const SimModel *m, const Layout *l) {
    if (m->experts <= 1) return 1;
    if (l->capacity_factor > 0) return l->capacity_factor;
    double imb = l->moe_imbalance > 0 ? l->moe_imbalance : 1;
    if (l->ep <= 1) return 1;
    return 1 + (imb - 1) * sqrt((double)(l->ep - 1) / (m->experts - 1));
}

/* Where the GEMMs that carry tensor-parallel communication sit in the list. */
typedef struct { int qkv, out, fc1, fc2; } GemmRoles;

static int layer_gemms(const SimModel *m, const Layout *l, double T, int moe, Gemm *G, GemmRoles *role) {
    double t = l->tp, h = m->hidden, hd = (double)m->hidden / m->heads, kv = m->kv_heads * hd;
    double kv_local = kv >= t * hd ? kv / t : kv; /* fewer kv heads than tp: replicated */
    int fp8 = l->dtype == DT_FP8, n = 0;
    moe = moe && m->experts > 1;
    double f = moe ? m->expert_ffn : m->ffn;
    if (sim_mla(m)) {
        /* multi-head latent attention (DeepSeek-V2/V3): the down-projections are replicated over tp
         * (Megatron-core's MLA: linear_q_down_proj / linear_kv_down_proj duplicated), the
         * up-projections column-parallel, the output row-parallel */
        double H = m->heads / t, qk = m->qk_nope + m->qk_rope;
        role->qkv = n;
        if (m->q_lora > 0) {
            G[n] = (Gemm){T, m->q_lora, h, 1, 0, fp8, 1, 0}; n++;            /* q down */
            G[n] = (Gemm){T, H * qk, m->q_lora, 1, 1, fp8, 1, 1}; n++;       /* q up */
        } else { G[n] = (Gemm){T, H * qk, h, 1, 0, fp8, 1, 0}; n++; }
        G[n] = (Gemm){T, m->kv_lora + m->qk_rope, h, 1, 0, fp8, 1, 0}; n++;  /* kv down + the shared rope key */
        G[n] = (Gemm){T, H * (m->qk_nope + m->v_head), m->kv_lora, 1, 1, fp8, 1, 1}; n++; /* kv up */
        role->out = n;
        G[n] = (Gemm){T, h, H * m->v_head, 1, 0, fp8, 0, 1}; n++;            /* output */
    } else {
        /* torchtitan's op policy saves every mm output except every second one: of q, k, v, o, w1, w3,
         * w2 (gated) it re-runs k, o and w3; of q, k, v, o, fc1, fc2 it re-runs k, o and fc2 */
        role->qkv = n;
        G[n] = (Gemm){T, h / t + 2 * kv_local, h, 1, 0, fp8, 1, (kv_local) / (h / t + 2 * kv_local)}; n++; /* QKV */
        role->out = n;
        G[n] = (Gemm){T, h, h / t, 1, 0, fp8, 0, 1}; n++;                                                  /* output */
    }
    double et = l->etp > 0 ? l->etp : t;
    double mt = moe ? et : t, Tm = T, batch = 1;
    if (moe) {
        double local = (double)m->experts / l->ep;
        /* tokens reaching each local expert: top_k of every token of the ep group, spread over the
         * experts, times the busiest rank's load (sim_moe_load); with expert tensor parallelism
         * smaller than tp the tokens of tp/etp ranks meet on one expert shard */
        Tm = T * m->top_k * l->ep / m->experts * sim_moe_load(m, l) * (t / mt);
        batch = local;
        G[n] = (Gemm){T, m->experts, h, 1, 0, 0, 1, 0}; n++; /* router (16-bit) */
        if (m->shared_experts > 0) {
            /* shared experts: a dense MLP every token passes, tensor-parallel like one (Megatron-core) */
            double sf = (double)m->shared_experts * (m->shared_ffn > 0 ? m->shared_ffn : m->expert_ffn);
            G[n] = (Gemm){T, (m->gated ? 2 : 1) * sf / t, h, 1, 0, fp8, 1, m->gated ? 0.5 : 0}; n++;
            G[n] = (Gemm){T, h, sf / t, 1, 0, fp8, 0, m->gated ? 0 : 1}; n++;
        }
    }
    role->fc1 = n;
    G[n] = (Gemm){Tm, (m->gated ? 2 : 1) * f / mt, h, batch, 0, fp8, 1, m->gated ? 0.5 : 0}; n++; /* fc1 */
    role->fc2 = n;
    G[n] = (Gemm){Tm, h, f / mt, batch, 0, fp8, 0, m->gated ? 0 : 1}; n++;                       /* fc2 */
    return n;
}

/* Bytes of fp8 casts for one GEMM input of `elems` elements in forward and of the output gradient
 * in backward (Transformer Engine: cast + transpose, the transpose kept for the wgrad GEMM; with a
 * norm in front the cast is fused into the norm and only the transpose is extra; current scaling
 * reads the tensor once more for its amax first). */
/* Blockwise scaling (DeepSeek-V3 Sec. 3.3.2: 1x128 tiles of activations and gradients, 128x128
 * blocks of weights, one fp32 scale each): a quantization reads 2 bytes and writes 1 + 4/128 per
 * element with its amax taken inside the tile (no separate pass, no norm fusion); the output
 * gradient is quantized twice (1x128 for dgrad, 128x1 for wgrad), and in backward the cached fp8
 * input is dequantized and quantized again transposed for wgrad (Sec. 3.3.3). */
#define BLOCK_Q (3.0 + 4.0 / 128)
static double fp8_input_bytes(const Layout *l, const Gemm *g, double elems) {
    if (l->fp8_scaling == FP8_BLOCKWISE) return BLOCK_Q * elems;
    if (l->fp8_scaling == FP8_CURRENT) return 6.0 * elems; /* amax read 2, read 2, write 1 + 1 */
    return g->ln_input ? 2.0 * elems : 4.0 * elems;        /* transpose r1 w1 / read 2, write 1 + 1 */
}
static double fp8_grad_bytes(const Layout *l, double elems) {
    if (l->fp8_scaling == FP8_BLOCKWISE) return 2 * BLOCK_Q * elems;
    return (l->fp8_scaling == FP8_CURRENT ? 6.0 : 4.0) * elems;
}
/* backward work on the saved fp8 input (blockwise: re-quantized transposed for wgrad) */
static double fp8_saved_input_bytes(const Layout *l, double elems) {
    return l->fp8_scaling == FP8_BLOCKWISE ? (1.0 + 4.0 / 128 + 1.0 + 4.0 / 128) * elems : 0;
}

/* Memory-bound kernels of one layer's forward (bytes, kernels). Fused: what Megatron-LM/TE and
 * torch.compile run (one pass per norm, residual add, activation, rotary); eager: PyTorch ops one
 * by one (RMSNorm upcast to fp32: to-float, pow, mean, rsqrt, mul, type-as, mul-weight = 32 B per
 * element; rotary through complex fp32 views 20 B; SwiGLU silu + mul 10 B; residual add 6 B; the
 * contiguous copy of the attention output 4 B). */
static void elementwise(const SimModel *m, const Layout *l, double T, int moe, double *bytes, int *kernels) {
    double t = l->tp, h = m->hidden, hd = (double)m->hidden / m->heads, kv = m->kv_heads * hd;
    double kv_local = kv >= t * hd ? kv / t : kv;
    if (sim_mla(m)) { hd = m->qk_rope; kv_local = m->qk_rope; } /* rotary on the decoupled rope dims only */
    double rows = l->sp && t > 1 ? T / t : T;
    double f = moe ? m->expert_ffn : m->ffn;
    double et = l->etp > 0 ? l->etp : t;
    double fl = moe ? (double)m->top_k * f * sim_moe_load(m, l) / et : f / t; /* activation elements per token */
    if (moe && m->shared_experts > 0)
        fl += (double)m->shared_experts * (m->shared_ffn > 0 ? m->shared_ffn : m->expert_ffn) / t;
    double e = sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype);
    if (l->fused_elementwise) {
        /* norms r+w, residual adds (GPT: bias-dropout-add with a 1-byte mask) */
        double per_row = m->dropout ? 11.0 : 10.0;
        *bytes = e * (per_row * rows * h + (m->gated ? 3.0 : 2.0) * T * fl);
        if (m->rope) *bytes += e * 2.0 * T * (sim_mla(m) ? m->heads / t * hd + kv_local : h / t + kv_local);
        if (sim_mla(m)) *bytes += e * 2.0 * T * (m->q_lora + m->kv_lora); /* the latents' RMSNorms */
        *kernels = sim_mla(m) ? 8 : 6;
    } else {
        double norm = m->rmsnorm ? 32.0 : 36.0;
        *bytes = 2 * norm * rows * h + 2 * 6.0 * rows * h + (m->gated ? 10.0 : 6.0) * T * fl + 4.0 * T * h / t;
        if (m->rope) *bytes += 20.0 * T * (h / t + kv_local);
        *kernels = 2 * 7 + 2 + (m->gated ? 2 : 1) + (m->rope ? 6 : 0) + 1;
    }
}

/* A collective overlapped with a GEMM (TE userbuffers, PyTorch AsyncTP), in tp chunks. An
 * all-gather feeding a GEMM runs as a ring exchange: the GEMM starts on the local shard while the
 * next one arrives, so only what the GEMM cannot cover waits. A reduce-scatter of a GEMM's output
 * is pipelined behind the GEMM's chunks: the last chunk's reduction waits. Without overlap the two
 * run one after the other. */
static double exposed_ag(const Layout *l, double comm, double gemm) {
    return l->tp_overlap ? fmax(0, comm - gemm) : comm;
}
static double exposed_rs(const Layout *l, double comm, double gemm) {
    return l->tp_overlap ? fmax(0, comm - gemm) + comm / l->tp : comm;
}

void sim_layer_cost(const SimModel *m, const GpuSpec *g, const Network *net, const Layout *l, int b, LayerCost *o) {
    sim_layer_cost_kind(m, g, net, l, b, m->experts > 1, o);
}

void sim_layer_cost_kind(const SimModel *m, const GpuSpec *g, const Network *net, const Layout *l, int b, int moe,
                         LayerCost *o) {
    memset(o, 0, sizeof *o);
    moe = moe && m->experts > 1;
    SimDtype gd = l->dtype; /* dtype of the linear GEMMs */
    SimDtype ad = l->dtype == DT_FP8 ? DT_BF16 : l->dtype; /* everything else */
    double e = sim_dtype_bytes(ad);
    double t = l->tp, cp = l->cp;
    double sl = (double)l->seq / cp, S = l->seq;
    double T = b * sl; /* local tokens */
    double h = m->hidden, hd = (double)m->hidden / m->heads, kv = m->kv_heads * hd;
    double heads_local = m->heads / t;
    double kv_local = kv >= t * hd ? kv / t : kv;
    Gemm G[12];
    GemmRoles role;
    int ng = layer_gemms(m, l, T, moe, G, &role);
    double gf[12], gb[12];
    for (int i = 0; i < ng; i++) {
        SimDtype dt = G[i].fp8 ? gd : ad;
        double se = l->sw_eff > 0 ? l->sw_eff : 1;
        gf[i] = sim_gemm_time(g, dt, G[i].M, G[i].N, G[i].K, G[i].batch) / se;
        gb[i] = (sim_gemm_time(g, dt, G[i].M, G[i].K, G[i].N, G[i].batch) +
                 sim_gemm_time(g, dt, G[i].K, G[i].N, G[i].M, G[i].batch)) / se;
        o->gemm_f += gf[i];
        o->gemm_b += gb[i];
        o->rec_op += G[i].op_rec * gf[i];
        if (G[i].up) o->rec_ds += gf[i];
        if (G[i].fp8) {
            double in = G[i].M * G[i].K * G[i].batch, out = G[i].M * G[i].N * G[i].batch;
            double w = G[i].K * G[i].N * G[i].batch;
            o->fp8_f += sim_membound_time(g, fp8_input_bytes(l, &G[i], in), 1 + (l->fp8_scaling == FP8_CURRENT));
            o->fp8_b += sim_membound_time(g, fp8_grad_bytes(l, out) + fp8_saved_input_bytes(l, in),
                                          1 + (l->fp8_scaling != FP8_DELAYED));
            o->rec_op_fp8 += G[i].op_rec * sim_membound_time(g, fp8_input_bytes(l, &G[i], in), 1);
            /* weights: cast + transpose (read 2, write 1 + 1; current scaling reads for the amax first) */
            o->weight_cast += sim_membound_time(g, (l->fp8_scaling == FP8_CURRENT ? 6.0 : 4.0) * w, 1);
            o->weight_elems += w;
        }
    }
    /* attention core per local head: QK^T and PV over sl queries and S keys (the ring brings the
     * keys of the other cp ranks); causal and load-balanced over cp ranks, half the blocks */
    double nb = b * heads_local;
    double dqk = sim_qk_head_dim(m), dv = sim_v_head_dim(m);
    if (l->flash != ATTN_UNFUSED) {
        double flops = 2.0 * sl * S * (dqk + dv) * nb * 0.5;
        double eff = l->flash == ATTN_FA2 && g->attn_eff_fa2 > 0 ? g->attn_eff_fa2 : g->attn_eff;
        /* fill: 128-query tiles of every head and sequence over the SMs */
        double tiles = ceil(sl / 128.0) * nb;
        double fill = tiles / (ceil(tiles / g->sms) * g->sms);
        double rate = sim_peak_flops(g, ad) * eff * fill;
        o->attn_f = flops / rate + g->kernel_us * 1e-6;
        o->attn_b = 2.5 * flops / rate + g->kernel_us * 1e-6; /* FlashAttention-2 backward: 5 matmuls vs 2 */
    } else {
        double core = sim_gemm_time(g, ad, sl, S, hd, nb) + sim_gemm_time(g, ad, sl, hd, S, nb);
        /* fused scale-mask-softmax (read + write) and dropout (read, write, 1-byte mask) on sl x S scores */
        double scores = nb * sl * S;
        double cm = sim_membound_time(g, e * (m->dropout ? 4.5 : 2.0) * scores, m->dropout ? 2 : 1);
        o->attn_f = core + cm;
        o->attn_b = 2 * core + 2 * cm;
        o->core_mem_f = cm;
    }
    double bytes;
    int kernels;
    elementwise(m, l, T, moe, &bytes, &kernels);
    if (moe) {
        /* MoE token permutation into expert order and back (weighted sum of the top_k outputs),
         * router softmax/top-k over T x E scores (Megatron-core's alltoall token dispatcher) */
        bytes += e * 2.0 * (T * h + T * m->top_k * h) + 4.0 * 3.0 * T * m->experts;
        kernels += 4;
    }
    o->elem_f = sim_membound_time(g, bytes, kernels);
    o->elem_b = 2 * o->elem_f;
    o->rec_ds += 0.5 * o->elem_f; /* the norms and the SwiGLU output of the forward's elementwise work */
    /* tensor parallel. Forward: all-gather before QKV and fc1, reduce-scatter after the output
     * projection and fc2 (without sp: an all-reduce each). Backward: the mirror image, plus (sp,
     * Megatron/TE) the re-gather of the QKV and fc1 inputs for their wgrad, which TE overlaps with
     * dgrad. fp8 runs gather the fp8 input (TE, torchao Float8ColwiseParallel). */
    if (t > 1) {
        double bh = T * h;
        double ag_b = (gd == DT_FP8 ? 1.0 : e) * bh, rs_b = e * bh;
        Group tg = grp(l->tp, 1);
        double ag = l->sp ? sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, ag_b, tg) : 0;
        double rs = l->sp ? sim_coll_time(net, COLL_REDUCE_SCATTER, ALG_AUTO, rs_b, tg)
                          : sim_coll_time(net, COLL_ALLREDUCE, ALG_AUTO, rs_b, tg);
        int q = role.qkv, out = role.out, fc1 = role.fc1, fc2 = role.fc2;
        /* TE userbuffers' "pipeline" reduce-scatter overlap with set_sm_margin: the GEMM whose output
         * is reduce-scattered is launched on the SMs the communication kernel leaves (num_sm of the
         * overlap config; e.g. MLPerf GPT-3 configs: proj_fprop 24, fc2_fprop 20 in v3.0, 4 in v3.1,
         * 1 (ring exchange) in v4.1), so it runs sms / (sms - num_sm) longer (compute-bound GEMM) */
        if (l->tp_overlap && l->sp && g->sms > 0) {
            int ub[2] = {l->ub_sm_proj, l->ub_sm_fc2}, gi[2] = {out, fc2};
            for (int k = 0; k < 2; k++)
                if (ub[k] > 0 && ub[k] < g->sms) {
                    double longer = gf[gi[k]] * ((double)g->sms / (g->sms - ub[k]) - 1);
                    gf[gi[k]] += longer;
                    o->gemm_f += longer;
                }
        }
        o->tp_f = exposed_ag(l, ag, gf[q]) + exposed_rs(l, rs, gf[out]) + exposed_ag(l, ag, gf[fc1]) +
                  exposed_rs(l, rs, gf[fc2]);
        double ag_grad = l->sp ? sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, rs_b, tg) : 0;
        o->tp_b = exposed_rs(l, rs, gb[q] / 2) + exposed_ag(l, ag_grad, gb[out] / 2) + exposed_rs(l, rs, gb[fc1] / 2) +
                  exposed_ag(l, ag_grad, gb[fc2] / 2);
        /* Megatron-LM keeps only its sequence shard of the QKV and fc1 inputs and gathers them again
         * for the wgrad GEMMs, asynchronously under the dgrad GEMM (Korthikanti et al. 2022, 4.2.2) */
        if (l->sp && l->sp_regather)
            o->tp_b += fmax(0, ag - gb[q] / 2) + fmax(0, ag - gb[fc1] / 2) + (l->tp_overlap ? 2 * ag / t : 0);
    }
    /* context parallel (Megatron-core/TE): ring of cp - 1 K/V exchanges (backward: K/V and their
     * gradients), each overlapped with the attention block of the step before it. myriad train
     * overlaps the K/V hops the same way but sends each step's fp32 dK/dV accumulator on after the
     * step's blocks and waits for it (cp hops, nothing to hide them behind) */
    if (cp > 1 && !l->cp_torch) {
        double kvbytes = (sim_mla(m) ? T * heads_local * (dqk + dv) : 2.0 * T * kv_local) * e;
        double step = sim_coll_time(net, COLL_P2P, ALG_AUTO, kvbytes, grp(2, l->tp));
        o->cp_f = (cp - 1) * fmax(0, step - o->attn_f / cp);
        if (l->cp_dkv_serial) {
            double dkv = sim_coll_time(net, COLL_P2P, ALG_AUTO, kvbytes * 4.0 / e, grp(2, l->tp));
            o->cp_b = (cp - 1) * fmax(0, step - o->attn_b / cp) + cp * dkv;
        } else {
            o->cp_b = (cp - 1) * fmax(0, 2 * step - o->attn_b / cp);
        }
    } else if (cp > 1) {
        /* PyTorch's experimental ring attention as torchtitan ran it in Dec 2024 (docs/SIMULATOR.md,
         * "Context parallel in PyTorch"): K/V of every local query head (the model repeats the kv
         * heads before SDPA); rotate method all-gather, issued before the first block's SDPA and
         * waited for after it (forward, and again in backward); backward passes dK/dV around the
         * ring in fp32, each hop behind the next block's backward, the last one waited for. Block
         * outputs are merged in fp32 and the gradients accumulated in fp32 by separate kernels
         * (bytes per element of Q (q) and of K or V (kvx), averaged over load-balanced steps). */
        double q = T * heads_local * hd, kvx = q;
        double ag = sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, cp * 2.0 * kvx * e, grp(l->cp, l->tp));
        double hop = sim_coll_time(net, COLL_P2P, ALG_AUTO, 2.0 * kvx * 4.0, grp(2, l->tp));
        o->cp_f = fmax(0, ag - o->attn_f / cp);
        o->cp_b = fmax(0, ag - o->attn_b / cp) + (cp - 1) * fmax(0, hop - o->attn_b / cp) + hop;
        double merge_f = 12.0 * q + (cp - 1) * (32.5 * q + 8.0 * kvx);
        double merge_b = 10.0 * q + 20.0 * kvx + (cp - 1) * (11.5 * q + 47.0 * kvx);
        o->elem_f += sim_membound_time(g, merge_f, (int)(7 * (cp - 1) + 2));
        o->elem_b += sim_membound_time(g, merge_b, (int)(8 * (cp - 1) + 6));
    }
    /* expert parallel: dispatch + combine forward, the same backward (the full time: how much of it
     * compute hides depends on the schedule, step.c). fp8 runs may dispatch in fp8 with 1x128
     * scales (DeepSeek-V3 Sec. 3.3.4, DeepEP); combine stays 16-bit. */
    if (l->ep > 1 && moe) {
        double load = l->capacity_factor > 0 ? l->capacity_factor : 1;
        double disp_b = l->dtype == DT_FP8 && l->ep_fp8_dispatch ? 1.0 + 4.0 / 128 : e;
        Group eg = grp(l->ep, l->tp * l->cp);
        double disp = sim_ep_dispatch_time(net, eg, T * load, h * disp_b, m->top_k, m->route_nodes, l->ep_a2a);
        double comb = sim_ep_dispatch_time(net, eg, T * load, h * e, m->top_k, m->route_nodes, l->ep_a2a);
        o->ep_f = disp + comb;
        o->ep_b = disp + comb; /* the gradients of combine and dispatch, 16-bit both ways */
        if (l->dtype == DT_FP8 && l->ep_fp8_dispatch) o->ep_b = 2 * comb;
    }
    o->tokens = T;
}
