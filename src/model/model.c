/* model.c: forward and backward of the transformer over flat buffers. */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/moe.h"
#include "util/error.h"
#include "util/rng.h"

/* widths of this rank's qkv rows and MLP input rows */
static int qkv_width(const Model *m) { return (m->heads_local + 2 * m->kv_local) * (m->cfg.hidden / m->cfg.heads); }
static int fc_width(const Model *m) { return m->cfg.arch == ARCH_GPT2 ? m->ffn_local : 2 * m->ffn_local; }
static int full_qkv_width(const ModelConfig *c) { return (c->heads + 2 * c->kv_heads) * (c->hidden / c->heads); }
static int full_fc_width(const ModelConfig *c) { return c->arch == ARCH_GPT2 ? c->ffn : 2 * c->ffn; }

int model_create(Model *m, const ModelConfig *cfg) { return model_create_tp(m, cfg, 1, 1, 0); }

int model_create_aligned(Model *m, const ModelConfig *cfg, int unit_align) {
    return model_create_tp(m, cfg, unit_align, 1, 0);
}

int model_create_tp(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank) {
    StageSpec whole = {0, cfg->layers, 1, 1};
    return model_create_stage(m, cfg, unit_align, tp, tp_rank, &whole);
}

int model_create_stage(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank, const StageSpec *st) {
    return model_create_ep(m, cfg, unit_align, tp, tp_rank, 1, 0, st);
}

int model_create_ep(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank, int ep, int ep_rank,
                    const StageSpec *st) {
    memset(m, 0, sizeof *m);
    if (model_config_validate(cfg)) return -1;
    if (ep < 1) return myr_error("--ep must be positive");
    if (ep > 1 && cfg->experts == 0) return myr_error("--ep %d needs a mixture-of-experts model (--experts E)", ep);
    if (cfg->experts % ep)
        return myr_error("--experts %d is not divisible by --ep %d (each expert-parallel rank holds an equal share; "
                         "choose --ep dividing %d)", cfg->experts, ep, cfg->experts);
    if (cfg->experts && model_expert_ffn(cfg) % tp)
        return myr_error("expert ffn %d is not divisible by --tp %d", model_expert_ffn(cfg), tp);
    if (tp < 1) return myr_error("--tp must be positive");
    if (cfg->heads % tp) return myr_error("heads %d are not divisible by --tp %d (attention is split by heads)", cfg->heads, tp);
    if (cfg->kv_heads % tp)
        return myr_error("kv heads %d are not divisible by --tp %d (each tensor-parallel rank needs whole kv heads)",
                         cfg->kv_heads, tp);
    if (cfg->ffn % tp) return myr_error("ffn %d is not divisible by --tp %d", cfg->ffn, tp);
    if (cfg->vocab < tp) return myr_error("vocab %d is smaller than --tp %d", cfg->vocab, tp);
    m->cfg = *cfg;
    m->tp.size = tp;
    m->tp.rank = tp_rank;
    m->heads_local = cfg->heads / tp;
    m->kv_local = cfg->kv_heads / tp;
    m->ffn_local = cfg->ffn / tp;
    m->vocab_lo = (int)((int64_t)cfg->vocab * tp_rank / tp);
    m->vocab_local = (int)((int64_t)cfg->vocab * (tp_rank + 1) / tp) - m->vocab_lo;
    if (st->layer_lo < 0 || st->layer_hi > cfg->layers || st->layer_lo > st->layer_hi)
        return myr_error("stage layers [%d, %d) are outside the model's %d layers", st->layer_lo, st->layer_hi,
                         cfg->layers);
    m->stage = *st;
    m->ep.size = ep;
    m->ep.rank = ep_rank;
    if (cfg->experts) m->moe_stats.tokens = calloc((size_t)cfg->layers * cfg->experts, sizeof(int64_t));
    param_table_build_ep(&m->table, cfg, unit_align, tp, tp_rank, ep, ep_rank, st);
    m->params = dev_alloc(m->table.total);
    m->grads = dev_alloc(m->table.total);
    model_tensors_bind(&m->p, &m->table, cfg, m->params);
    model_tensors_bind(&m->g, &m->table, cfg, m->grads);
    if (cfg->arch == ARCH_LLAMA) {
        int hd = cfg->hidden / cfg->heads;
        m->rope_cos = dev_alloc((size_t)cfg->max_seq * hd / 2);
        m->rope_sin = dev_alloc((size_t)cfg->max_seq * hd / 2);
        rope_tables(m->rope_cos, m->rope_sin, cfg->max_seq, hd, cfg->rope_theta);
    }
    return 0;
}

