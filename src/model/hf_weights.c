/* hf_weights.c: the mapping between Hugging Face tensor names and the parameter table. */
#include "model/hf_weights.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "util/error.h"

/* One Hugging Face tensor: rows [row0, row0+rows) of an internal tensor, stored transposed
 * (GPT-2 Conv1D) or not. Its HF shape is [rows, cols], or [cols, rows] when transposed,
 * or [rows] for vectors. */
typedef struct {
    char hf[96];
    const ParamInfo *p;
    int64_t row0, rows;
    int transpose;
} HfSlot;

typedef struct {
    HfSlot *s;
    int n, cap;
} SlotList;

static void slot(SlotList *l, const ParamTable *t, const char *internal, int64_t row0, int64_t rows, int transpose,
                 const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void slot(SlotList *l, const ParamTable *t, const char *internal, int64_t row0, int64_t rows, int transpose,
                 const char *fmt, ...) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->s = realloc(l->s, (size_t)l->cap * sizeof(HfSlot));
    }
    HfSlot *s = &l->s[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->hf, sizeof s->hf, fmt, ap);
    va_end(ap);
    s->p = param_table_find(t, internal);
    s->row0 = row0;
    s->rows = rows < 0 ? s->p->shape[0] : rows;
    s->transpose = transpose;
}

/* An MoE layer. Llama family: Mixtral's names (block_sparse_moe.gate, experts.N.w1 = gate, w3 =
 * up, w2 = down) and, for shared experts, block_sparse_moe.shared_experts.{gate,up,down}_proj.
 * GPT-2 family (no standard exists): mlp.gate, mlp.experts.N.c_fc / c_proj (Conv1D, transposed
 * like GPT-2's MLP) and mlp.shared_experts.c_fc / c_proj. */
static void moe_slots(SlotList *l, const ParamTable *t, const ModelConfig *c, int i) {
    char in[64];
    int F = model_expert_ffn(c), Fs = c->shared_experts * F;
#define INTERNAL(fmt, ...) (snprintf(in, sizeof in, fmt, __VA_ARGS__), in)
    if (c->arch == ARCH_GPT2) {
        slot(l, t, INTERNAL("layers.%d.router_w", i), 0, -1, 0, "transformer.h.%d.mlp.gate.weight", i);
        if (Fs) {
            slot(l, t, INTERNAL("layers.%d.shared_fc_w", i), 0, -1, 1, "transformer.h.%d.mlp.shared_experts.c_fc.weight", i);
            slot(l, t, INTERNAL("layers.%d.shared_fc_b", i), 0, -1, 0, "transformer.h.%d.mlp.shared_experts.c_fc.bias", i);
            slot(l, t, INTERNAL("layers.%d.shared_out_w", i), 0, -1, 1, "transformer.h.%d.mlp.shared_experts.c_proj.weight",
                 i);
            slot(l, t, INTERNAL("layers.%d.shared_out_b", i), 0, -1, 0, "transformer.h.%d.mlp.shared_experts.c_proj.bias", i);
        }
        for (int e = 0; e < c->experts; e++) {
            slot(l, t, INTERNAL("layers.%d.experts.%d.fc_w", i, e), 0, -1, 1, "transformer.h.%d.mlp.experts.%d.c_fc.weight",
                 i, e);
            slot(l, t, INTERNAL("layers.%d.experts.%d.fc_b", i, e), 0, -1, 0, "transformer.h.%d.mlp.experts.%d.c_fc.bias", i,
                 e);
            slot(l, t, INTERNAL("layers.%d.experts.%d.mlp_out_w", i, e), 0, -1, 1,
                 "transformer.h.%d.mlp.experts.%d.c_proj.weight", i, e);
            slot(l, t, INTERNAL("layers.%d.experts.%d.mlp_out_b", i, e), 0, -1, 0,
                 "transformer.h.%d.mlp.experts.%d.c_proj.bias", i, e);
        }
        return;
    }
    slot(l, t, INTERNAL("layers.%d.router_w", i), 0, -1, 0, "model.layers.%d.block_sparse_moe.gate.weight", i);
    if (Fs) {
        slot(l, t, INTERNAL("layers.%d.shared_fc_w", i), 0, Fs, 0,
             "model.layers.%d.block_sparse_moe.shared_experts.gate_proj.weight", i);
        slot(l, t, INTERNAL("layers.%d.shared_fc_w", i), Fs, Fs, 0,
             "model.layers.%d.block_sparse_moe.shared_experts.up_proj.weight", i);
        slot(l, t, INTERNAL("layers.%d.shared_out_w", i), 0, -1, 0,
             "model.layers.%d.block_sparse_moe.shared_experts.down_proj.weight", i);
    }
    for (int e = 0; e < c->experts; e++) {
        slot(l, t, INTERNAL("layers.%d.experts.%d.fc_w", i, e), 0, F, 0, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight",
             i, e);
        slot(l, t, INTERNAL("layers.%d.experts.%d.fc_w", i, e), F, F, 0, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight",
             i, e);
        slot(l, t, INTERNAL("layers.%d.experts.%d.mlp_out_w", i, e), 0, -1, 0,
             "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", i, e);
    }
#undef INTERNAL
}

