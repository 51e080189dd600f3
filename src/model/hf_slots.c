/* hf_slots.c: the mapping between Hugging Face tensor names and the parameter table (hf_slots.h):
 * which slice of which parameter each named tensor is, and a name index over them. The streamed
 * reader and writer (hf_source.c, hf_export.c) use it; hf_weights.c is above all three. */
#include "model/hf_slots.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void slot(HfSlotList *l, const ParamTable *t, const char *internal, int64_t row0, int64_t rows, int transpose,
                 const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void slot(HfSlotList *l, const ParamTable *t, const char *internal, int64_t row0, int64_t rows, int transpose,
                 const char *fmt, ...) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->s = realloc(l->s, (size_t)l->cap * sizeof(HfSlot));
        if (!l->s) myr_die("out of memory listing the Hugging Face tensors");
    }
    HfSlot *s = &l->s[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->hf, sizeof s->hf, fmt, ap);
    va_end(ap);
    s->p = param_table_find(t, internal);
    if (!s->p) myr_die("internal: no tensor %s for the Hugging Face name %s", internal, s->hf);
    s->row0 = row0;
    s->rows = rows < 0 ? s->p->global_shape[0] : rows; /* the tensor's own rows, never a padded vocabulary's */
    s->transpose = transpose;
}

/* An MoE layer. Llama family: Mixtral's names (block_sparse_moe.gate, experts.N.w1 = gate, w3 =
 * up, w2 = down) and, for shared experts, block_sparse_moe.shared_experts.{gate,up,down}_proj.
 * GPT-2 family (no standard exists): mlp.gate, mlp.experts.N.c_fc / c_proj (Conv1D, transposed
 * like GPT-2's MLP) and mlp.shared_experts.c_fc / c_proj. */
static void moe_slots(HfSlotList *l, const ParamTable *t, const ModelConfig *c, int i) {
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

void hf_slots_build(const ModelConfig *c, const ParamTable *t, HfSlotList *l) {
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
            if (c->attn_bias) {
                slot(l, t, INTERNAL("layers.%d.qkv_b", i), 0, q, 0, "model.layers.%d.self_attn.q_proj.bias", i);
                slot(l, t, INTERNAL("layers.%d.qkv_b", i), q, kv, 0, "model.layers.%d.self_attn.k_proj.bias", i);
                slot(l, t, INTERNAL("layers.%d.qkv_b", i), q + kv, kv, 0, "model.layers.%d.self_attn.v_proj.bias", i);
            }
            slot(l, t, INTERNAL("layers.%d.attn_out_w", i), 0, -1, 0, "model.layers.%d.self_attn.o_proj.weight", i);
            if (c->attn_bias)
                slot(l, t, INTERNAL("layers.%d.attn_out_b", i), 0, -1, 0, "model.layers.%d.self_attn.o_proj.bias", i);
            slot(l, t, INTERNAL("layers.%d.norm2_w", i), 0, -1, 0, "model.layers.%d.post_attention_layernorm.weight", i);
            if (model_layer_is_moe(c, i)) {
                moe_slots(l, t, c, i);
                continue;
            }
            slot(l, t, INTERNAL("layers.%d.fc_w", i), 0, c->ffn, 0, "model.layers.%d.mlp.gate_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.fc_w", i), c->ffn, c->ffn, 0, "model.layers.%d.mlp.up_proj.weight", i);
            slot(l, t, INTERNAL("layers.%d.mlp_out_w", i), 0, -1, 0, "model.layers.%d.mlp.down_proj.weight", i);
            if (c->mlp_bias) {
                slot(l, t, INTERNAL("layers.%d.fc_b", i), 0, c->ffn, 0, "model.layers.%d.mlp.gate_proj.bias", i);
                slot(l, t, INTERNAL("layers.%d.fc_b", i), c->ffn, c->ffn, 0, "model.layers.%d.mlp.up_proj.bias", i);
                slot(l, t, INTERNAL("layers.%d.mlp_out_b", i), 0, -1, 0, "model.layers.%d.mlp.down_proj.bias", i);
            }
        }
        slot(l, t, "normf_w", 0, -1, 0, "model.norm.weight");
        if (!c->tied_embeddings) slot(l, t, "lm_head", 0, -1, 0, "lm_head.weight");
    }
#undef INTERNAL
}

void hf_slots_free(HfSlotList *l) {
    free(l->s);
    l->s = NULL;
    l->n = l->cap = 0;
}

int64_t hf_slot_cols(const HfSlot *s) { return s->p->ndim == 2 ? s->p->global_shape[1] : 1; }

int hf_slot_shape(const HfSlot *s, int64_t shape[2]) {
    int64_t cols = hf_slot_cols(s);
    shape[0] = s->transpose ? cols : s->rows;
    shape[1] = s->transpose ? s->rows : cols;
    return s->p->ndim;
}

int hf_name_ignorable(const char *name) {
    const char *suffixes[] = {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && !strcmp(name + n - k, suffixes[i])) return 1;
    }
    return 0;
}

static unsigned name_bucket(const char *s, int nbuckets) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (unsigned)(h % (uint64_t)nbuckets);
}

void hf_slot_index_build(HfSlotIndex *ix, const HfSlotList *l) {
    ix->l = l;
    ix->nbuckets = 2 * l->n + 1;
    ix->head = malloc((size_t)ix->nbuckets * sizeof(int));
    ix->next = malloc((size_t)(l->n ? l->n : 1) * sizeof(int));
    for (int b = 0; b < ix->nbuckets; b++) ix->head[b] = -1;
    for (int i = l->n - 1; i >= 0; i--) { /* pushed in reverse: each chain runs in slot order */
        unsigned b = name_bucket(l->s[i].p->name, ix->nbuckets);
        ix->next[i] = ix->head[b];
        ix->head[b] = i;
    }
}

void hf_slot_index_free(HfSlotIndex *ix) {
    free(ix->head);
    free(ix->next);
    ix->head = ix->next = NULL;
}

/* a bucket's chain holds every slot whose name hashes there, in slot order */
static int matching(const HfSlotIndex *ix, int i, const char *name) {
    while (i >= 0 && strcmp(ix->l->s[i].p->name, name)) i = ix->next[i];
    return i;
}

int hf_slot_first(const HfSlotIndex *ix, const char *name) {
    return matching(ix, ix->head[name_bucket(name, ix->nbuckets)], name);
}

int hf_slot_next(const HfSlotIndex *ix, int i, const char *name) { return matching(ix, ix->next[i], name); }