struct ActivationSlot {
    int B, T;
    real *acts_mem;
    size_t acts_count;
    Activations a;
    int32_t *tokens, *targets;
    int ready_for_backward;
};

static void free_activations(Model *m) {
    if (m->acts_mem) m->live_slots--;
    dev_free(m->acts_mem);
    m->acts_mem = NULL;
    Activations *a = &m->a;
    for (int l = 0; a->moe && l < m->cfg.layers; l++) moe_acts_free(a->moe[l]);
    free(a->moe);
    real **arrays[] = {a->res_in, a->norm1, a->norm1_mean, a->norm1_rstd, a->norm1_in, a->qkv, a->att, a->attn_y,
                       a->res_mid, a->norm2, a->norm2_mean, a->norm2_rstd, a->norm2_in, a->fc, a->act};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    memset(a, 0, sizeof *a);
    free(m->tokens);
    free(m->targets);
    m->tokens = m->targets = NULL;
    m->B = m->T = 0;
}

static void save_slot(Model *m, struct ActivationSlot *s) {
    *s = (struct ActivationSlot){m->B, m->T, m->acts_mem, m->acts_count, m->a, m->tokens, m->targets,
                                 m->ready_for_backward};
}

static void load_slot(Model *m, const struct ActivationSlot *s) {
    m->B = s->B;
    m->T = s->T;
    m->acts_mem = s->acts_mem;
    m->acts_count = s->acts_count;
    m->a = s->a;
    m->tokens = s->tokens;
    m->targets = s->targets;
    m->ready_for_backward = s->ready_for_backward;
}

void model_select_slot(Model *m, int k) {
    if (k == m->cur_slot && m->slots) return;
    if (k >= m->nslots) {
        int n = k + 8;
        m->slots = realloc(m->slots, (size_t)n * sizeof *m->slots);
        memset(m->slots + m->nslots, 0, (size_t)(n - m->nslots) * sizeof *m->slots);
        m->nslots = n;
    }
    save_slot(m, &m->slots[m->cur_slot]);
    load_slot(m, &m->slots[k]);
    m->cur_slot = k;
}

void model_release_slot(Model *m) { free_activations(m); }

void model_destroy(Model *m) {
    free_activations(m);
    for (int k = 0; k < m->nslots; k++) {
        model_select_slot(m, k);
        free_activations(m);
    }
    free(m->slots);
    dev_free(m->scratch_mem);
    dev_free(m->params);
    dev_free(m->grads);
    dev_free(m->rope_cos);
    dev_free(m->rope_sin);
    free(m->moe_stats.tokens);
    model_tensors_free(&m->p);
    model_tensors_free(&m->g);
    param_table_free(&m->table);
}

size_t model_num_params(const Model *m) { return param_table_tensor_elements(&m->table); }

#define HOOK(name, unit) \
    if (m->hooks && m->hooks->name) m->hooks->name(m->hooks->ctx, unit)

/* this object's unit numbers (params.h): embedding, layers, head, in layout order */
static int unit_of_layer(const Model *m, int l) { return m->table.layer_unit[l]; }
static int unit_of_experts(const Model *m, int l) { return m->table.expert_unit[l]; }
static int unit_head(const Model *m) { return m->table.units - 1; }

void model_init_weights(Model *m, uint64_t seed) {
    Rng rng = {seed};
    const ModelConfig *c = &m->cfg;
    double residual_std = 0.02 / sqrt(2.0 * c->layers);
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        real *w = m->params + p->offset;
        const char *base = strrchr(p->name, '.') ? strrchr(p->name, '.') + 1 : p->name;
        int is_norm_w = !strcmp(base, "norm1_w") || !strcmp(base, "norm2_w") || !strcmp(base, "normf_w");
        if (is_norm_w) {
            for (size_t k = 0; k < p->numel; k++) w[k] = 1;
        } else if (p->ndim == 1) {
            for (size_t k = 0; k < p->numel; k++) w[k] = 0;
        } else {
            double std = (!strcmp(base, "attn_out_w") || !strcmp(base, "mlp_out_w") || !strcmp(base, "shared_out_w"))
                             ? residual_std
                             : 0.02;
            for (size_t k = 0; k < p->numel; k++) w[k] = (real)(std * rng_normal(&rng));
        }
    }
}

