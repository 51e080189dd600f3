/* model.c: forward and backward of the transformer over flat buffers. */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/moe.h"
#include "model/ring_attention.h"
#include "model/weight_init.h"
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
    if (model_plan_ep(m, cfg, unit_align, tp, tp_rank, ep, ep_rank, st)) return -1;
    model_alloc(m);
    return 0;
}

int model_plan_ep(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank, int ep, int ep_rank,
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
    m->vocab_lo = model_vocab_lo(cfg, tp, tp_rank);
    m->vocab_local = model_vocab_count(cfg, tp, tp_rank);
    m->vocab_rows = model_vocab_rows(cfg, tp, tp_rank);
    if (st->layer_lo < 0 || st->layer_hi > cfg->layers || st->layer_lo > st->layer_hi)
        return myr_error("stage layers [%d, %d) are outside the model's %d layers", st->layer_lo, st->layer_hi,
                         cfg->layers);
    m->stage = *st;
    m->ep.size = ep;
    m->ep.rank = ep_rank;
    if (cfg->experts) m->moe_stats.tokens = calloc((size_t)cfg->layers * cfg->experts, sizeof(int64_t));
    if (kernels_dtype() != DTYPE_F32 && cfg->experts && (cfg->hidden * act_size()) % 4)
        return myr_error("--dtype %s with experts needs an even hidden size (token rows travel as 32-bit words)",
                         dtype_name(kernels_dtype()));
    param_table_build_ep(&m->table, cfg, unit_align, tp, tp_rank, ep, ep_rank, st);
    return 0;
}

size_t model_weight_bytes(const Model *m) {
    return m->table.total * (2 * sizeof(real) + (kernels_dtype() != DTYPE_F32 ? act_size() : 0));
}

void model_alloc(Model *m) { model_alloc_parts(m, 1, 1); }

void model_alloc_parts(Model *m, int params, int grads) {
    const ModelConfig *cfg = &m->cfg;
    m->params = params ? dev_alloc(m->table.total) : NULL;
    m->grads = grads ? dev_alloc(m->table.total) : NULL;
    model_tensors_bind(&m->p, &m->table, cfg, m->params);
    model_tensors_bind(&m->g, &m->table, cfg, m->grads);
    if (kernels_dtype() != DTYPE_F32) {
        m->lowp = 1;
        m->lp = params ? dev_alloc_act(m->table.total) : NULL;
        model_tensors_bind_act(&m->w, &m->table, cfg, m->lp);
    }
    if (cfg->arch == ARCH_LLAMA) {
        int hd = cfg->hidden / cfg->heads;
        m->rope_cos = dev_alloc((size_t)cfg->max_seq * hd / 2);
        m->rope_sin = dev_alloc((size_t)cfg->max_seq * hd / 2);
        float *inv_freq = malloc((size_t)hd / 2 * sizeof(float));
        model_rope_inv_freq(cfg, cfg->max_seq, inv_freq);
        rope_tables(m->rope_cos, m->rope_sin, cfg->max_seq, hd, inv_freq);
        free(inv_freq);
    }
}

struct ActivationSlot {
    int B, T;
    void *acts_mem;
    size_t acts_bytes;
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
    real **reals[] = {a->res_in, a->norm1_mean, a->norm1_rstd, a->att, a->res_mid, a->norm2_mean, a->norm2_rstd};
    act **acts[] = {a->norm1, a->norm1_in, a->qkv, a->attn_y, a->norm2, a->norm2_in, a->fc, a->fc_act};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) free(reals[i]);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) free(acts[i]);
    memset(a, 0, sizeof *a);
    dev_free(m->tokens);
    dev_free(m->targets);
    m->tokens = m->targets = NULL;
    m->B = m->T = 0;
}

static void save_slot(Model *m, struct ActivationSlot *s) {
    *s = (struct ActivationSlot){m->B, m->T, m->acts_mem, m->acts_bytes, m->a, m->tokens, m->targets,
                                 m->ready_for_backward};
}

