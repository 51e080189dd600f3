/* model.c: forward and backward of the transformer over flat buffers. */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/error.h"
#include "util/rng.h"

static int qkv_width(const ModelConfig *c) { return (c->heads + 2 * c->kv_heads) * (c->hidden / c->heads); }
static int fc_width(const ModelConfig *c) { return c->arch == ARCH_GPT2 ? c->ffn : 2 * c->ffn; }

int model_create(Model *m, const ModelConfig *cfg) { return model_create_aligned(m, cfg, 1); }

int model_create_aligned(Model *m, const ModelConfig *cfg, int unit_align) {
    memset(m, 0, sizeof *m);
    if (model_config_validate(cfg)) return -1;
    m->cfg = *cfg;
    param_table_build(&m->table, cfg, unit_align);
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

static void free_activations(Model *m) {
    dev_free(m->acts_mem);
    dev_free(m->scratch_mem);
    m->acts_mem = m->scratch_mem = NULL;
    Activations *a = &m->a;
    real **arrays[] = {a->res_in, a->norm1, a->norm1_mean, a->norm1_rstd, a->qkv, a->att, a->attn_y,
                       a->res_mid, a->norm2, a->norm2_mean, a->norm2_rstd, a->fc, a->act};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    memset(a, 0, sizeof *a);
    free(m->tokens);
    free(m->targets);
    m->tokens = m->targets = NULL;
    m->B = m->T = 0;
}

void model_destroy(Model *m) {
    free_activations(m);
    dev_free(m->params);
    dev_free(m->grads);
    dev_free(m->rope_cos);
    dev_free(m->rope_sin);
    model_tensors_free(&m->p);
    model_tensors_free(&m->g);
    param_table_free(&m->table);
}

size_t model_num_params(const Model *m) { return param_table_tensor_elements(&m->table); }

#define HOOK(name, unit) \
    if (m->hooks && m->hooks->name) m->hooks->name(m->hooks->ctx, unit)

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
            double std = (!strcmp(base, "attn_out_w") || !strcmp(base, "mlp_out_w")) ? residual_std : 0.02;
            for (size_t k = 0; k < p->numel; k++) w[k] = (real)(std * rng_normal(&rng));
        }
    }
}

size_t model_activation_count(const ModelConfig *c, int B, int T) {
    size_t N = (size_t)B * T, C = c->hidden;
    size_t per_layer = N * C * 5                 /* res_in, norm1, attn_y, res_mid, norm2 */
                       + N * 4                   /* norm means / rstds */
                       + N * qkv_width(c) + (size_t)B * c->heads * T * T + N * fc_width(c) + N * c->ffn;
    return per_layer * c->layers + N * C * 2 + N * 2 + N * (size_t)c->vocab + N;
}