/* rows of the residual stream this rank holds */
static size_t local_rows(const Model *m, size_t N) { return m->tp.sp ? N / (size_t)m->tp.size : N; }

size_t model_local_rows(const Model *m, size_t N) { return local_rows(m, N); }

size_t model_activation_count(const Model *m, int B, int T) {
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, NL = local_rows(m, N), C = c->hidden, Y = (size_t)m->heads_local * (C / c->heads);
    size_t gathered = m->tp.sp ? N * C : 0; /* norm*_in */
    size_t att = (size_t)B * m->heads_local * T * T;
    size_t rest = NL * C * 3 + 2 * gathered + N * Y /* norm1, res_mid, norm2 (+ gathered); attn_y */
                  + NL * 4                          /* norm means / rstds */
                  + N * qkv_width(m) + N * fc_width(m) + N * m->ffn_local;
    size_t L = (size_t)(m->stage.layer_hi - m->stage.layer_lo), kept;
    if (m->recompute == RECOMPUTE_FULL) kept = L * NL * C + rest + att; /* inputs + one layer's worth */
    else if (m->recompute == RECOMPUTE_SELECTIVE) kept = L * (NL * C + rest) + att;
    else kept = L * (NL * C + rest + att);
    kept += NL * C; /* the stage's output (the last layer's res_out) */
    if (m->stage.last) kept += NL * C + gathered + NL * 2 + N * (size_t)m->vocab_local + N;
    return kept;
}

