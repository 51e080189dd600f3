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
/* Storage of activations/weights used by the math: fp8 training keeps bf16 activations between
 * the fp8 GEMMs and bf16 parameters (Transformer Engine, torchao), so fp8 counts 2 bytes here; the
 * fp8 copies themselves are priced in fp8.c. */
double sim_dtype_bytes(SimDtype d) { return (d == DT_FP32 || d == DT_TF32) ? 4.0 : 2.0; }

static const char *arch_names[] = {"gpt2", "llama", "nemotron"};
const char *sim_arch_name(SimArch a) { return a >= ARCH_GPT && a <= ARCH_NEMOTRON ? arch_names[a] : "?"; }
int sim_arch_parse(const char *s, SimArch *out) {
    if (!strcmp(s, "gpt")) { *out = ARCH_GPT; return 0; }
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, arch_names[i])) { *out = (SimArch)i; return 0; }
    return myr_error("unknown arch '%s' (use gpt2, llama or nemotron)", s);
}

void sim_model_set_arch(SimModel *m, SimArch a) {
    m->arch = a;
    m->llama = a == ARCH_LLAMA;
    m->gated = a == ARCH_LLAMA;
    m->tied = a == ARCH_GPT;
    m->learned_pos = a == ARCH_GPT;
    m->bias = a == ARCH_GPT;
    m->rmsnorm = a == ARCH_LLAMA;
    m->rope = a != ARCH_GPT;
    m->dropout = a == ARCH_GPT;
}

static const char *recompute_names[] = {"none", "selective", "full"};
const char *sim_recompute_name(Recompute r) { return recompute_names[r]; }
int sim_recompute_parse(const char *s, Recompute *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, recompute_names[i])) { *out = (Recompute)i; return 0; }
    return myr_error("unknown recompute mode '%s' (use none, selective or full)", s);
}

static double kv_dim(const SimModel *m) { return (double)m->kv_heads * (m->hidden / m->heads); }

/* Weights of one dense MLP of inner size f (GPT: fc1 + fc2 with biases; Llama: gate, up, down). */
double sim_mlp_params(const SimModel *m, double f) {
    double h = m->hidden;
    return (m->gated ? 3.0 : 2.0) * h * f + (m->bias ? f * (m->gated ? 2 : 1) + h : 0);
}

double sim_model_layer_params(const SimModel *m) {
    double h = m->hidden, kv = kv_dim(m);
    double attn = h * (h + 2 * kv) + h * h + (m->bias ? (h + 2 * kv) + h : 0);
    double norms = (m->rmsnorm ? 1 : 2) * 2 * h;
    double mlp = m->experts > 1 ? m->experts * sim_mlp_params(m, m->expert_ffn) + h * m->experts : sim_mlp_params(m, m->ffn);
    return attn + norms + mlp;
}

double sim_model_params(const SimModel *m) {
    double h = m->hidden;
    double emb = (double)m->vocab * h * (m->tied ? 1 : 2) + (m->learned_pos ? (double)m->seq * h : 0);
    double final_norm = m->rmsnorm ? h : 2 * h;
    return m->layers * sim_model_layer_params(m) + emb + final_norm;
}

double sim_model_active_params(const SimModel *m) {
    if (m->experts <= 1) return sim_model_params(m);
    double inactive = (double)(m->experts - m->top_k) * sim_mlp_params(m, m->expert_ffn);
    return sim_model_params(m) - m->layers * inactive;
}

/* Forward FLOPs of one layer for one sequence of length s: 2 FLOPs per multiply-add of every
 * weight GEMM, plus QK^T and attention-over-values (2 * 2 s^2 h). */
static double layer_fwd_flops(const SimModel *m, double s) {
    double h = m->hidden, kv = kv_dim(m);
    double gemm_w = h * (h + 2 * kv) + h * h;
    double f = m->experts > 1 ? m->expert_ffn : m->ffn;
    double mlp_w = (m->gated ? 3.0 : 2.0) * h * f * (m->experts > 1 ? m->top_k : 1);
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

double sim_megatron_flops(const SimModel *m, double B, double s) {
    double h = m->hidden, l = m->layers, a = m->heads, gq = m->kv_heads;
    double f = m->experts > 1 ? m->expert_ffn : m->ffn, k = m->experts > 1 ? m->top_k : 1;
    double gate = m->gated ? 1.5 : 1.0;
    return 12.0 * B * s * l * h * h * ((1 + gq / a + s / h) + f / h * k * gate + m->vocab / (2.0 * l * h));
}