static void build_slots(const Model *m, SlotList *l) {
    const ModelConfig *c = &m->cfg;
    const ParamTable *t = &m->table;
    char in[64];
#define INTERNAL(fmt, ...) (snprintf(in, sizeof in, fmt, __VA_ARGS__), in)
    if (c->arch == ARCH_GPT2) {
        slot(l, t, "tok_emb", 0, -1, 0, "transformer.wte.weight");
        slot(l, t, "pos_emb", 0, -1, 0, "transformer.wpe.weight");
        for (int i = 0; i < c->layers; i++) {
            slot(l, t, INTERNAL("layers.%d.norm1_w", i), 0, -1, 0, "transformer.h.%d.ln_1.weight", i);
            slot(l, t, INTERNAL("layers.%d.norm1_b", i), 0, -1, 0, "transformer.h.%d.ln_1.bias", i);
            slot(l, t, INTERNAL("layers.%d.qkv_w", i), 0, -1, 1, "transformer.h.%d.attn.c_attn.weight", i);
            slot(l, t, INTERNAL("layers.%d.qkv_b", i), 0, -1, 0, "transformer.h.%d.attn.c_attn.bias", i);
            slot(l, t, INTERNAL("layers.%d.attn_out_w", i), 0, -1, 1, "transformer.h.%d.attn.c_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.attn_out_b", i), 0, -1, 0, "transformer.h.%d.attn.c_proj.bias", i);
            slot(l, t, INTERNAL("layers.%d.norm2_w", i), 0, -1, 0, "transformer.h.%d.ln_2.weight", i);
            slot(l, t, INTERNAL("layers.%d.norm2_b", i), 0, -1, 0, "transformer.h.%d.ln_2.bias", i);
            if (model_layer_is_moe(c, i)) {
                moe_slots(l, t, c, i);
                continue;
            }
            slot(l, t, INTERNAL("layers.%d.fc_w", i), 0, -1, 1, "transformer.h.%d.mlp.c_fc.weight", i);
            slot(l, t, INTERNAL("layers.%d.fc_b", i), 0, -1, 0, "transformer.h.%d.mlp.c_fc.bias", i);
            slot(l, t, INTERNAL("layers.%d.mlp_out_w", i), 0, -1, 1, "transformer.h.%d.mlp.c_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.mlp_out_b", i), 0, -1, 0, "transformer.h.%d.mlp.c_proj.bias", i);
        }
        slot(l, t, "normf_w", 0, -1, 0, "transformer.ln_f.weight");
        slot(l, t, "normf_b", 0, -1, 0, "transformer.ln_f.bias");
    } else {
        int hd = c->hidden / c->heads, q = c->heads * hd, kv = c->kv_heads * hd;
        slot(l, t, "tok_emb", 0, -1, 0, "model.embed_tokens.weight");
        for (int i = 0; i < c->layers; i++) {
            slot(l, t, INTERNAL("layers.%d.norm1_w", i), 0, -1, 0, "model.layers.%d.input_layernorm.weight", i);
            slot(l, t, INTERNAL("layers.%d.qkv_w", i), 0, q, 0, "model.layers.%d.self_attn.q_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.qkv_w", i), q, kv, 0, "model.layers.%d.self_attn.k_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.qkv_w", i), q + kv, kv, 0, "model.layers.%d.self_attn.v_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.attn_out_w", i), 0, -1, 0, "model.layers.%d.self_attn.o_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.norm2_w", i), 0, -1, 0, "model.layers.%d.post_attention_layernorm.weight", i);
            if (model_layer_is_moe(c, i)) {
                moe_slots(l, t, c, i);
                continue;
            }
            slot(l, t, INTERNAL("layers.%d.fc_w", i), 0, c->ffn, 0, "model.layers.%d.mlp.gate_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.fc_w", i), c->ffn, c->ffn, 0, "model.layers.%d.mlp.up_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.mlp_out_w", i), 0, -1, 0, "model.layers.%d.mlp.down_proj.weight", i);
        }
        slot(l, t, "normf_w", 0, -1, 0, "model.norm.weight");
        if (!c->tied_embeddings) slot(l, t, "lm_head", 0, -1, 0, "lm_head.weight");
    }
#undef INTERNAL
}

static int64_t slot_cols(const HfSlot *s) { return s->p->ndim == 2 ? s->p->shape[1] : 1; }

/* HF names that carry no parameters (buffers) and are skipped on load. */
static int ignorable(const char *name) {
    const char *suffixes[] = {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && !strcmp(name + n - k, suffixes[i])) return 1;
    }
    return 0;
}

/* Find a slot's tensor, accepting GPT-2 names with or without "transformer.". */
static const StTensor *find_tensor(const StFile *f, const HfSlot *s) {
    const StTensor *t = st_find(f, s->hf);
    if (!t && !strncmp(s->hf, "transformer.", 12)) t = st_find(f, s->hf + 12);
    return t;
}