static void ensure_activations(Model *m, int B, int T) {
    if (m->B == B && m->T == T) return;
    free_activations(m);
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, NL = local_rows(m, N), C = c->hidden, L = c->layers, QKV = qkv_width(m);
    size_t F1 = fc_width(m), F = m->ffn_local, Y = (size_t)m->heads_local * (C / c->heads);
    int sp = m->tp.sp, lo = m->stage.layer_lo, hi = m->stage.layer_hi;
    m->acts_count = model_activation_count(m, B, T);
    m->acts_mem = dev_alloc(m->acts_count);
    Activations *a = &m->a;
    real *p = m->acts_mem;
#define TAKE(n) (p += (n), p - (n))
#define ARR(field) a->field = calloc(L + 1, sizeof(real *))
    ARR(res_in); ARR(norm1); ARR(norm1_mean); ARR(norm1_rstd); ARR(norm1_in); ARR(qkv); ARR(att); ARR(attn_y);
    ARR(res_mid); ARR(norm2); ARR(norm2_mean); ARR(norm2_rstd); ARR(norm2_in); ARR(fc); ARR(act);
#undef ARR
    a->moe = calloc(L + 1, sizeof(struct MoeActs *));
    real *shared_att = m->recompute != RECOMPUTE_NONE ? TAKE((size_t)B * m->heads_local * T * T) : NULL;
    /* res_in[l] for l in [lo, hi]: each layer's input, and res_in[hi] the stage's output */
    for (int l = lo; l <= hi; l++) a->res_in[l] = TAKE(NL * C);
    for (int l = lo; l < hi; l++) {
        if (m->recompute == RECOMPUTE_FULL && l > lo) { /* every layer shares the first layer's buffers */
            a->norm1[l] = a->norm1[lo]; a->norm1_in[l] = a->norm1_in[lo]; a->norm1_mean[l] = a->norm1_mean[lo];
            a->norm1_rstd[l] = a->norm1_rstd[lo]; a->qkv[l] = a->qkv[lo]; a->att[l] = a->att[lo];
            a->attn_y[l] = a->attn_y[lo]; a->res_mid[l] = a->res_mid[lo]; a->norm2[l] = a->norm2[lo];
            a->norm2_in[l] = a->norm2_in[lo]; a->norm2_mean[l] = a->norm2_mean[lo]; a->norm2_rstd[l] = a->norm2_rstd[lo];
            a->fc[l] = a->fc[lo]; a->act[l] = a->act[lo];
            continue;
        }
        a->norm1[l] = TAKE(NL * C);
        a->norm1_in[l] = sp ? TAKE(N * C) : a->norm1[l];
        a->norm1_mean[l] = TAKE(NL);
        a->norm1_rstd[l] = TAKE(NL);
        a->qkv[l] = TAKE(N * QKV);
        a->att[l] = shared_att ? shared_att : TAKE((size_t)B * m->heads_local * T * T);
        a->attn_y[l] = TAKE(N * Y);
        a->res_mid[l] = TAKE(NL * C);
        a->norm2[l] = TAKE(NL * C);
        a->norm2_in[l] = sp ? TAKE(N * C) : a->norm2[l];
        a->norm2_mean[l] = TAKE(NL);
        a->norm2_rstd[l] = TAKE(NL);
        a->fc[l] = TAKE(N * F1);
        a->act[l] = TAKE(N * F);
    }
    a->res_out = a->res_in[hi];
    if (m->stage.last) {
        a->normf = TAKE(NL * C);
        a->normf_in = sp ? TAKE(N * C) : a->normf;
        a->normf_mean = TAKE(NL);
        a->normf_rstd = TAKE(NL);
        a->logits = TAKE(N * (size_t)m->vocab_local);
        a->losses = TAKE(N);
    }
    m->live_slots++;
    if (m->live_slots > m->peak_live_slots) m->peak_live_slots = m->live_slots;
    m->tokens = malloc(N * sizeof(int32_t));
    m->targets = malloc(N * sizeof(int32_t));
    m->B = B;
    m->T = T;
    if (m->scratch_B == B && m->scratch_T == T) return; /* scratch is shared by all slots */
    dev_free(m->scratch_mem);
    m->scratch_count = NL * C + N * C + (sp ? NL * C + N * C : 0) + N * Y + N * QKV + N * F1 + N * F;
    m->scratch_mem = dev_alloc(m->scratch_count);
    m->scratch_B = B;
    m->scratch_T = T;
    p = m->scratch_mem;
    m->s.d_res = TAKE(NL * C);
    m->s.d_norm = TAKE(N * C);
    m->s.d_norm_local = sp ? TAKE(NL * C) : m->s.d_norm;
    m->s.full = sp ? TAKE(N * C) : NULL;
    m->s.d_attn_y = TAKE(N * Y);
    m->s.d_qkv = TAKE(N * QKV);
    m->s.d_fc = TAKE(N * F1);
    m->s.d_act = TAKE(N * F);
#undef TAKE
}

static void norm_forward(const Model *m, real *out, real *mean, real *rstd, const real *inp, const real *w,
                         const real *b, int N) {
    if (m->cfg.arch == ARCH_GPT2) layernorm_forward(out, mean, rstd, inp, w, b, N, m->cfg.hidden, m->cfg.norm_eps);
    else rmsnorm_forward(out, rstd, inp, w, N, m->cfg.hidden, m->cfg.norm_eps);
}

static void norm_backward(const Model *m, real *dinp, real *dw, real *db, const real *dout, const real *inp,
                          const real *w, const real *mean, const real *rstd, int N) {
    if (m->cfg.arch == ARCH_GPT2) layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, m->cfg.hidden);
    else rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, m->cfg.hidden);
}

/* Tensor-parallel all-reduce of a partial sum (no-op without tensor parallelism). */
static void tp_sum(Model *m, real *x, size_t n) {
    if (m->tp.size > 1) m->tp.sum(m->tp.ctx, x, n);
}

/* A row-parallel output `full` [N, C] is a partial sum: complete it into this rank's rows.
 * Sequence parallel: reduce-scatter into `local` [N/tp, C]. Tensor parallel: all-reduce in
 * place (then local == full). */
static void complete_rows(Model *m, real *full, real *local, size_t N, size_t C) {
    if (m->tp.sp) m->tp.reduce_scatter(m->tp.ctx, full, local, local_rows(m, N) * C);
    else tp_sum(m, full, N * C);
}

