/* model_flops.c: parameter and FLOP counts of a decoder-only transformer (GPT or Llama, dense or
 * MoE), the dtype and layout vocabulary. Closed formulas; the step model in step.c counts the same
 * GEMMs shard by shard, and tests/test_sim.c checks the two agree. */
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

static const char *dtype_names[DT_COUNT] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
const char *sim_dtype_name(SimDtype d) { return d >= 0 && d < DT_COUNT ? dtype_names[d] : "?"; }
int sim_dtype_parse(const char *s, SimDtype *out) {
    for (int d = 0; d < DT_COUNT; d++)
        if (!strcmp(s, dtype_names[d])) { *out = (SimDtype)d; return 0; }
    return myr_error("unknown dtype '%s' (use fp32, tf32, bf16, fp16 or fp8)", s);
}
/* Storage of activations/weights used by the math: fp8 training keeps bf16 master copies of
 * activations for most ops (Transformer Engine), so we count fp8 as 2 bytes too (conservative). */
double sim_dtype_bytes(SimDtype d) { return (d == DT_FP32 || d == DT_TF32) ? 4.0 : 2.0; }

static const char *recompute_names[] = {"none", "selective", "full"};
const char *sim_recompute_name(Recompute r) { return recompute_names[r]; }
int sim_recompute_parse(const char *s, Recompute *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, recompute_names[i])) { *out = (Recompute)i; return 0; }
    return myr_error("unknown recompute mode '%s' (use none, selective or full)", s);
}

void sim_layout_defaults(Layout *l) {
    memset(l, 0, sizeof *l);
    l->tp = l->cp = l->pp = l->vpp = l->dp = l->ep = 1;
    l->micro_batch = 1;
    l->global_batch = 0;
    l->seq = 0;
    l->recompute = RECOMPUTE_SELECTIVE;
    l->sp = 1;
    l->zero = 1;
    l->dtype = DT_BF16;
    l->schedule = SCHED_1F1B;
    l->flash = 1;
    l->overlap_dp = 1;
    l->grad_bytes = 4;
    l->fused_grad_accum = 1;
    l->overlap_p2p = 1;
}

static double kv_dim(const SimModel *m) { return (double)m->kv_heads * (m->hidden / m->heads); }

/* Weights of one dense MLP of inner size f (GPT: fc1 + fc2 with biases; Llama: gate, up, down). */
static double mlp_params(const SimModel *m, double f) {
    double h = m->hidden;
    return m->llama ? 3.0 * h * f : 2.0 * h * f + f + h;
}

double sim_model_layer_params(const SimModel *m) {
    double h = m->hidden, kv = kv_dim(m);
    double attn = h * (h + 2 * kv) + h * h + (m->llama ? 0 : (h + 2 * kv) + h);
    double norms = m->llama ? 2 * h : 4 * h;
    double mlp = m->experts > 1 ? m->experts * mlp_params(m, m->expert_ffn) + h * m->experts : mlp_params(m, m->ffn);
    return attn + norms + mlp;
}

double sim_model_params(const SimModel *m) {
    double h = m->hidden;
    double emb = (double)m->vocab * h * (m->llama ? 2 : 1) + (m->llama ? 0 : (double)m->seq * h);
    double final_norm = m->llama ? h : 2 * h;
    return m->layers * sim_model_layer_params(m) + emb + final_norm;
}

double sim_model_active_params(const SimModel *m) {
    if (m->experts <= 1) return sim_model_params(m);
    double inactive = (double)(m->experts - m->top_k) * mlp_params(m, m->expert_ffn);
    return sim_model_params(m) - m->layers * inactive;
}

/* Forward FLOPs of one layer for one sequence of length s: 2 FLOPs per multiply-add of every
 * weight GEMM, plus QK^T and attention-over-values (2 * 2 s^2 h). */
static double layer_fwd_flops(const SimModel *m, double s) {
    double h = m->hidden, kv = kv_dim(m);
    double gemm_w = h * (h + 2 * kv) + h * h;
    double f = m->experts > 1 ? m->expert_ffn : m->ffn;
    double mlp_w = (m->llama ? 3.0 : 2.0) * h * f * (m->experts > 1 ? m->top_k : 1);
    if (m->experts > 1) mlp_w += h * m->experts; /* router */
    return 2.0 * s * (gemm_w + mlp_w) + 4.0 * s * s * h;
}

double sim_model_fwd_flops(const SimModel *m, int s) {
    return m->layers * layer_fwd_flops(m, s) + 2.0 * s * (double)m->hidden * m->vocab;
}

double sim_narayanan_flops(int B, int s, int l, int h, int V) {
    double hh = (double)h * h;
    return 96.0 * B * s * l * hh * (1.0 + s / (6.0 * h) + V / (16.0 * l * (double)h));
}

int sim_software_preset(Layout *l, const char *name) {
    if (!strcmp(name, "current")) {
        Layout d;
        sim_layout_defaults(&d);
        l->flash = d.flash; l->fused_grad_accum = d.fused_grad_accum; l->overlap_p2p = d.overlap_p2p;
        l->overlap_dp = d.overlap_dp; l->zero = d.zero; l->grad_bytes = d.grad_bytes;
        return 0;
    }
    if (strcmp(name, "megatron-2021") && strcmp(name, "megatron-2022"))
        return myr_error("unknown software preset '%s' (use current, megatron-2021 or megatron-2022)", name);
    l->flash = 0;
    l->overlap_p2p = 0;
    l->overlap_dp = 0;
    l->zero = 0;
    l->grad_bytes = 4;
    l->fused_grad_accum = !strcmp(name, "megatron-2022");
    return 0;
}