static void load_slot(Model *m, const struct ActivationSlot *s) {
    m->B = s->B;
    m->T = s->T;
    m->acts_mem = s->acts_mem;
    m->acts_bytes = s->acts_bytes;
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
    host_free_pinned(m->staging);
    dev_free(m->params);
    dev_free(m->grads);
    dev_free(m->lp);
    if (m->lowp) model_tensors_free(&m->w);
    dev_free(m->rope_cos);
    dev_free(m->rope_sin);
    ring_attention_free(m);
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

real *model_params_view(const Model *m) {
    if (dev_host_accessible()) return m->params;
    real *h = malloc((m->table.total ? m->table.total : 1) * sizeof(real));
    model_params_to_host(m, h);
    return h;
}

void model_params_view_done(Model *m, real *view, int write_back) {
    if (view == m->params) return;
    if (write_back) model_params_from_host(m, view);
    free(view);
}

void model_params_to_host(const Model *m, real *host) {
    dev_to_host(host, m->params, m->table.total * sizeof(real));
}

void model_params_from_host(Model *m, const real *host) {
    host_to_dev(m->params, host, m->table.total * sizeof(real));
}

void model_init_weights(Model *m, uint64_t seed) {
    WeightInit *w;
    if (weight_init_create(&w, &m->cfg, seed)) myr_die_last();
    real *image = model_params_view(m);
    if (param_table_boxes(&m->cfg, &m->table, m->tp.size, m->tp.rank, image, 0, weight_init_box, w)) myr_die_last();
    model_params_view_done(m, image, 1);
    weight_init_free(w);
}

/* rows of the residual stream this rank holds */
static size_t local_rows(const Model *m, size_t N) { return m->tp.sp ? N / (size_t)m->tp.size : N; }

size_t model_local_rows(const Model *m, size_t N) { return local_rows(m, cp_splits(m) ? N / (size_t)m->cp.size : N); }

/* Whether the layers share one buffer of what attention saves: under full recomputation (each
 * layer is rebuilt), and selective (attention is rebuilt) except under context parallelism,
 * whose ring keeps only the log-sum-exp per layer and does not rebuild it. */
static int shares_saved_attention(const Model *m) {
    return m->recompute == RECOMPUTE_FULL || (m->recompute == RECOMPUTE_SELECTIVE && !ring_used(m));
}

/* What attention keeps per layer for backward: the backend's (attention_saved_count), or under
 * context parallelism the ring's log-sum-exp [B, H, T] (T local rows). */
static size_t saved_attention(const Model *m, int B, int T) {
    return ring_used(m) ? (size_t)B * m->heads_local * T : attention_saved_count(B, T, m->heads_local);
}

/* Element counts of one slot's stored activations, by type (real: the residual stream and
 * statistics; act: the rest) and of the shared scratch. */
typedef struct {
    size_t reals, acts;
} Counts;

static Counts activation_counts(const Model *m, int B, int T) {
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, NL = local_rows(m, N), C = c->hidden, Y = (size_t)m->heads_local * (C / c->heads);
    size_t gathered = m->tp.sp ? N * C : 0; /* norm*_in */
    size_t att = saved_attention(m, B, T);
    /* per layer, real: res_mid, norm means / rstds; act: norm1, norm2 (+ gathered), attn_y, qkv, fc, fc_act */
    size_t rest_r = NL * C + NL * 4;
    size_t rest_a = NL * C * 2 + 2 * gathered + N * Y + N * qkv_width(m) + N * fc_width(m) + N * m->ffn_local;
    size_t L = (size_t)(m->stage.layer_hi - m->stage.layer_lo);
    Counts k;
    if (m->recompute == RECOMPUTE_FULL) { /* inputs + one layer's worth */
        k.reals = L * NL * C + rest_r + att;
        k.acts = rest_a;
    } else if (m->recompute == RECOMPUTE_SELECTIVE) {
        k.reals = L * (NL * C + rest_r) + (shares_saved_attention(m) ? att : L * att);
        k.acts = L * rest_a;
    } else {
        k.reals = L * (NL * C + rest_r + att);
        k.acts = L * rest_a;
    }
    k.reals += NL * C; /* the stage's output (the last layer's res_out) */
    if (m->stage.last) {
        k.reals += NL * 2 + N;                    /* normf mean / rstd, losses */
        k.acts += NL * C + gathered + N * (size_t)m->vocab_rows; /* normf (+ gathered), logits (padded rows) */
    }
    return k;
}

/* Bytes of n elements of `size` bytes, rounded up to 64 so every buffer carved from one
 * allocation stays aligned for vector loads whatever the element size. */
static size_t carve(size_t n, size_t size) { return (n * size + 63) / 64 * 64; }

/* B x T local rows */
static size_t activation_bytes(const Model *m, int B, int T) {
    Counts k = activation_counts(m, B, T);
    /* each layer's buffers are carved apart: allow the alignment of every one */
    size_t L = (size_t)(m->stage.layer_hi - m->stage.layer_lo) + 2, pieces = 16 * L;
    return k.reals * sizeof(real) + k.acts * act_size() + pieces * 64;
}

size_t model_activation_bytes(const Model *m, int B, int T) {
    return activation_bytes(m, B, cp_splits(m) ? T / m->cp.size : T);
}

static Counts scratch_counts(const Model *m, int B, int T) {
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, NL = local_rows(m, N), C = c->hidden, Y = (size_t)m->heads_local * (C / c->heads);
    int sp = m->tp.sp;
    Counts k;
    k.reals = NL * C + N * C + (sp ? NL * C + N * C : 0); /* d_res, d_norm, d_norm_local, full */
    k.acts = N * Y + N * qkv_width(m) + N * fc_width(m) + N * m->ffn_local + (m->lowp ? N * C : 0);
    return k;
}

static size_t scratch_bytes(const Model *m, int B, int T) {
    Counts k = scratch_counts(m, B, T);
    return k.reals * sizeof(real) + k.acts * act_size() + 16 * 64;
}

/* the shared scratch, plus the ring's buffers under context parallelism (allocated on first use) */
size_t model_scratch_bytes(const Model *m, int B, int T) {
    if (!ring_used(m)) return scratch_bytes(m, B, T);
    int Tl = cp_splits(m) ? T / m->cp.size : T, hd = m->cfg.hidden / m->cfg.heads;
    return scratch_bytes(m, B, Tl) + ring_attention_scratch_bytes(B, Tl, m->heads_local, m->kv_local, hd);
}

static void ensure_activations(Model *m, int B, int T) {
    if (m->B == B && m->T == T) return;
    free_activations(m);
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, NL = local_rows(m, N), C = c->hidden, L = c->layers, QKV = qkv_width(m);
    size_t F1 = fc_width(m), F = m->ffn_local, Y = (size_t)m->heads_local * (C / c->heads);
    size_t A = act_size(), ATT = saved_attention(m, B, T);
    int sp = m->tp.sp, lo = m->stage.layer_lo, hi = m->stage.layer_hi;
    m->acts_bytes = activation_bytes(m, B, T);
    m->acts_mem = dev_alloc_bytes(m->acts_bytes);
    Activations *a = &m->a;
    char *p = m->acts_mem, *end = p + m->acts_bytes;
#define TAKE_R(n) (real *)(p += carve((n), sizeof(real)), p - carve((n), sizeof(real)))
#define TAKE_A(n) (act *)(p += carve((n), A), p - carve((n), A))
#define ARR(field) a->field = calloc(L + 1, sizeof *a->field)
    ARR(res_in); ARR(norm1); ARR(norm1_mean); ARR(norm1_rstd); ARR(norm1_in); ARR(qkv); ARR(att); ARR(attn_y);
    ARR(res_mid); ARR(norm2); ARR(norm2_mean); ARR(norm2_rstd); ARR(norm2_in); ARR(fc); ARR(fc_act);
#undef ARR
    a->moe = calloc(L + 1, sizeof(struct MoeActs *));
    real *shared_att = shares_saved_attention(m) ? TAKE_R(ATT) : NULL;
    /* res_in[l] for l in [lo, hi]: each layer's input, and res_in[hi] the stage's output */
    for (int l = lo; l <= hi; l++) a->res_in[l] = TAKE_R(NL * C);
    for (int l = lo; l < hi; l++) {
        if (m->recompute == RECOMPUTE_FULL && l > lo) { /* every layer shares the first layer's buffers */
            a->norm1[l] = a->norm1[lo]; a->norm1_in[l] = a->norm1_in[lo]; a->norm1_mean[l] = a->norm1_mean[lo];
            a->norm1_rstd[l] = a->norm1_rstd[lo]; a->qkv[l] = a->qkv[lo]; a->att[l] = a->att[lo];
            a->attn_y[l] = a->attn_y[lo]; a->res_mid[l] = a->res_mid[lo]; a->norm2[l] = a->norm2[lo];
            a->norm2_in[l] = a->norm2_in[lo]; a->norm2_mean[l] = a->norm2_mean[lo]; a->norm2_rstd[l] = a->norm2_rstd[lo];
            a->fc[l] = a->fc[lo]; a->fc_act[l] = a->fc_act[lo];
            continue;
        }
        a->norm1[l] = TAKE_A(NL * C);
        a->norm1_in[l] = sp ? TAKE_A(N * C) : a->norm1[l];
        a->norm1_mean[l] = TAKE_R(NL);
        a->norm1_rstd[l] = TAKE_R(NL);
        a->qkv[l] = TAKE_A(N * QKV);
        a->att[l] = shared_att ? shared_att : TAKE_R(ATT);
        a->attn_y[l] = TAKE_A(N * Y);
        a->res_mid[l] = TAKE_R(NL * C);
        a->norm2[l] = TAKE_A(NL * C);
        a->norm2_in[l] = sp ? TAKE_A(N * C) : a->norm2[l];
        a->norm2_mean[l] = TAKE_R(NL);
        a->norm2_rstd[l] = TAKE_R(NL);
        a->fc[l] = TAKE_A(N * F1);
        a->fc_act[l] = TAKE_A(N * F);
    }
    a->res_out = a->res_in[hi];
    if (m->stage.last) {
        a->normf = TAKE_A(NL * C);
        a->normf_in = sp ? TAKE_A(N * C) : a->normf;
        a->normf_mean = TAKE_R(NL);
        a->normf_rstd = TAKE_R(NL);
        a->logits = TAKE_A(N * (size_t)m->vocab_rows);
        a->losses = TAKE_R(N);
    }
    if (p > end) myr_die("internal: activations overrun their allocation by %zu bytes", (size_t)(p - end));
    m->live_slots++;
    if (m->live_slots > m->peak_live_slots) m->peak_live_slots = m->live_slots;
    m->tokens = dev_alloc_bytes(N * sizeof(int32_t));
    m->targets = dev_alloc_bytes(N * sizeof(int32_t));
    if (N > m->staging_n) { /* shared by the slots (see tokens_to_device) */
        host_free_pinned(m->staging);
        m->staging = host_alloc_pinned(2 * N * sizeof(int32_t));
        m->staging_n = N;
    }
    m->B = B;
    m->T = T;
    if (m->scratch_B == B && m->scratch_T == T) return; /* scratch is shared by all slots */
    dev_free(m->scratch_mem);
    m->scratch_bytes = scratch_bytes(m, B, T);
    m->scratch_mem = dev_alloc_bytes(m->scratch_bytes);
    m->scratch_B = B;
    m->scratch_T = T;
    p = m->scratch_mem, end = p + m->scratch_bytes;
    m->s.d_res = TAKE_R(NL * C);
    m->s.d_norm = TAKE_R(N * C);
    m->s.d_norm_local = sp ? TAKE_R(NL * C) : m->s.d_norm;
    m->s.full = sp ? TAKE_R(N * C) : NULL;
    m->s.d_attn_y = TAKE_A(N * Y);
    m->s.d_qkv = TAKE_A(N * QKV);
    m->s.d_fc = TAKE_A(N * F1);
    m->s.d_act = TAKE_A(N * F);
    m->s.dres_act = m->lowp ? TAKE_A(N * C) : NULL;
    if (p > end) myr_die("internal: scratch overruns its allocation by %zu bytes", (size_t)(p - end));
#undef TAKE_R
#undef TAKE_A
}

#define WT(field) MODEL_WT(m, field)

/* bf16 runs: round unit u's master weights into the working copy, just before the unit's
 * forward, as autocast casts weights at each use. The copy stays valid through the step's
 * backward: weights change only in the update. (ZeRO-3 has no whole working copy, m->lp NULL:
 * the hooks round each unit as they gather it, for forward and again for backward.) */
static void refresh_weights(Model *m, int unit) {
    if (!m->lp) return;
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        if (p->unit == unit) act_from_f32(act_at(m->lp, p->offset), model_tensors_get(&m->p, p), p->numel);
    }
}