/* The rows a column-parallel matmul reads: all-gather under sequence parallelism. */
static real *gather_rows(Model *m, real *local, real *full, size_t N, size_t C) {
    if (!m->tp.sp) return local;
    m->tp.all_gather(m->tp.ctx, local, full, local_rows(m, N) * C);
    return full;
}

/* Under sequence parallelism the replicated tensors of a unit (norms, row-parallel biases,
 * position embedding) saw only this rank's rows: sum their gradients over the group. */
static void sum_replicated_grads(Model *m, int unit) {
    if (!m->tp.sp) return;
    if (m->hooks && m->hooks->sum_replicated_now && !m->hooks->sum_replicated_now(m->hooks->ctx, unit)) return;
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        if (p->unit == unit && p->shard == SHARD_NONE) tp_sum(m, model_tensors_get(&m->g, p), p->numel);
    }
}

/* Softmax cross-entropy over logits split by vocabulary: the row max, the sum of exponentials
 * and the target's logit are combined across the group exactly (doubles), so every rank gets
 * the loss of the whole vocabulary without any rank holding all logits. */
static double vocab_parallel_cross_entropy(Model *m, const int32_t *targets, int N, double grad_scale) {
    real *z = m->a.logits;
    int V = m->vocab_local;
    double *mx = malloc((size_t)N * sizeof(double)), *sum = malloc((size_t)N * sizeof(double));
    double *zt = malloc((size_t)N * sizeof(double));
    vocab_shard_row_max(z, N, V, mx);
    m->tp.sum_exact(m->tp.ctx, mx, (size_t)N, 1);
    vocab_shard_row_sumexp(z, N, V, mx, sum);
    m->tp.sum_exact(m->tp.ctx, sum, (size_t)N, 0);
    vocab_shard_target_logit(z, targets, m->vocab_lo, N, V, zt);
    m->tp.sum_exact(m->tp.ctx, zt, (size_t)N, 0);
    double total = 0;
    for (int n = 0; n < N; n++) {
        double loss = log(sum[n]) - (zt[n] - mx[n]);
        m->a.losses[n] = (real)loss;
        total += (real)loss; /* as the fused kernel: sum the per-row losses as stored */
    }
    if (grad_scale > 0) vocab_shard_grad(z, targets, m->vocab_lo, N, V, mx, sum, grad_scale / N);
    free(mx);
    free(sum);
    free(zt);
    return total / N;
}

/* Forward of layer l on the activations of the running forward (also used by backward to
 * recompute a layer whose activations were not kept). */
static void layer_forward(Model *m, int l, int B, int T) {
    const ModelConfig *c = &m->cfg;
    int N = B * T, C = c->hidden, H = m->heads_local, KV = m->kv_local, hd = C / c->heads, QKV = qkv_width(m);
    int F = m->ffn_local, F1 = fc_width(m), Y = H * hd;
    int NL = (int)local_rows(m, (size_t)N);
    int gpt2 = c->arch == ARCH_GPT2, tp = m->tp.size > 1, sp = m->tp.sp;
    Activations *a = &m->a;
    const LayerTensors *w = &m->p.layer[l];
    real *res_out = a->res_in[l + 1];
    /* row-parallel outputs land in `proj` (all N rows), are completed into `res_out` (this
     * rank's rows) and the residual is added there */
    real *proj = sp ? m->s.full : res_out;
    norm_forward(m, a->norm1[l], a->norm1_mean[l], a->norm1_rstd[l], a->res_in[l], w->norm1_w, w->norm1_b, NL);
    gather_rows(m, a->norm1[l], a->norm1_in[l], (size_t)N, (size_t)C);
    matmul_forward(a->qkv[l], a->norm1_in[l], w->qkv_w, w->qkv_b, N, C, QKV);
    if (!gpt2) rope_apply(a->qkv[l], m->rope_cos, m->rope_sin, N, T, H, KV, hd, QKV, 0);
    attention_forward(a->attn_y[l], a->att[l], a->qkv[l], B, T, H, KV, hd);
    matmul_forward(proj, a->attn_y[l], w->attn_out_w, tp ? NULL : w->attn_out_b, N, Y, C);
    if (tp) {
        complete_rows(m, proj, res_out, (size_t)N, (size_t)C);
        if (w->attn_out_b) bias_add(res_out, w->attn_out_b, NL, C);
    }
    residual_forward(a->res_mid[l], a->res_in[l], res_out, (size_t)NL * C);
    norm_forward(m, a->norm2[l], a->norm2_mean[l], a->norm2_rstd[l], a->res_mid[l], w->norm2_w, w->norm2_b, NL);
    gather_rows(m, a->norm2[l], a->norm2_in[l], (size_t)N, (size_t)C);
    if (model_layer_is_moe(c, l)) {
        moe_forward(m, l, a->norm2_in[l], proj, B, T); /* biases inside (tp rank 0) */
    } else {
        matmul_forward(a->fc[l], a->norm2_in[l], w->fc_w, w->fc_b, N, C, F1);
        if (gpt2) gelu_forward(a->act[l], a->fc[l], (size_t)N * F);
        else swiglu_forward(a->act[l], a->fc[l], N, F);
        matmul_forward(proj, a->act[l], w->mlp_out_w, tp ? NULL : w->mlp_out_b, N, F, C);
    }
    if (tp) {
        complete_rows(m, proj, res_out, (size_t)N, (size_t)C);
        if (w->mlp_out_b) bias_add(res_out, w->mlp_out_b, NL, C);
    }
    add_inplace(res_out, a->res_mid[l], (size_t)NL * C);
}

