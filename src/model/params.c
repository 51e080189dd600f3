/* params.c: builds the parameter table (names, shapes, offsets) and binds tensor pointers. */
#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(ParamTable *t, int layer, const char *name, int ndim, int64_t d0, int64_t d1) {
    ParamInfo *p = &t->info[t->count++];
    memset(p, 0, sizeof *p);
    if (layer >= 0) snprintf(p->name, sizeof p->name, "layers.%d.%s", layer, name);
    else snprintf(p->name, sizeof p->name, "%s", name);
    p->layer = layer;
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim == 2 ? d1 : 1;
    p->numel = (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
    p->offset = t->total;
    p->decay = ndim >= 2;
    t->total += p->numel;
}

void param_table_build(ParamTable *t, const ModelConfig *c) {
    int gpt2 = c->arch == ARCH_GPT2;
    int C = c->hidden, hd = c->hidden / c->heads, qkv = (c->heads + 2 * c->kv_heads) * hd;
    int fc = gpt2 ? c->ffn : 2 * c->ffn;
    t->count = 0;
    t->total = 0;
    t->info = calloc((size_t)4 + 12 * (size_t)c->layers, sizeof(ParamInfo));
    add(t, -1, "tok_emb", 2, c->vocab, C);
    if (gpt2) add(t, -1, "pos_emb", 2, c->max_seq, C);
    for (int l = 0; l < c->layers; l++) {
        add(t, l, "norm1_w", 1, C, 0);
        if (gpt2) add(t, l, "norm1_b", 1, C, 0);
        add(t, l, "qkv_w", 2, qkv, C);
        if (gpt2) add(t, l, "qkv_b", 1, qkv, 0);
        add(t, l, "attn_out_w", 2, C, C);
        if (gpt2) add(t, l, "attn_out_b", 1, C, 0);
        add(t, l, "norm2_w", 1, C, 0);
        if (gpt2) add(t, l, "norm2_b", 1, C, 0);
        add(t, l, "fc_w", 2, fc, C);
        if (gpt2) add(t, l, "fc_b", 1, fc, 0);
        add(t, l, "mlp_out_w", 2, C, c->ffn);
        if (gpt2) add(t, l, "mlp_out_b", 1, C, 0);
    }
    add(t, -1, "normf_w", 1, C, 0);
    if (gpt2) add(t, -1, "normf_b", 1, C, 0);
    if (!c->tied_embeddings) add(t, -1, "lm_head", 2, c->vocab, C);
}

void param_table_free(ParamTable *t) {
    free(t->info);
    t->info = NULL;
    t->count = 0;
}

const ParamInfo *param_table_find(const ParamTable *t, const char *name) {
    for (int i = 0; i < t->count; i++)
        if (!strcmp(t->info[i].name, name)) return &t->info[i];
    return NULL;
}

static real *at(const ParamTable *t, real *base, const char *name) {
    const ParamInfo *p = param_table_find(t, name);
    return p ? base + p->offset : NULL;
}

void model_tensors_bind(ModelTensors *m, const ParamTable *t, const ModelConfig *c, real *base) {
    m->tok_emb = at(t, base, "tok_emb");
    m->pos_emb = at(t, base, "pos_emb");
    m->normf_w = at(t, base, "normf_w");
    m->normf_b = at(t, base, "normf_b");
    m->lm_head = c->tied_embeddings ? m->tok_emb : at(t, base, "lm_head");
    m->layer = calloc((size_t)c->layers, sizeof(LayerTensors));
    char name[64];
#define BIND(field)                                              \
    snprintf(name, sizeof name, "layers.%d." #field, l);         \
    m->layer[l].field = at(t, base, name);
    for (int l = 0; l < c->layers; l++) {
        BIND(norm1_w) BIND(norm1_b) BIND(qkv_w) BIND(qkv_b) BIND(attn_out_w) BIND(attn_out_b)
        BIND(norm2_w) BIND(norm2_b) BIND(fc_w) BIND(fc_b) BIND(mlp_out_w) BIND(mlp_out_b)
    }
#undef BIND
}

void model_tensors_free(ModelTensors *m) {
    free(m->layer);
    m->layer = NULL;
}
