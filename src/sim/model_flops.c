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

int sim_mla(const SimModel *m) { return m->kv_lora > 0; }
double sim_qk_head_dim(const SimModel *m) { return sim_mla(m) ? m->qk_nope + m->qk_rope : (double)m->hidden / m->heads; }
double sim_v_head_dim(const SimModel *m) { return sim_mla(m) ? m->v_head : (double)m->hidden / m->heads; }
int sim_layer_is_moe(const SimModel *m, int layer) { return m->experts > 1 && layer >= m->dense_layers; }
int sim_moe_layers(const SimModel *m) { return m->experts > 1 ? (m->layers > m->dense_layers ? m->layers - m->dense_layers : 0) : 0; }

/* Weights of one dense MLP of inner size f (GPT: fc1 + fc2 with biases; Llama: gate, up, down). */
double sim_mlp_params(const SimModel *m, double f) {
    double h = m->hidden;
    return (m->gated ? 3.0 : 2.0) * h * f + (m->bias ? f * (m->gated ? 2 : 1) + h : 0);
}

/* Attention weights of one layer. Multi-head latent attention (DeepSeek-V2 Sec. 2.1; V3 Sec. 2.1.1):
 * queries through a low-rank latent (h -> q_lora -> heads x (nope + rope)), keys and values through
 * one latent of kv_lora (h -> kv_lora + the shared rope key; kv_lora -> heads x (nope + v)), each
 * latent with an RMSNorm, output heads x v -> h. */
double sim_attn_params(const SimModel *m) {
    double h = m->hidden, H = m->heads;
    if (sim_mla(m)) {
        double qk = m->qk_nope + m->qk_rope;
        double q = m->q_lora > 0 ? h * m->q_lora + m->q_lora + (double)m->q_lora * H * qk : h * H * qk;
        double kv = h * (m->kv_lora + m->qk_rope) + m->kv_lora + (double)m->kv_lora * H * (m->qk_nope + m->v_head);
        return q + kv + H * m->v_head * h;
    }
    double kv = kv_dim(m);
    return h * (h + 2 * kv) + h * h + (m->bias ? (h + 2 * kv) + h : 0);
}

/* The MLP of a layer: dense (ffn), or routed experts + router + shared experts. */
static double mlp_params_kind(const SimModel *m, int moe) {
    if (!moe) return sim_mlp_params(m, m->ffn);
    return m->experts * sim_mlp_params(m, m->expert_ffn) + (double)m->hidden * m->experts +
           m->shared_experts * sim_mlp_params(m, m->shared_ffn > 0 ? m->shared_ffn : m->expert_ffn);
}

double sim_model_layer_params_kind(const SimModel *m, int moe) {
    double norms = (m->rmsnorm ? 1 : 2) * 2.0 * m->hidden;
    return sim_attn_params(m) + norms + mlp_params_kind(m, moe && m->experts > 1);
}

double sim_model_layer_params(const SimModel *m) { return sim_model_layer_params_kind(m, m->experts > 1); }

/* DeepSeek-V3's multi-token prediction module (Sec. 2.2): a projection of [norm(h); norm(emb)]
 * (2h x h), two norms and one transformer layer, sharing the embedding and output head. */
static double mtp_params(const SimModel *m) {
    return m->mtp * (sim_model_layer_params(m) + 2.0 * m->hidden * m->hidden + 2.0 * m->hidden);
}

double sim_model_params(const SimModel *m) {
    double h = m->hidden;
    double emb = (double)m->vocab * h * (m->tied ? 1 : 2) + (m->learned_pos ? (double)m->seq * h : 0);
    double final_norm = m->rmsnorm ? h : 2 * h;
    int moe = sim_moe_layers(m);
    return moe * sim_model_layer_params_kind(m, 1) + (m->layers - moe) * sim_model_layer_params_kind(m, 0) + emb +
           final_norm + mtp_params(m);
}

double sim_model_active_params(const SimModel *m) {
    if (m->experts <= 1) return sim_model_params(m);
    double inactive = (double)(m->experts - m->top_k) * sim_mlp_params(m, m->expert_ffn);
    return sim_model_params(m) - (sim_moe_layers(m) + m->mtp) * inactive;
}

/* Forward FLOPs of one layer for one sequence of length s: 2 FLOPs per multiply-add of every
 * weight GEMM, plus QK^T and attention-over-values (2 s^2 heads (d_qk + d_v); 4 s^2 h for MHA). */
double sim_layer_fwd_flops(const SimModel *m, double s, int moe) {
    double h = m->hidden;
    double gemm_w = sim_attn_params(m) - (m->bias && !sim_mla(m) ? 2 * h + 2 * kv_dim(m) : 0);
    if (sim_mla(m)) gemm_w -= m->kv_lora + (m->q_lora > 0 ? m->q_lora : 0); /* the latents' norms */
    double mlp_w;
    if (moe && m->experts > 1) {
        mlp_w = (m->gated ? 3.0 : 2.0) * h * m->expert_ffn * m->top_k + h * m->experts; /* + router */
        mlp_w += m->shared_experts * (m->gated ? 3.0 : 2.0) * h * (m->shared_ffn > 0 ? m->shared_ffn : m->expert_ffn);
    } else mlp_w = (m->gated ? 3.0 : 2.0) * h * m->ffn;
    return 2.0 * s * (gemm_w + mlp_w) + 2.0 * s * s * m->heads * (sim_qk_head_dim(m) + sim_v_head_dim(m));
}

double sim_model_fwd_flops(const SimModel *m, int s) {
    int moe = sim_moe_layers(m);
    double f = moe * sim_layer_fwd_flops(m, s, 1) + (m->layers - moe) * sim_layer_fwd_flops(m, s, 0) +
               2.0 * s * (double)m->hidden * m->vocab;
    /* MTP: the projection, one more layer and one more pass of the output head per depth */
    if (m->mtp) f += m->mtp * (sim_layer_fwd_flops(m, s, m->experts > 1) + 2.0 * s * 2.0 * m->hidden * m->hidden +
                               2.0 * s * (double)m->hidden * m->vocab);
    return f;
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