double model_forward(Model *m, const int32_t *x, const int32_t *targets, int B, int T, double grad_scale) {
    return model_forward_stage(m, x, NULL, targets, B, T, grad_scale);
}

double model_forward_stage(Model *m, const int32_t *x, const real *input, const int32_t *targets, int B, int T,
                           double grad_scale) {
    const ModelConfig *c = &m->cfg;
    ensure_activations(m, B, T);
    int N = B * T, C = c->hidden, V = m->vocab_local;
    int NL = (int)local_rows(m, (size_t)N), row0 = m->tp.sp ? m->tp.rank * NL : 0;
    int gpt2 = c->arch == ARCH_GPT2, tp = m->tp.size > 1, sp = m->tp.sp;
    int lo = m->stage.layer_lo, hi = m->stage.layer_hi;
    Activations *a = &m->a;
    m->ready_for_backward = 0;
    m->moe_aux = 0;
    m->moe_grad_scale = grad_scale;
    m->moe_stats.forwards++;
    m->moe_seq_base = m->moe_seq0;
    m->moe_seq0 += B;
    if (!m->stage.first) {
        memcpy(a->res_in[lo], input, (size_t)NL * C * sizeof(real));
        goto layers;
    }
    memcpy(m->tokens, x, (size_t)N * sizeof(int32_t));
    HOOK(before_forward, 0);
    if (tp) { /* vocab-parallel embedding: each rank fills the rows of its tokens, then sum */
        real *partial = sp ? m->s.full : a->res_in[0];
        embedding_shard_forward(partial, x, m->p.tok_emb, m->vocab_lo, V, N, C);
        complete_rows(m, partial, a->res_in[0], (size_t)N, (size_t)C);
        if (gpt2) position_forward_add(a->res_in[0], m->p.pos_emb, row0, NL, T, C);
    } else {
        embedding_forward(a->res_in[0], x, m->p.tok_emb, gpt2 ? m->p.pos_emb : NULL, N, T, C);
    }
    HOOK(after_forward, 0);
layers:
    for (int l = lo; l < hi; l++) {
        HOOK(before_forward, unit_of_layer(m, l));
        if (unit_of_experts(m, l) >= 0) HOOK(before_forward, unit_of_experts(m, l));
        layer_forward(m, l, B, T);
        if (unit_of_experts(m, l) >= 0) HOOK(after_forward, unit_of_experts(m, l));
        HOOK(after_forward, unit_of_layer(m, l));
    }
    if (!m->stage.last) {
        m->ready_for_backward = grad_scale > 0;
        return c->aux_loss_coef * m->moe_aux; /* this stage's part of the loss (0 for dense layers) */
    }
    HOOK(before_forward, unit_head(m));
    norm_forward(m, a->normf, a->normf_mean, a->normf_rstd, a->res_out, m->p.normf_w, m->p.normf_b, NL);
    gather_rows(m, a->normf, a->normf_in, (size_t)N, (size_t)C);
    matmul_forward(a->logits, a->normf_in, m->p.lm_head, NULL, N, C, V);
    HOOK(after_forward, unit_head(m));
    if (!targets) return 0;
    memcpy(m->targets, targets, (size_t)N * sizeof(int32_t));
    double loss = tp ? vocab_parallel_cross_entropy(m, targets, N, grad_scale)
                     : cross_entropy_forward_backward(a->logits, a->losses, targets, N, V, grad_scale > 0, grad_scale);
    m->ready_for_backward = grad_scale > 0;
    return loss + c->aux_loss_coef * m->moe_aux;
}

