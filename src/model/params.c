/* params.c: builds the parameter table (names, shapes, offsets) and binds tensor pointers. */
#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int current_unit;
static int cur_tp = 1, cur_rank = 0;
static const ModelConfig *cur_cfg;

static int64_t vocab_lo(int64_t V, int tp, int r) { return V * r / tp; }

/* Rows of rank r's slice of a SHARD_VOCAB tensor that hold tokens (the rest is padding). */
static int64_t vocab_real_rows(const ParamInfo *p, int tp, int r) {
    return vocab_lo(p->global_shape[0], tp, r + 1) - vocab_lo(p->global_shape[0], tp, r);
}

/* Local rows / columns of a tensor of global shape [d0, d1] split as `kind`. */
static void local_shape(ShardKind kind, int64_t d0, int64_t d1, int64_t *l0, int64_t *l1) {
    int t = cur_tp, r = cur_rank;
    *l0 = d0;
    *l1 = d1;
    switch (kind) {
    case SHARD_ROWS: case SHARD_QKV: case SHARD_GATE_UP: *l0 = d0 / t; break;
    case SHARD_COLS: *l1 = d1 / t; break;
    case SHARD_VOCAB: *l0 = model_vocab_rows(cur_cfg, t, r); break; /* d0 is the vocabulary */
    default: break;
    }
}

static void add_sharded(ParamTable *t, int layer, const char *name, ShardKind kind, int ndim, int64_t d0, int64_t d1);

static void add(ParamTable *t, int layer, const char *name, int ndim, int64_t d0, int64_t d1) {
    add_sharded(t, layer, name, SHARD_NONE, ndim, d0, d1);
}