static int matches_slot(const char *name, const SlotList *l, int tied_gpt2) {
    for (int i = 0; i < l->n; i++) {
        if (!strcmp(name, l->s[i].hf)) return 1;
        if (!strncmp(l->s[i].hf, "transformer.", 12) && !strcmp(name, l->s[i].hf + 12)) return 1;
    }
    /* GPT-2 checkpoints may carry the tied lm_head explicitly */
    return tied_gpt2 && !strcmp(name, "lm_head.weight");
}

int hf_load_weights(const char *path, Model *m) {
    StFile f;
    if (st_open(path, &f)) return -1;
    SlotList l = {0};
    build_slots(m, &l);
    int rc = 0;
    float *buf = NULL;
    real *image = model_params_view(m);
    for (int i = 0; i < l.n && !rc; i++) {
        const HfSlot *s = &l.s[i];
        const StTensor *t = find_tensor(&f, s);
        int64_t cols = slot_cols(s);
        int64_t want0 = s->transpose ? cols : s->rows, want1 = s->transpose ? s->rows : cols;
        int want_ndim = s->p->ndim;
        if (!t) {
            rc = myr_error("%s: tensor %s is missing (is the checkpoint for this model family and shape?)", path, s->hf);
            break;
        }
        if (t->ndim != want_ndim || t->shape[0] != want0 || (want_ndim == 2 && t->shape[1] != want1)) {
            char got[96] = "", want[64];
            for (int d = 0; d < t->ndim; d++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            if (want_ndim == 2) snprintf(want, sizeof want, "%lld, %lld", (long long)want0, (long long)want1);
            else snprintf(want, sizeof want, "%lld", (long long)want0);
            rc = myr_error("%s: tensor %s has shape [%s], the config needs [%s]", path, s->hf, got, want);
            break;
        }
        int64_t n = s->rows * cols;
        buf = realloc(buf, (size_t)n * sizeof(float));
        if (st_read_f32(&f, t, buf, n)) { rc = -1; break; }
        real *dst = image + s->p->offset + (size_t)s->row0 * cols;
        if (s->transpose) {
            for (int64_t r = 0; r < s->rows; r++)
                for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = buf[c * s->rows + r];
        } else {
            for (int64_t k = 0; k < n; k++) dst[k] = buf[k];
        }
    }
    int tied_gpt2 = m->cfg.arch == ARCH_GPT2 && m->cfg.tied_embeddings;
    for (int i = 0; i < f.n && !rc; i++)
        if (!ignorable(f.tensors[i].name) && !matches_slot(f.tensors[i].name, &l, tied_gpt2))
            rc = myr_error("%s: unexpected tensor %s for a %s model with %d layers", path, f.tensors[i].name,
                           model_arch_name(m->cfg.arch), m->cfg.layers);
    model_params_view_done(m, image, !rc);
    free(buf);
    free(l.s);
    st_close(&f);
    return rc;
}

int hf_load(const char *dir, Model *m) { return hf_load_aligned(dir, m, 1); }

int hf_load_host(const char *dir, Model *m) {
    char path[4096];
    ModelConfig c;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_config_read(path, &c)) return -1;
    if (model_create_host(m, &c)) return myr_error("%s: %s", path, myr_last_error());
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (hf_load_weights(path, m)) {
        model_destroy(m);
        return -1;
    }
    return 0;
}

int hf_load_aligned(const char *dir, Model *m, int unit_align) {
    char path[4096];
    ModelConfig c;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_config_read(path, &c)) return -1;
    if (model_create_aligned(m, &c, unit_align)) return myr_error("%s: %s", path, myr_last_error());
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (hf_load_weights(path, m)) {
        model_destroy(m);
        return -1;
    }
    return 0;
}

int hf_save(const char *dir, const Model *m) {
    if (mkdir(dir, 0755) && errno != EEXIST) return myr_error("cannot create %s: %s", dir, strerror(errno));
    SlotList l = {0};
    build_slots(m, &l);
    StWriteTensor *w = calloc((size_t)l.n, sizeof *w);
    float **bufs = calloc((size_t)l.n, sizeof *bufs);
    real *image = model_params_view(m);
    for (int i = 0; i < l.n; i++) {
        const HfSlot *s = &l.s[i];
        int64_t cols = slot_cols(s), n = s->rows * cols;
        const real *src = image + s->p->offset + (size_t)s->row0 * cols;
        float *b = bufs[i] = malloc((size_t)n * sizeof(float));
        if (s->transpose) {
            for (int64_t r = 0; r < s->rows; r++)
                for (int64_t c = 0; c < cols; c++) b[c * s->rows + r] = (float)src[r * cols + c];
        } else {
            for (int64_t k = 0; k < n; k++) b[k] = (float)src[k];
        }
        w[i].name = s->hf;
        w[i].data = b;
        w[i].ndim = s->p->ndim;
        w[i].shape[0] = s->transpose ? cols : s->rows;
        w[i].shape[1] = s->transpose ? s->rows : cols;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = st_write_f32(path, w, l.n);
    if (!rc) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        rc = hf_config_write(path, &m->cfg);
    }
    for (int i = 0; i < l.n; i++) free(bufs[i]);
    model_params_view_done((Model *)m, image, 0);
    free(bufs);
    free(w);
    free(l.s);
    return rc;
}