const real *model_stage_output(const Model *m) { return m->a.res_in[m->stage.layer_hi]; }
const real *model_stage_input_grad(const Model *m) { return m->s.d_res; }

void model_backward(Model *m) { model_backward_stage(m, NULL); }

void model_backward_stage(Model *m, const real *dout_stage) {
    if (!m->ready_for_backward) myr_die("internal: model_backward without a training forward");
    const ModelConfig *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->hidden, H = m->heads_local, KV = m->kv_local, hd = C / c->heads;
    int QKV = qkv_width(m), F = m->ffn_local, F1 = fc_width(m), Y = H * hd, V = m->vocab_local;
    int NL = (int)local_rows(m, (size_t)N), row0 = m->tp.sp ? m->tp.rank * NL : 0;
    int gpt2 = c->arch == ARCH_GPT2, tp = m->tp.size > 1, sp = m->tp.sp;
    Activations *a = &m->a;
    GradScratch *s = &m->s;
    ModelTensors *g = &m->g;
    int lo = m->stage.layer_lo, hi = m->stage.layer_hi;
    if (!m->stage.last) {
        memcpy(s->d_res, dout_stage, (size_t)NL * C * sizeof(real));
        goto layers;
    }
    HOOK(before_backward, unit_head(m));
    matmul_backward(s->d_norm, g->lm_head, NULL, a->logits, a->normf_in, m->p.lm_head, N, C, V, 0);
    complete_rows(m, s->d_norm, s->d_norm_local, (size_t)N, (size_t)C); /* column-parallel input gradient */
    dev_zero(s->d_res, (size_t)NL * C);
    norm_backward(m, s->d_res, g->normf_w, g->normf_b, s->d_norm_local, a->res_out, m->p.normf_w, a->normf_mean,
                  a->normf_rstd, NL);
    sum_replicated_grads(m, unit_head(m));
    HOOK(after_backward, unit_head(m));
layers:
    for (int l = hi - 1; l >= lo; l--) {
        int moe = unit_of_experts(m, l) >= 0;
        HOOK(before_backward, unit_of_layer(m, l));
        if (moe) HOOK(before_backward, unit_of_experts(m, l));
        const LayerTensors *w = &m->p.layer[l];
        LayerTensors *gw = &g->layer[l];
        /* recomputation: full rebuilds the layer's activations from its kept input (rewriting
         * the next layer's input with the same values); selective rebuilds the attention
         * probabilities only */
        if (m->recompute == RECOMPUTE_FULL) {
            m->moe_recomputing = 1;
            layer_forward(m, l, B, T);
            m->moe_recomputing = 0;
        } else if (m->recompute == RECOMPUTE_SELECTIVE)
            attention_forward(a->attn_y[l], a->att[l], a->qkv[l], B, T, H, KV, hd);
        /* d_res holds d(layer output) = d(res_mid) via the skip and d(mlp output); a row-parallel
         * bias saw this rank's rows only under sequence parallelism */
        real *dout = gather_rows(m, s->d_res, s->full, (size_t)N, (size_t)C);
        if (moe) {
            moe_backward(m, l, a->norm2_in[l], dout, s->d_norm);
            HOOK(after_backward, unit_of_experts(m, l)); /* the experts' gradients are final */
        } else {
            matmul_backward(s->d_act, gw->mlp_out_w, sp ? NULL : gw->mlp_out_b, dout, a->act[l], w->mlp_out_w, N, F, C,
                            0);
            if (sp && gw->mlp_out_b) bias_backward(gw->mlp_out_b, s->d_res, NL, C);
            if (gpt2) gelu_backward(s->d_fc, a->fc[l], s->d_act, (size_t)N * F);
            else swiglu_backward(s->d_fc, a->fc[l], s->d_act, N, F);
            matmul_backward(s->d_norm, gw->fc_w, gw->fc_b, s->d_fc, a->norm2_in[l], w->fc_w, N, C, F1, 0);
        }
        complete_rows(m, s->d_norm, s->d_norm_local, (size_t)N, (size_t)C);
        norm_backward(m, s->d_res, gw->norm2_w, gw->norm2_b, s->d_norm_local, a->res_mid[l], w->norm2_w,
                      a->norm2_mean[l], a->norm2_rstd[l], NL);
        /* d_res now holds d(res_mid) = d(layer input) via the skip and d(attention output) */
        dout = gather_rows(m, s->d_res, s->full, (size_t)N, (size_t)C);
        matmul_backward(s->d_attn_y, gw->attn_out_w, sp ? NULL : gw->attn_out_b, dout, a->attn_y[l], w->attn_out_w,
                        N, Y, C, 0);
        if (sp && gw->attn_out_b) bias_backward(gw->attn_out_b, s->d_res, NL, C);
        attention_backward(s->d_qkv, s->d_attn_y, a->qkv[l], a->att[l], B, T, H, KV, hd);
        if (!gpt2) rope_apply(s->d_qkv, m->rope_cos, m->rope_sin, N, T, H, KV, hd, QKV, 1);
        matmul_backward(s->d_norm, gw->qkv_w, gw->qkv_b, s->d_qkv, a->norm1_in[l], w->qkv_w, N, C, QKV, 0);
        complete_rows(m, s->d_norm, s->d_norm_local, (size_t)N, (size_t)C);
        norm_backward(m, s->d_res, gw->norm1_w, gw->norm1_b, s->d_norm_local, a->res_in[l], w->norm1_w,
                      a->norm1_mean[l], a->norm1_rstd[l], NL);
        sum_replicated_grads(m, unit_of_layer(m, l));
        HOOK(after_backward, unit_of_layer(m, l));
    }
    if (!m->stage.first) { /* d_res now holds d(stage input): the previous stage's dout */
        m->ready_for_backward = 0;
        return;
    }
    HOOK(before_backward, 0);
    if (tp) {
        real *dout = gather_rows(m, s->d_res, s->full, (size_t)N, (size_t)C);
        embedding_shard_backward(g->tok_emb, dout, m->tokens, m->vocab_lo, V, N, C);
        if (gpt2) position_backward(g->pos_emb, s->d_res, row0, NL, T, C);
    } else {
        embedding_backward(g->tok_emb, gpt2 ? g->pos_emb : NULL, s->d_res, m->tokens, N, T, C);
    }
    sum_replicated_grads(m, 0);
    HOOK(after_backward, 0);
    m->ready_for_backward = 0;
}