static void add_sharded(ParamTable *t, int layer, const char *name, ShardKind kind, int ndim, int64_t d0, int64_t d1) {
    ParamInfo *p = &t->info[t->count++];
    memset(p, 0, sizeof *p);
    p->shard = kind;
    p->global_shape[0] = d0;
    p->global_shape[1] = ndim == 2 ? d1 : 1;
    local_shape(kind, d0, ndim == 2 ? d1 : 1, &d0, &d1);
    if (layer >= 0) snprintf(p->name, sizeof p->name, "layers.%d.%.28s", layer, name);
    else snprintf(p->name, sizeof p->name, "%s", name);
    p->layer = layer;
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim == 2 ? d1 : 1;
    p->numel = (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
    p->offset = t->total;
    p->decay = ndim >= 2;
    p->unit = current_unit;
    t->total += p->numel;
}

/* Close the current unit: pad to a multiple of align and record its range. */
static void end_unit(ParamTable *t, size_t lo, int align) {
    t->total = (t->total + align - 1) / align * align;
    t->unit_lo[current_unit] = lo;
    t->unit_hi[current_unit] = t->total;
    current_unit++;
}

void param_table_build(ParamTable *t, const ModelConfig *c, int unit_align) {
    param_table_build_tp(t, c, unit_align, 1, 0);
}

void param_table_build_tp(ParamTable *t, const ModelConfig *c, int unit_align, int tp, int tp_rank) {
    StageSpec whole = {0, c->layers, 1, 1};
    param_table_build_stage(t, c, unit_align, tp, tp_rank, &whole);
}

void param_table_build_stage(ParamTable *t, const ModelConfig *c, int unit_align, int tp, int tp_rank,
                             const StageSpec *st) {
    param_table_build_ep(t, c, unit_align, tp, tp_rank, 1, 0, st);
}

/* An MLP's tensors under `prefix` (fc_w | fc_b | mlp_out_w | mlp_out_b, or shared_*): inner size
 * F, split over tensor parallelism like the dense MLP. */
static void add_mlp(ParamTable *t, int l, const char *fc, const char *out, int gpt2, int C, int F, int expert) {
    char name[40];
    int first = t->count;
    snprintf(name, sizeof name, "%s_w", fc);
    add_sharded(t, l, name, gpt2 ? SHARD_ROWS : SHARD_GATE_UP, 2, gpt2 ? F : 2 * F, C);
    if (gpt2) {
        snprintf(name, sizeof name, "%s_b", fc);
        add_sharded(t, l, name, SHARD_ROWS, 1, F, 0);
    }
    snprintf(name, sizeof name, "%s_w", out);
    add_sharded(t, l, name, SHARD_COLS, 2, C, F);
    if (gpt2) {
        snprintf(name, sizeof name, "%s_b", out);
        add(t, l, name, 1, C, 0);
    }
    for (int i = first; i < t->count; i++) t->info[i].expert = expert;
}

void param_table_build_ep(ParamTable *t, const ModelConfig *c, int unit_align, int tp, int tp_rank, int ep, int ep_rank,
                          const StageSpec *st) {
    cur_tp = tp;
    cur_rank = tp_rank;
    cur_cfg = c;
    int gpt2 = c->arch == ARCH_GPT2;
    int C = c->hidden, hd = c->hidden / c->heads, qkv = (c->heads + 2 * c->kv_heads) * hd;
    int fc = gpt2 ? c->ffn : 2 * c->ffn;
    t->count = 0;
    t->total = 0;
    if (unit_align < 1) unit_align = 1;
    int moe_layers = 0;
    for (int l = st->layer_lo; l < st->layer_hi; l++) moe_layers += model_layer_is_moe(c, l);
    int e_lo = c->experts * ep_rank / (ep > 0 ? ep : 1), e_hi = c->experts * (ep_rank + 1) / (ep > 0 ? ep : 1);
    t->ep = ep;
    t->ep_rank = ep_rank;
    t->info = calloc((size_t)5 + (size_t)c->layers * (17 + 4 * (size_t)(e_hi - e_lo)), sizeof(ParamInfo));
    t->units = (st->layer_hi - st->layer_lo) + moe_layers + st->first + st->last;
    t->unit_lo = calloc((size_t)t->units, sizeof(size_t));
    t->unit_hi = calloc((size_t)t->units, sizeof(size_t));
    t->layer_unit = malloc((size_t)c->layers * sizeof(int));
    t->expert_unit = malloc((size_t)c->layers * sizeof(int));
    for (int l = 0; l < c->layers; l++) t->layer_unit[l] = t->expert_unit[l] = -1;
    current_unit = 0;
    if (st->first) {
        add_sharded(t, -1, "tok_emb", SHARD_VOCAB, 2, c->vocab, C);
        if (gpt2) add(t, -1, "pos_emb", 2, c->max_seq, C);
        end_unit(t, 0, unit_align);
    }
    for (int l = st->layer_lo; l < st->layer_hi; l++) {
        size_t lo = t->total;
        add(t, l, "norm1_w", 1, C, 0);
        if (gpt2) add(t, l, "norm1_b", 1, C, 0);
        add_sharded(t, l, "qkv_w", SHARD_QKV, 2, qkv, C);
        if (gpt2 || c->attn_bias) add_sharded(t, l, "qkv_b", SHARD_QKV, 1, qkv, 0);
        add_sharded(t, l, "attn_out_w", SHARD_COLS, 2, C, C);
        if (gpt2 || c->attn_bias) add(t, l, "attn_out_b", 1, C, 0);
        add(t, l, "norm2_w", 1, C, 0);
        if (gpt2) add(t, l, "norm2_b", 1, C, 0);
        t->layer_unit[l] = current_unit;
        if (!model_layer_is_moe(c, l)) {
            add_sharded(t, l, "fc_w", gpt2 ? SHARD_ROWS : SHARD_GATE_UP, 2, fc, C);
            if (gpt2 || c->mlp_bias) add_sharded(t, l, "fc_b", gpt2 ? SHARD_ROWS : SHARD_GATE_UP, 1, fc, 0);
            add_sharded(t, l, "mlp_out_w", SHARD_COLS, 2, C, c->ffn);
            if (gpt2 || c->mlp_bias) add(t, l, "mlp_out_b", 1, C, 0);
            end_unit(t, lo, unit_align);
            continue;
        }
        int Fe = model_expert_ffn(c);
        add(t, l, "router_w", 2, c->experts, C);
        if (c->shared_experts > 0) add_mlp(t, l, "shared_fc", "shared_out", gpt2, C, c->shared_experts * Fe, 0);
        end_unit(t, lo, unit_align);
        lo = t->total;
        t->expert_unit[l] = current_unit;
        for (int e = e_lo; e < e_hi; e++) {
            char fcn[32], outn[32];
            snprintf(fcn, sizeof fcn, "experts.%d.fc", e);
            snprintf(outn, sizeof outn, "experts.%d.mlp_out", e);
            add_mlp(t, l, fcn, outn, gpt2, C, Fe, 1);
        }
        end_unit(t, lo, unit_align);
    }
    if (!st->last) return;
    size_t lo = t->total;
    add(t, -1, "normf_w", 1, C, 0);
    if (gpt2) add(t, -1, "normf_b", 1, C, 0);
    if (!c->tied_embeddings || !st->first) {
        add_sharded(t, -1, "lm_head", SHARD_VOCAB, 2, c->vocab, C);
        t->info[t->count - 1].tied_copy = c->tied_embeddings;
    }
    end_unit(t, lo, unit_align);
}

/* Global row of local row `lr` of rank r's slice. */
static int64_t global_row(const ModelConfig *c, const ParamInfo *p, int tp, int r, int64_t lr) {
    int64_t rows = p->shape[0], hd = c->hidden / c->heads;
    switch (p->shard) {
    case SHARD_ROWS: return r * rows + lr;
    case SHARD_VOCAB: return vocab_lo(p->global_shape[0], tp, r) + lr;
    case SHARD_QKV: {
        int64_t q = (int64_t)c->heads / tp * hd, kv = (int64_t)c->kv_heads / tp * hd;
        if (lr < q) return r * q + lr;
        if (lr < q + kv) return (int64_t)c->heads * hd + r * kv + (lr - q);
        return (int64_t)(c->heads + c->kv_heads) * hd + r * kv + (lr - q - kv);
    }
    case SHARD_GATE_UP: {
        int64_t f = rows / 2, half = p->global_shape[0] / 2; /* gate | up of this MLP (dense or expert) */
        return lr < f ? r * f + lr : half + r * f + (lr - f);
    }
    default: return lr;
    }
}

void param_shard_copy(const ModelConfig *c, const ParamInfo *p, int tp, int tp_rank, real *global, real *local,
                      int to_local) {
    int64_t rows = p->shape[0], cols = p->shape[1], gcols = p->global_shape[1];
    int64_t col0 = p->shard == SHARD_COLS ? tp_rank * cols : 0;
    if (p->shard == SHARD_VOCAB) rows = vocab_real_rows(p, tp, tp_rank); /* padding rows are no global rows */
    for (int64_t lr = 0; lr < rows; lr++) {
        real *g = global + global_row(c, p, tp, tp_rank, lr) * gcols + col0, *l = local + lr * cols;
        if (to_local) memcpy(l, g, (size_t)cols * sizeof(real));
        else memcpy(g, l, (size_t)cols * sizeof(real));
    }
}

/* The row blocks of rank r's slice: local rows [l0, l0 + n) are global rows [g0, g0 + n), columns
 * [col0, col0 + local cols). */
typedef struct {
    int64_t l0, n, g0;
} RowBlock;

static int row_blocks(const ModelConfig *c, const ParamInfo *p, int tp, int r, RowBlock *b) {
    int64_t rows = p->shape[0];
    switch (p->shard) {
    case SHARD_QKV: {
        int64_t hd = c->hidden / c->heads, q = (int64_t)c->heads / tp * hd, kv = (int64_t)c->kv_heads / tp * hd;
        b[0] = (RowBlock){0, q, global_row(c, p, tp, r, 0)};
        b[1] = (RowBlock){q, kv, global_row(c, p, tp, r, q)};
        b[2] = (RowBlock){q + kv, kv, global_row(c, p, tp, r, q + kv)};
        return 3;
    }
    case SHARD_GATE_UP:
        b[0] = (RowBlock){0, rows / 2, global_row(c, p, tp, r, 0)};
        b[1] = (RowBlock){rows / 2, rows / 2, global_row(c, p, tp, r, rows / 2)};
        return 2;
    case SHARD_VOCAB: /* the padding rows after the tokens belong to no box */
        b[0] = (RowBlock){0, vocab_real_rows(p, tp, r), global_row(c, p, tp, r, 0)};
        return 1;
    default: b[0] = (RowBlock){0, rows, global_row(c, p, tp, r, 0)}; return 1;
    }
}

int param_range_boxes(const ModelConfig *c, const ParamInfo *p, int tp, int tp_rank, int64_t la, int64_t lb,
                      real *data, TensorBoxFn fn, void *ctx) {
    const char *name = p->tied_copy ? "tok_emb" : p->name;
    int64_t gshape[2] = {p->global_shape[0], p->global_shape[1]}, cols = p->shape[1];
    int64_t col0 = p->shard == SHARD_COLS ? (int64_t)tp_rank * cols : 0;
    RowBlock blocks[3];
    int nb = row_blocks(c, p, tp, tp_rank, blocks);
    for (int k = 0; k < nb; k++) {
        int64_t s0 = blocks[k].l0 * cols, s1 = (blocks[k].l0 + blocks[k].n) * cols;
        int64_t a = la > s0 ? la : s0, e = lb < s1 ? lb : s1;
        while (a < e) { /* a partial first row, the whole rows, a partial last row */
            int64_t row = (a - s0) / cols, col = (a - s0) % cols, nr, nc;
            if (col || e - a < cols) nr = 1, nc = (col + (e - a) < cols ? e - a : cols - col);
            else nr = (e - a) / cols, nc = cols, col = 0;
            TensorBox box = {blocks[k].g0 + row, nr, col0 + col, nc};
            if (fn(ctx, name, gshape, &box, data)) return -1;
            data += nr * nc;
            a += nr * nc;
        }
    }
    return 0;
}

int param_table_boxes(const ModelConfig *c, const ParamTable *t, int tp, int tp_rank, real *base, int skip_tied,
                      TensorBoxFn fn, void *ctx) {
    for (int i = 0; i < t->count; i++) {
        const ParamInfo *p = &t->info[i];
        if (skip_tied && p->tied_copy) continue;
        if (param_range_boxes(c, p, tp, tp_rank, 0, (int64_t)p->numel, base + p->offset, fn, ctx)) return -1;
    }
    return 0;
}

size_t param_table_tensor_elements(const ParamTable *t) {
    size_t n = 0;
    for (int i = 0; i < t->count; i++) n += t->info[i].numel;
    return n;
}

void param_table_free(ParamTable *t) {
    free(t->info);
    free(t->unit_lo);
    free(t->unit_hi);
    free(t->layer_unit);
    free(t->expert_unit);
    t->info = NULL;
    t->unit_lo = t->unit_hi = NULL;
    t->layer_unit = t->expert_unit = NULL;
    t->count = 0;
}

const ParamInfo *param_table_find(const ParamTable *t, const char *name) {
    for (int i = 0; i < t->count; i++)
        if (!strcmp(t->info[i].name, name)) return &t->info[i];
    return NULL;
}

/* The pointer slot of a routed expert's tensor ("experts.<e>.fc_w" ...), or NULL for other names. */
static real **expert_slot(const LayerTensors *L, const char *field) {
    int e, n = 0;
    char what[16];
    if (sscanf(field, "experts.%d.%15s%n", &e, what, &n) != 2 || field[n]) return NULL;
    if (!strcmp(what, "fc_w")) return &L->ex_fc_w[e];
    if (!strcmp(what, "fc_b")) return &L->ex_fc_b[e];
    if (!strcmp(what, "mlp_out_w")) return &L->ex_out_w[e];
    if (!strcmp(what, "mlp_out_b")) return &L->ex_out_b[e];
    return NULL;
}

/* Bind every tensor whose elements lie in [lo, hi) to base + (offset - lo); others untouched. */
static void bind_range(ModelTensors *m, const ParamTable *t, const ModelConfig *c, char *base, size_t elem, size_t lo,
                       size_t hi) {
    char name[64];
    for (int i = 0; i < t->count; i++) {
        const ParamInfo *p = &t->info[i];
        if (p->offset < lo || p->offset >= hi) continue;
        real *ptr = (real *)(base + (p->offset - lo) * elem);
        const char *field = p->layer >= 0 ? strchr(p->name + 7, '.') + 1 : p->name;
        if (p->layer < 0) {
            if (!strcmp(field, "tok_emb")) {
                m->tok_emb = ptr;
                if (c->tied_embeddings) m->lm_head = ptr;
            } else if (!strcmp(field, "pos_emb")) m->pos_emb = ptr;
            else if (!strcmp(field, "normf_w")) m->normf_w = ptr;
            else if (!strcmp(field, "normf_b")) m->normf_b = ptr;
            else if (!strcmp(field, "lm_head")) m->lm_head = ptr;
            continue;
        }
        LayerTensors *L = &m->layer[p->layer];
        real **slot = expert_slot(L, field);
        if (slot) {
            *slot = ptr;
            continue;
        }
        snprintf(name, sizeof name, "%s", field);
#define FIELD(f) else if (!strcmp(name, #f)) L->f = ptr;
        if (0) {}
        FIELD(norm1_w) FIELD(norm1_b) FIELD(qkv_w) FIELD(qkv_b) FIELD(attn_out_w) FIELD(attn_out_b)
        FIELD(norm2_w) FIELD(norm2_b) FIELD(fc_w) FIELD(fc_b) FIELD(mlp_out_w) FIELD(mlp_out_b)
        FIELD(router_w) FIELD(shared_fc_w) FIELD(shared_fc_b) FIELD(shared_out_w) FIELD(shared_out_b)
#undef FIELD
    }
}

real *model_tensors_get(const ModelTensors *m, const ParamInfo *p) {
    const char *field = p->layer >= 0 ? strchr(p->name + 7, '.') + 1 : p->name;
    if (p->layer < 0) {
        if (!strcmp(field, "tok_emb")) return m->tok_emb;
        if (!strcmp(field, "pos_emb")) return m->pos_emb;
        if (!strcmp(field, "normf_w")) return m->normf_w;
        if (!strcmp(field, "normf_b")) return m->normf_b;
        return m->lm_head;
    }
    const LayerTensors *L = &m->layer[p->layer];
    real **slot = expert_slot(L, field);
    if (slot) return *slot;
#define FIELD(f) if (!strcmp(field, #f)) return L->f;
    FIELD(norm1_w) FIELD(norm1_b) FIELD(qkv_w) FIELD(qkv_b) FIELD(attn_out_w) FIELD(attn_out_b)
    FIELD(norm2_w) FIELD(norm2_b) FIELD(fc_w) FIELD(fc_b) FIELD(mlp_out_w) FIELD(mlp_out_b)
    FIELD(router_w) FIELD(shared_fc_w) FIELD(shared_fc_b) FIELD(shared_out_w) FIELD(shared_out_b)
#undef FIELD
    return NULL;
}

/* The layer array (and one block of expert pointers for all layers), every pointer NULL. */
static void alloc_layers(ModelTensors *m, const ModelConfig *c) {
    memset(m, 0, sizeof *m);
    m->layer = calloc((size_t)c->layers, sizeof(LayerTensors));
    if (c->experts > 0) {
        size_t E = (size_t)c->experts;
        real **slots = calloc(4 * E * (size_t)c->layers, sizeof(real *));
        for (int l = 0; l < c->layers; l++) {
            real **s = slots + 4 * E * (size_t)l;
            m->layer[l].ex_fc_w = s, m->layer[l].ex_fc_b = s + E, m->layer[l].ex_out_w = s + 2 * E;
            m->layer[l].ex_out_b = s + 3 * E;
        }
    }
}

void model_tensors_bind(ModelTensors *m, const ParamTable *t, const ModelConfig *c, real *base) {
    alloc_layers(m, c);
    if (base) bind_range(m, t, c, (char *)base, sizeof(real), 0, t->total);
}

void model_tensors_bind_act(ModelTensors *m, const ParamTable *t, const ModelConfig *c, act *base) {
    alloc_layers(m, c);
    if (base) bind_range(m, t, c, (char *)base, act_size(), 0, t->total);
}

void model_tensors_bind_unit(ModelTensors *m, const ParamTable *t, const ModelConfig *c, int unit, real *unit_base) {
    bind_range(m, t, c, (char *)unit_base, sizeof(real), t->unit_lo[unit], t->unit_hi[unit]);
}

void model_tensors_bind_unit_act(ModelTensors *m, const ParamTable *t, const ModelConfig *c, int unit, act *unit_base) {
    bind_range(m, t, c, (char *)unit_base, act_size(), t->unit_lo[unit], t->unit_hi[unit]);
}

void model_tensors_free(ModelTensors *m) {
    if (m->layer) free(m->layer[0].ex_fc_w);
    free(m->layer);
    m->layer = NULL;
}