static void ensure_activations(Model *m, int B, int T) {
    if (m->B == B && m->T == T) return;
    free_activations(m);
    const ModelConfig *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->hidden, L = c->layers, QKV = qkv_width(c), F1 = fc_width(c), F = c->ffn;
    m->acts_count = model_activation_count(c, B, T);
    m->acts_mem = dev_alloc(m->acts_count);
    Activations *a = &m->a;
    real *p = m->acts_mem;
#define TAKE(n) (p += (n), p - (n))
#define ARR(field) a->field = malloc(L * sizeof(real *))
    ARR(res_in); ARR(norm1); ARR(norm1_mean); ARR(norm1_rstd); ARR(qkv); ARR(att); ARR(attn_y);
    ARR(res_mid); ARR(norm2); ARR(norm2_mean); ARR(norm2_rstd); ARR(fc); ARR(act);
#undef ARR
    for (size_t l = 0; l < L; l++) {
        a->res_in[l] = TAKE(N * C);
        a->norm1[l] = TAKE(N * C);
        a->norm1_mean[l] = TAKE(N);
        a->norm1_rstd[l] = TAKE(N);
        a->qkv[l] = TAKE(N * QKV);
        a->att[l] = TAKE((size_t)B * c->heads * T * T);
        a->attn_y[l] = TAKE(N * C);
        a->res_mid[l] = TAKE(N * C);
        a->norm2[l] = TAKE(N * C);
        a->norm2_mean[l] = TAKE(N);
        a->norm2_rstd[l] = TAKE(N);
        a->fc[l] = TAKE(N * F1);
        a->act[l] = TAKE(N * F);
    }
    a->res_out = TAKE(N * C);
    a->normf = TAKE(N * C);
    a->normf_mean = TAKE(N);
    a->normf_rstd = TAKE(N);
    a->logits = TAKE(N * (size_t)c->vocab);
    a->losses = TAKE(N);
    m->scratch_count = N * C * 3 + N * QKV + N * F1 + N * F;
    m->scratch_mem = dev_alloc(m->scratch_count);
    p = m->scratch_mem;
    m->s.d_res = TAKE(N * C);
    m->s.d_norm = TAKE(N * C);
    m->s.d_attn_y = TAKE(N * C);
    m->s.d_qkv = TAKE(N * QKV);
    m->s.d_fc = TAKE(N * F1);
    m->s.d_act = TAKE(N * F);
#undef TAKE
    m->tokens = malloc(N * sizeof(int32_t));
    m->targets = malloc(N * sizeof(int32_t));
    m->B = B;
    m->T = T;
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

double model_forward(Model *m, const int32_t *x, const int32_t *targets, int B, int T, double grad_scale) {
    const ModelConfig *c = &m->cfg;
    ensure_activations(m, B, T);
    int N = B * T, C = c->hidden, H = c->heads, KV = c->kv_heads, hd = C / H, QKV = qkv_width(c);
    int F = c->ffn, F1 = fc_width(c);
    int gpt2 = c->arch == ARCH_GPT2;
    Activations *a = &m->a;
    memcpy(m->tokens, x, (size_t)N * sizeof(int32_t));
    HOOK(before_forward, 0);
    embedding_forward(a->res_in[0], x, m->p.tok_emb, gpt2 ? m->p.pos_emb : NULL, N, T, C);
    HOOK(after_forward, 0);
    for (int l = 0; l < c->layers; l++) {
        HOOK(before_forward, l + 1);
        const LayerTensors *w = &m->p.layer[l];
        real *res_out = l + 1 < c->layers ? a->res_in[l + 1] : a->res_out;
        norm_forward(m, a->norm1[l], a->norm1_mean[l], a->norm1_rstd[l], a->res_in[l], w->norm1_w, w->norm1_b, N);
        matmul_forward(a->qkv[l], a->norm1[l], w->qkv_w, w->qkv_b, N, C, QKV);
        if (!gpt2) rope_apply(a->qkv[l], m->rope_cos, m->rope_sin, N, T, H, KV, hd, QKV, 0);
        attention_forward(a->attn_y[l], a->att[l], a->qkv[l], B, T, H, KV, hd);
        /* attention projection lands in `res_out` temporarily, then the residual is added */
        matmul_forward(res_out, a->attn_y[l], w->attn_out_w, w->attn_out_b, N, C, C);
        residual_forward(a->res_mid[l], a->res_in[l], res_out, (size_t)N * C);
        norm_forward(m, a->norm2[l], a->norm2_mean[l], a->norm2_rstd[l], a->res_mid[l], w->norm2_w, w->norm2_b, N);
        matmul_forward(a->fc[l], a->norm2[l], w->fc_w, w->fc_b, N, C, F1);
        if (gpt2) gelu_forward(a->act[l], a->fc[l], (size_t)N * F);
        else swiglu_forward(a->act[l], a->fc[l], N, F);
        matmul_forward(res_out, a->act[l], w->mlp_out_w, w->mlp_out_b, N, F, C);
        add_inplace(res_out, a->res_mid[l], (size_t)N * C);
        HOOK(after_forward, l + 1);
    }
    HOOK(before_forward, c->layers + 1);
    norm_forward(m, a->normf, a->normf_mean, a->normf_rstd, a->res_out, m->p.normf_w, m->p.normf_b, N);
    matmul_forward(a->logits, a->normf, m->p.lm_head, NULL, N, C, c->vocab);
    HOOK(after_forward, c->layers + 1);
    m->have_grad_logits = 0;
    if (!targets) return 0;
    memcpy(m->targets, targets, (size_t)N * sizeof(int32_t));
    double loss = cross_entropy_forward_backward(a->logits, a->losses, targets, N, c->vocab, grad_scale > 0,
                                                 grad_scale);
    m->have_grad_logits = grad_scale > 0;
    return loss;
}

void model_backward(Model *m) {
    if (!m->have_grad_logits) myr_die("internal: model_backward without a training forward");
    const ModelConfig *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->hidden, H = c->heads, KV = c->kv_heads, hd = C / H;
    int QKV = qkv_width(c), F = c->ffn, F1 = fc_width(c), gpt2 = c->arch == ARCH_GPT2;
    Activations *a = &m->a;
    GradScratch *s = &m->s;
    ModelTensors *g = &m->g;
    HOOK(before_backward, c->layers + 1);
    matmul_backward(s->d_norm, g->lm_head, NULL, a->logits, a->normf, m->p.lm_head, N, C, c->vocab, 0);
    dev_zero(s->d_res, (size_t)N * C);
    norm_backward(m, s->d_res, g->normf_w, g->normf_b, s->d_norm, a->res_out, m->p.normf_w, a->normf_mean,
                  a->normf_rstd, N);
    HOOK(after_backward, c->layers + 1);
    for (int l = c->layers - 1; l >= 0; l--) {
        HOOK(before_backward, l + 1);
        const LayerTensors *w = &m->p.layer[l];
        LayerTensors *gw = &g->layer[l];
        /* d_res holds d(layer output) = d(res_mid) via the skip and d(mlp output) */
        matmul_backward(s->d_act, gw->mlp_out_w, gw->mlp_out_b, s->d_res, a->act[l], w->mlp_out_w, N, F, C, 0);
        if (gpt2) gelu_backward(s->d_fc, a->fc[l], s->d_act, (size_t)N * F);
        else swiglu_backward(s->d_fc, a->fc[l], s->d_act, N, F);
        matmul_backward(s->d_norm, gw->fc_w, gw->fc_b, s->d_fc, a->norm2[l], w->fc_w, N, C, F1, 0);
        norm_backward(m, s->d_res, gw->norm2_w, gw->norm2_b, s->d_norm, a->res_mid[l], w->norm2_w,
                      a->norm2_mean[l], a->norm2_rstd[l], N);
        /* d_res now holds d(res_mid) = d(layer input) via the skip and d(attention output) */
        matmul_backward(s->d_attn_y, gw->attn_out_w, gw->attn_out_b, s->d_res, a->attn_y[l], w->attn_out_w, N, C,
                        C, 0);
        attention_backward(s->d_qkv, s->d_attn_y, a->qkv[l], a->att[l], B, T, H, KV, hd);
        if (!gpt2) rope_apply(s->d_qkv, m->rope_cos, m->rope_sin, N, T, H, KV, hd, QKV, 1);
        matmul_backward(s->d_norm, gw->qkv_w, gw->qkv_b, s->d_qkv, a->norm1[l], w->qkv_w, N, C, QKV, 0);
        norm_backward(m, s->d_res, gw->norm1_w, gw->norm1_b, s->d_norm, a->res_in[l], w->norm1_w,
                      a->norm1_mean[l], a->norm1_rstd[l], N);
        HOOK(after_backward, l + 1);
    }
    HOOK(before_backward, 0);
    embedding_backward(g->tok_emb, gpt2 ? g->pos_emb : NULL, s->d_res, m->tokens, N, T, C);
    HOOK(after_backward, 0);
    m->have_grad_logits = 0;
}

void model_zero_grad(Model *m) { dev_zero(m->grads, m->table.total); }

double model_flops_per_token(const ModelConfig *c, int T) {
    double C = c->hidden, L = c->layers;
    double matmul_params = L * (C * qkv_width(c) + C * C + C * fc_width(c) + (double)c->ffn * C) + C * c->vocab;
    return 6.0 * matmul_params + 6.0 * L * T * C; /* causal attention: half of 12·L·T·C */
}