void model_copy_shards(Model *m, Model *whole, int to_local) {
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        if (p->tied_copy && !to_local) continue; /* the first stage's tok_emb is the one saved */
        const ParamInfo *w = param_table_find(&whole->table, p->tied_copy ? "tok_emb" : p->name);
        param_shard_copy(&m->cfg, p, m->tp.size, m->tp.rank, whole->params + w->offset, m->params + p->offset,
                         to_local);
    }
}

void model_zero_grad(Model *m) { dev_zero(m->grads, m->table.total); }

double model_flops_per_token(const ModelConfig *c, int T) {
    double C = c->hidden, L = c->layers;
    double matmul_params = C * c->vocab;
    for (int l = 0; l < c->layers; l++) {
        matmul_params += C * full_qkv_width(c) + C * C;
        if (!model_layer_is_moe(c, l)) {
            matmul_params += C * full_fc_width(c) + (double)c->ffn * C;
            continue;
        }
        /* a token runs its k experts and the shared ones (the active parameters), and the router */
        double Fe = model_expert_ffn(c), per = C * (c->arch == ARCH_GPT2 ? Fe : 2 * Fe) + Fe * C;
        matmul_params += (c->top_k + c->shared_experts) * per + C * c->experts;
    }
    return 6.0 * matmul_params + 6.0 * L * T * C; /* causal attention: half of 12·L·T·C */
}
