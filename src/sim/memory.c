/* memory.c: bytes per GPU by category for a model under a layout.
 *   weights / grads / optimizer: parameters held by the stage (sharded by tp, experts by ep) times
 *     bytes per element, divided by dp according to the ZeRO stage (Rajbhandari et al. 2020).
 *     Mixed precision keeps fp32 master weights + Adam m and v: 12 bytes; gradients are accumulated
 *     in grad_bytes (Megatron-LM: fp32 main_grad, 4; the ZeRO paper's 16 psi assumes 2).
 *   activations: Korthikanti et al. 2022, Sec. 4, per layer and micro-batch of b sequences,
 *     sbh (10 + 24/t + 5 a s / (h t)) bytes for GPT (generalized below to GQA, SwiGLU, any ffn),
 *     all of it / t with sequence parallelism, the 5 a s^2 b term dropped by selective recompute or
 *     flash attention, only the 2 sbh layer input kept with full recompute; times the layers whose
 *     activations a stage holds at its peak (the schedule's in-flight micro-batches).
 *   buffers/workspace: 1 GiB for the CUDA context, cuBLAS workspace and NCCL buffers, plus transient
 *     buffers: one layer's recomputed activations during backward, fp32 logits on the last stage,
 *     the sequence-parallel gathered input, ZeRO-3 prefetched layers. */
#include <math.h>
#include <string.h>

#include "sim/sim.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static double kvd(const SimModel *m) { return (double)m->kv_heads * (m->hidden / m->heads); }

/* Split a layer's activation bytes into the part replicated across tp ranks, the part sharded by
 * tp, and the s^2 attention-core part, for b sequences of s tokens (s is the local length). */
static void layer_act_parts(const SimModel *m, const Layout *l, int b, double *repl, double *shard,
                            double *core) {
    double e = sim_dtype_bytes(l->dtype) / 2.0; /* formulas below are for 2-byte elements */
    double s = (double)l->seq / l->cp, S = l->seq, h = m->hidden, a = m->heads;
    double f = m->experts > 1 ? (double)m->expert_ffn * m->top_k : m->ffn;
    double sbh = s * b * h;
    /* LN inputs 2+2, QKV input 2, MLP input 2 (+ dropout masks 1+1 for GPT) */
    *repl = e * (m->llama ? 8.0 : 10.0) * sbh;
    double mlp = m->llama ? 6.0 * s * b * f : 4.0 * s * b * f;
    *shard = e * (2.0 * sbh + 4.0 * s * b * kvd(m) + 2.0 * sbh + mlp);
    /* softmax output 2, dropout mask 1, dropout output 2 (Llama: no dropout: softmax output only) */
    *core = e * (m->llama ? 2.0 : 5.0) * a * s * S * b;
}

double sim_layer_activation_bytes(const SimModel *m, const Layout *l, int b) {
    double repl, shard, core;
    layer_act_parts(m, l, b, &repl, &shard, &core);
    double t = l->tp;
    if (l->recompute == RECOMPUTE_FULL)
        return sim_dtype_bytes(l->dtype) * ((double)l->seq / l->cp) * b * m->hidden / (l->sp ? t : 1);
    double v = (l->sp ? repl / t : repl) + shard / t;
    if (l->recompute == RECOMPUTE_NONE && !l->flash) v += core / t;
    if (l->flash) v += 4.0 * m->heads * ((double)l->seq / l->cp) * b / t; /* fp32 softmax statistics */
    return v;
}

/* Full (no-recompute) activations of one layer: what backward rebuilds while it runs. */
static double layer_full_bytes(const SimModel *m, const Layout *l, int b) {
    Layout x = *l;
    x.recompute = RECOMPUTE_NONE;
    return sim_layer_activation_bytes(m, &x, b);
}

double sim_inflight_layers(const SimModel *m, const Layout *l, int stage) {
    int p = l->pp, v = l->vpp > 0 ? l->vpp : 1;
    int dpb = l->global_batch / l->dp;
    int mb = l->micro_batch > 0 ? dpb / l->micro_batch : 1;
    double per_chunk = (double)m->layers / ((double)p * v);
    double chunks;
    if (l->schedule == SCHED_GPIPE) chunks = (double)mb * v;
    else if (v == 1) chunks = fmin(p - stage, mb);
    else chunks = fmin((double)mb * v, (double)(p - stage - 1) * 2 + (double)(v - 1) * p + 1);
    return chunks * per_chunk;
}