/* The residual-stream gradient `dout` [n, C] as the act operand of the GEMMs that read it:
 * itself in fp32 runs, else rounded into the scratch copy. */
static const act *dres_as_act(Model *m, const real *dout, size_t n) {
    if (!m->lowp) return (const act *)dout;
    act_from_f32(m->s.dres_act, dout, n);
    return m->s.dres_act;
}

static void norm_forward(const Model *m, act *out, real *mean, real *rstd, const real *inp, const real *w,
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
static act *gather_rows(Model *m, act *local, act *full, size_t N, size_t C) {
    if (!m->tp.sp) return local;
    m->tp.all_gather(m->tp.ctx, local, full, local_rows(m, N) * C, act_size());
    return full;
}

/* The residual gradient as the act operand of the row-parallel backward GEMMs, which read all N
 * rows: under sequence parallelism gathered (fp32 runs: into s.full; bf16 runs: each rank rounds
 * its rows into its place in dres_act, gathered in place). */
static const act *gather_dres(Model *m, size_t N, size_t C) {
    size_t n = local_rows(m, N) * C;
    if (!m->tp.sp) return dres_as_act(m, m->s.d_res, n);
    if (!m->lowp) {
        m->tp.all_gather(m->tp.ctx, m->s.d_res, m->s.full, n, sizeof(real));
        return (const act *)m->s.full;
    }
    act *mine = act_at(m->s.dres_act, (size_t)m->tp.rank * n);
    act_from_f32(mine, m->s.d_res, n);
    m->tp.all_gather(m->tp.ctx, mine, m->s.dres_act, n, act_size());
    return m->s.dres_act;
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
 * and the target's logit are combined across the group exactly (doubles, on the host), so every
 * rank gets the loss of the whole vocabulary without any rank holding all logits. */
static double vocab_parallel_cross_entropy(Model *m, int N, double grad_scale) {
    act *z = m->a.logits;
    int V = m->vocab_local, ld = m->vocab_rows;
    size_t bytes = (size_t)N * sizeof(double);
    double *mx = malloc(bytes), *sum = malloc(bytes), *zt = malloc(bytes);
    double *d = dev_alloc_bytes(3 * bytes), *dmx = d, *dsum = d + N, *dzt = d + 2 * (size_t)N;
    vocab_shard_row_max(z, N, V, ld, dmx);
    dev_to_host(mx, dmx, bytes);
    m->tp.sum_exact(m->tp.ctx, mx, (size_t)N, 1);
    host_to_dev(dmx, mx, bytes);
    vocab_shard_row_sumexp(z, N, V, ld, dmx, dsum);
    vocab_shard_target_logit(z, m->targets, m->vocab_lo, N, V, ld, dzt);
    dev_to_host(sum, dsum, bytes);
    dev_to_host(zt, dzt, bytes);
    m->tp.sum_exact(m->tp.ctx, sum, (size_t)N, 0);
    m->tp.sum_exact(m->tp.ctx, zt, (size_t)N, 0);
    host_to_dev(dsum, sum, bytes);
    host_to_dev(dzt, zt, bytes);
    double loss = vocab_shard_losses(m->a.losses, dmx, dsum, dzt, N);
    if (grad_scale > 0) vocab_shard_grad(z, m->targets, m->vocab_lo, N, V, ld, dmx, dsum, grad_scale / N);
    dev_free(d);
    free(mx);
    free(sum);
    free(zt);
    return loss;
}

/* Position-dependent steps. Row n of a sequence of T rows has position n, except under context
 * parallelism, where this rank's rows are two chunks of consecutive positions, and with packed
 * documents, whose positions restart at each document (ring_attention.h's ring_prepare): each run
 * of consecutive positions is one call. */
static void add_positions(Model *m, real *out, const real *pos, int row0, int n, int T, int C) {
    if (!ring_used(m)) {
        position_forward_add(out, pos, row0, n, T, C);
        return;
    }
    for (int j = row0, k, p0; j < row0 + n; j += k) {
        k = cp_position_run(m, j, row0 + n, &p0);
        position_forward_add(out + (size_t)(j - row0) * C, pos + (size_t)p0 * C, 0, k, k, C);
    }
}

static void position_grads(Model *m, real *dpos, const real *dout, int row0, int n, int T, int C) {
    if (!ring_used(m)) {
        position_backward(dpos, dout, row0, n, T, C);
        return;
    }
    for (int j = row0, k, p0; j < row0 + n; j += k) {
        k = cp_position_run(m, j, row0 + n, &p0);
        position_backward(dpos + (size_t)p0 * C, dout + (size_t)(j - row0) * C, 0, k, k, C);
    }
}

static void rope(Model *m, act *qkv, int N, int T, int H, int KV, int hd, int QKV, int inverse) {
    if (!ring_used(m)) {
        rope_apply(qkv, m->rope_cos, m->rope_sin, N, T, H, KV, hd, QKV, inverse);
        return;
    }
    size_t half = (size_t)hd / 2;
    for (int j = 0, k, p0; j < N; j += k) {
        k = cp_position_run(m, j, N, &p0);
        rope_apply(act_at(qkv, (size_t)j * QKV), m->rope_cos + p0 * half, m->rope_sin + p0 * half, k, k, H, KV, hd, QKV,
                   inverse);
    }
}

static void attention_fwd(Model *m, int l, int B, int T, int H, int KV, int hd) {
    Activations *a = &m->a;
    if (ring_used(m)) ring_attention_forward(m, a->attn_y[l], a->att[l], a->qkv[l], B, T, H, KV, hd);
    else attention_forward(a->attn_y[l], a->att[l], a->qkv[l], B, T, H, KV, hd);
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
    /* row-parallel outputs land in `proj` (all N rows, fp32), are completed into `res_out` (this
     * rank's rows) and the residual is added there */
    real *proj = sp ? m->s.full : res_out;
    norm_forward(m, a->norm1[l], a->norm1_mean[l], a->norm1_rstd[l], a->res_in[l], w->norm1_w, w->norm1_b, NL);
    gather_rows(m, a->norm1[l], a->norm1_in[l], (size_t)N, (size_t)C);
    matmul_forward(a->qkv[l], 0, a->norm1_in[l], WT(layer[l].qkv_w), w->qkv_b, N, C, QKV);
    if (!gpt2) rope(m, a->qkv[l], N, T, H, KV, hd, QKV, 0);
    attention_fwd(m, l, B, T, H, KV, hd);
    matmul_forward(proj, 1, a->attn_y[l], WT(layer[l].attn_out_w), tp ? NULL : w->attn_out_b, N, Y, C);
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
        matmul_forward(a->fc[l], 0, a->norm2_in[l], WT(layer[l].fc_w), w->fc_b, N, C, F1);
        if (gpt2) gelu_forward(a->fc_act[l], a->fc[l], (size_t)N * F);
        else swiglu_forward(a->fc_act[l], a->fc[l], N, F);
        matmul_forward(proj, 1, a->fc_act[l], WT(layer[l].mlp_out_w), tp ? NULL : w->mlp_out_b, N, F, C);
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

/* Tokens (or targets) of the running forward to the device: through the model's pinned staging
 * buffer, asynchronously. It is written again only by the next forward, and every forward ends
 * with a read that waits for the device (the loss on the last stage, the copy of the stage output
 * on the others), so the copy has completed by then. */
static void tokens_to_device(int32_t *dev, int32_t *staging, const int32_t *host, size_t n) {
    memcpy(staging, host, n * sizeof(int32_t));
    host_to_dev_async(dev, staging, n * sizeof(int32_t));
}

double model_forward_stage(Model *m, const int32_t *x, const real *input, const int32_t *targets, int B, int T,
                           double grad_scale) {
    const ModelConfig *c = &m->cfg;
    if (cp_splits(m)) { /* from here on T is this rank's rows of each sequence: its two chunks */
        if (T % (2 * m->cp.size))
            myr_die("--cp %d needs the sequence length %d divisible by 2 x cp = %d (each sequence is cut into 2 x cp "
                    "chunks); choose --seq accordingly", m->cp.size, T, 2 * m->cp.size);
        T /= m->cp.size;
    }
    if (ring_used(m)) {
        if (T % 2) myr_die("--doc-mask needs an even sequence length (got %d)", T);
        if (m->doc_mask && !x) myr_die("internal: --doc-mask forward without the batch's tokens");
        ring_prepare(m, x, B, T);
    }
    if (cp_splits(m)) {
        if (m->stage.first) x = cp_local_tokens(m, x, B, T, 0);
        if (targets) targets = cp_local_tokens(m, targets, B, T, 1);
    }
    ensure_activations(m, B, T);
    /* V tokens of this rank in Vr rows of the head (a padded vocabulary: Vr > V) */
    int N = B * T, C = c->hidden, V = m->vocab_local, Vr = m->vocab_rows;
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
        host_to_dev(a->res_in[lo], input, (size_t)NL * C * sizeof(real));
        goto layers;
    }
    tokens_to_device(m->tokens, m->staging, x, (size_t)N);
    HOOK(before_forward, 0);
    refresh_weights(m, 0);
    if (tp) { /* vocab-parallel embedding: each rank fills the rows of its tokens, then sum */
        real *partial = sp ? m->s.full : a->res_in[0];
        embedding_shard_forward(partial, m->tokens, m->p.tok_emb, m->vocab_lo, V, N, C);
        complete_rows(m, partial, a->res_in[0], (size_t)N, (size_t)C);
        if (gpt2) add_positions(m, a->res_in[0], m->p.pos_emb, row0, NL, T, C);
    } else if (ring_used(m)) {
        embedding_forward(a->res_in[0], m->tokens, m->p.tok_emb, NULL, N, T, C);
        if (gpt2) add_positions(m, a->res_in[0], m->p.pos_emb, 0, N, T, C);
    } else {
        embedding_forward(a->res_in[0], m->tokens, m->p.tok_emb, gpt2 ? m->p.pos_emb : NULL, N, T, C);
    }
    HOOK(after_forward, 0);
layers:
    for (int l = lo; l < hi; l++) {
        HOOK(before_forward, unit_of_layer(m, l));
        refresh_weights(m, unit_of_layer(m, l));
        if (unit_of_experts(m, l) >= 0) {
            HOOK(before_forward, unit_of_experts(m, l));
            refresh_weights(m, unit_of_experts(m, l));
        }
        layer_forward(m, l, B, T);
        if (unit_of_experts(m, l) >= 0) HOOK(after_forward, unit_of_experts(m, l));
        HOOK(after_forward, unit_of_layer(m, l));
    }
    if (!m->stage.last) {
        m->ready_for_backward = grad_scale > 0;
        return c->aux_loss_coef * m->moe_aux; /* this stage's part of the loss (0 for dense layers) */
    }
    HOOK(before_forward, unit_head(m));
    refresh_weights(m, unit_head(m));
    norm_forward(m, a->normf, a->normf_mean, a->normf_rstd, a->res_out, m->p.normf_w, m->p.normf_b, NL);
    gather_rows(m, a->normf, a->normf_in, (size_t)N, (size_t)C);
    lm_head_forward(a->logits, a->normf_in, WT(lm_head), N, C, V, Vr); /* padding columns: 0 */
    HOOK(after_forward, unit_head(m));
    if (!targets) {
        dev_sync(); /* the logits are read next anyway; and the staging buffer is free again */
        return 0;
    }
    tokens_to_device(m->targets, m->staging + N, targets, (size_t)N);
    double loss = tp ? vocab_parallel_cross_entropy(m, N, grad_scale)
                     : cross_entropy_forward_backward(a->logits, a->losses, m->targets, N, V, Vr, grad_scale > 0,
                                                      grad_scale);
    m->ready_for_backward = grad_scale > 0;
    return loss + c->aux_loss_coef * m->moe_aux;
}

void model_stage_output_to_host(const Model *m, real *host) {
    size_t n = local_rows(m, (size_t)m->B * m->T) * (size_t)m->cfg.hidden;
    dev_to_host(host, m->a.res_in[m->stage.layer_hi], n * sizeof(real));
}

void model_stage_input_grad_to_host(const Model *m, real *host) {
    size_t n = local_rows(m, (size_t)m->B * m->T) * (size_t)m->cfg.hidden;
    dev_to_host(host, m->s.d_res, n * sizeof(real));
}

void model_logits_to_host(const Model *m, float *host) {
    size_t rows = (size_t)m->B * m->T, V = (size_t)m->vocab_local, ld = (size_t)m->vocab_rows;
    if (ld == V) {
        act_to_host_f32(host, m->a.logits, rows * V);
        return;
    }
    for (size_t r = 0; r < rows; r++) act_to_host_f32(host + r * V, act_at(m->a.logits, r * ld), V);
}

void model_backward(Model *m) { model_backward_stage(m, NULL); }

void model_backward_stage(Model *m, const real *dout_stage) {
    if (!m->ready_for_backward) myr_die("internal: model_backward without a training forward");
    const ModelConfig *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->hidden, H = m->heads_local, KV = m->kv_local, hd = C / c->heads;
    int QKV = qkv_width(m), F = m->ffn_local, F1 = fc_width(m), Y = H * hd, V = m->vocab_local, Vr = m->vocab_rows;
    int NL = (int)local_rows(m, (size_t)N), row0 = m->tp.sp ? m->tp.rank * NL : 0;
    int gpt2 = c->arch == ARCH_GPT2, tp = m->tp.size > 1, sp = m->tp.sp;
    Activations *a = &m->a;
    GradScratch *s = &m->s;
    ModelTensors *g = &m->g;
    int lo = m->stage.layer_lo, hi = m->stage.layer_hi;
    if (!m->stage.last) {
        host_to_dev(s->d_res, dout_stage, (size_t)NL * C * sizeof(real));
        goto layers;
    }
    HOOK(before_backward, unit_head(m));
    /* the padding columns of dlogits are 0: their lm_head rows get no gradient */
    lm_head_backward(s->d_norm, g->lm_head, a->logits, a->normf_in, WT(lm_head), N, C, V, Vr);
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
         * the next layer's input with the same values); selective rebuilds what attention saves */
        if (m->recompute == RECOMPUTE_FULL) {
            m->moe_recomputing = 1;
            layer_forward(m, l, B, T);
            m->moe_recomputing = 0;
        } else if (m->recompute == RECOMPUTE_SELECTIVE && !ring_used(m)) /* the ring keeps only the lse: nothing to rebuild */
            attention_forward(a->attn_y[l], a->att[l], a->qkv[l], B, T, H, KV, hd);
        /* d_res holds d(layer output) = d(res_mid) via the skip and d(mlp output); a row-parallel
         * bias saw this rank's rows only under sequence parallelism */
        const act *dout = gather_dres(m, (size_t)N, (size_t)C);
        if (moe) {
            moe_backward(m, l, a->norm2_in[l], dout, s->d_norm);
            HOOK(after_backward, unit_of_experts(m, l)); /* the experts' gradients are final */
        } else {
            matmul_backward(s->d_act, 0, gw->mlp_out_w, sp ? NULL : gw->mlp_out_b, dout, a->fc_act[l],
                            WT(layer[l].mlp_out_w), N, F, C, 0);
            if (sp && gw->mlp_out_b) bias_backward(gw->mlp_out_b, s->d_res, NL, C);
            if (gpt2) gelu_backward(s->d_fc, a->fc[l], s->d_act, (size_t)N * F);
            else swiglu_backward(s->d_fc, a->fc[l], s->d_act, N, F);
            matmul_backward(s->d_norm, 1, gw->fc_w, gw->fc_b, s->d_fc, a->norm2_in[l], WT(layer[l].fc_w), N, C, F1, 0);
        }
        complete_rows(m, s->d_norm, s->d_norm_local, (size_t)N, (size_t)C);
        norm_backward(m, s->d_res, gw->norm2_w, gw->norm2_b, s->d_norm_local, a->res_mid[l], w->norm2_w,
                      a->norm2_mean[l], a->norm2_rstd[l], NL);
        /* d_res now holds d(res_mid) = d(layer input) via the skip and d(attention output) */
        dout = gather_dres(m, (size_t)N, (size_t)C);
        matmul_backward(s->d_attn_y, 0, gw->attn_out_w, sp ? NULL : gw->attn_out_b, dout, a->attn_y[l],
                        WT(layer[l].attn_out_w), N, Y, C, 0);
        if (sp && gw->attn_out_b) bias_backward(gw->attn_out_b, s->d_res, NL, C);
        if (ring_used(m))
            ring_attention_backward(m, s->d_qkv, s->d_attn_y, a->qkv[l], a->attn_y[l], a->att[l], B, T, H, KV, hd);
        else
            attention_backward(s->d_qkv, s->d_attn_y, a->qkv[l], a->attn_y[l], a->att[l], B, T, H, KV, hd);
        if (!gpt2) rope(m, s->d_qkv, N, T, H, KV, hd, QKV, 1);
        matmul_backward(s->d_norm, 1, gw->qkv_w, gw->qkv_b, s->d_qkv, a->norm1_in[l], WT(layer[l].qkv_w), N, C, QKV,
                        0);
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
        real *dfull = s->d_res;
        if (sp) { /* the embedding's rows are all N: gather the residual gradient */
            m->tp.all_gather(m->tp.ctx, s->d_res, s->full, (size_t)NL * C, sizeof(real));
            dfull = s->full;
        }
        embedding_shard_backward(g->tok_emb, dfull, m->tokens, m->vocab_lo, V, N, C);
        if (gpt2) position_grads(m, g->pos_emb, s->d_res, row0, NL, T, C);
    } else if (ring_used(m)) {
        embedding_backward(g->tok_emb, NULL, s->d_res, m->tokens, N, T, C);
        if (gpt2) position_grads(m, g->pos_emb, s->d_res, 0, N, T, C);
    } else {
        embedding_backward(g->tok_emb, gpt2 ? g->pos_emb : NULL, s->d_res, m->tokens, N, T, C);
    }
    sum_replicated_grads(m, 0);
    HOOK(after_backward, 0);
    m->ready_for_backward = 0;
}

/* Copy this model's slices out of / into a whole model, through host views of both (the whole
 * model is usually host-side; on a GPU the local pieces cross as one copy each way). */
void model_copy_shards(Model *m, Model *whole, int to_local) {
    real *wh = model_params_view(whole), *mine = model_params_view(m);
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        if (p->tied_copy && !to_local) continue; /* the first stage's tok_emb is the one saved */
        const ParamInfo *w = param_table_find(&whole->table, p->tied_copy ? "tok_emb" : p->name);
        param_shard_copy(&m->cfg, p, m->tp.size, m->tp.rank, wh + w->offset, mine + p->offset, to_local);
    }
    model_params_view_done(m, mine, to_local);
    model_params_view_done(whole, wh, !to_local);
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