static double mlp_params(const SimModel *m, double f) {
    double h = m->hidden;
    return m->llama ? 3.0 * h * f : 2.0 * h * f + f + h;
}

/* Parameters per GPU of stage `stage`, split into dense (replicated over dp) and expert parts. */
void sim_stage_params_split(const SimModel *m, const Layout *l, int stage, double *dense, double *expert) {
    double per_layer = sim_model_layer_params(m);
    double exp_layer = m->experts > 1 ? m->experts * mlp_params(m, m->expert_ffn) : 0;
    double layers = (double)m->layers / l->pp;
    *dense = layers * (per_layer - exp_layer) / l->tp;
    *expert = layers * exp_layer / ((double)l->tp * l->ep);
    double emb = (double)m->vocab * m->hidden / l->tp;
    if (stage == 0) *dense += emb + (m->llama ? 0 : (double)m->seq * m->hidden);
    if (stage == l->pp - 1 && (m->llama || l->pp > 1)) *dense += emb; /* output layer (or tied copy) */
}

double sim_stage_params(const SimModel *m, const Layout *l, int stage) {
    double d, e;
    sim_stage_params_split(m, l, stage, &d, &e);
    return d + e;
}

double sim_zero_state_bytes(double psi, int stage, int dp, int grad_bytes, int weight_bytes) {
    double w = weight_bytes * psi, g = grad_bytes * psi, o = 12.0 * psi;
    if (stage >= 1) o /= dp;
    if (stage >= 2) g /= dp;
    if (stage >= 3) w /= dp;
    return w + g + o;
}

int sim_memory(const SimModel *m, const Layout *l, SimMemory *out) {
    memset(out, 0, sizeof *out);
    double wb = sim_dtype_bytes(l->dtype) == 4 ? 4 : 2;
    double ob = wb == 4 ? 8 : 12; /* fp32 training: Adam m, v only */
    int b = l->micro_batch > 0 ? l->micro_batch : 1;
    int expert_dp = l->dp / l->ep > 0 ? l->dp / l->ep : 1;
    int stages = l->pp;
    for (int s = 0; s < stages; s++) {
        /* stages in the middle are alike; check the first two and the last */
        if (s > 1 && s < stages - 1) continue;
        double dense, expert;
        sim_stage_params_split(m, l, s, &dense, &expert);
        SimMemory x = {0};
        double shard_o = l->zero >= 1, shard_g = l->zero >= 2, shard_w = l->zero >= 3;
        x.weights = wb * (dense / (shard_w ? l->dp : 1) + expert / (shard_w ? expert_dp : 1));
        x.grads = l->grad_bytes * (dense / (shard_g ? l->dp : 1) + expert / (shard_g ? expert_dp : 1));
        x.optimizer = ob * (dense / (shard_o ? l->dp : 1) + expert / (shard_o ? expert_dp : 1));
        x.activations = sim_layer_activation_bytes(m, l, b) * sim_inflight_layers(m, l, s);
        double ws = 0;
        if (l->recompute != RECOMPUTE_NONE) ws += layer_full_bytes(m, l, b) - sim_layer_activation_bytes(m, l, b);
        if (s == stages - 1) ws += 4.0 * ((double)l->seq / l->cp) * b * m->vocab / l->tp; /* fp32 logits */
        x.comm_buffers = 1.0 * GIB; /* CUDA context, cuBLAS workspace, NCCL channel buffers */
        if (l->zero >= 3) x.comm_buffers += 2.0 * wb * sim_model_layer_params(m) / l->tp; /* prefetch */
        if (l->tp > 1 && l->sp) ws += sim_dtype_bytes(l->dtype) * l->seq / l->cp * b * m->hidden; /* gathered input */
        x.comm_buffers += ws;
        x.total = x.weights + x.grads + x.optimizer + x.activations + x.comm_buffers;
        x.stage = s;
        if (x.total > out->total) *out = x;
    }
    return 0;
}
