/* test_weight_init.c: the piecewise seeded initialization (model/weight_init.h) gives every
 * element the value of the one sequential generator that initialized the whole model before
 * (the oracle below is that algorithm, kept verbatim), for the whole model, tensor-parallel
 * slices, pipeline stages with expert parallelism, and arbitrary flat ranges of slices (ZeRO
 * shards), bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/weight_init.h"
#include "test.h"
#include "util/rng.h"

/* The sequential initialization of a whole model (what model_init_weights did before pieces). */
static void oracle_init(Model *m, uint64_t seed) {
    Rng rng = {seed};
    double residual_std = 0.02 / sqrt(2.0 * m->cfg.layers);
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        real *w = m->params + p->offset;
        const char *base = strrchr(p->name, '.') ? strrchr(p->name, '.') + 1 : p->name;
        if (!strcmp(base, "norm1_w") || !strcmp(base, "norm2_w") || !strcmp(base, "normf_w")) {
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

static ModelConfig gpt2_cfg(void) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    model_config_defaults(&c, ARCH_GPT2);
    c.layers = 3, c.hidden = 16, c.heads = 4, c.kv_heads = 4, c.ffn = 40, c.vocab = 37, c.max_seq = 12;
    return c;
}

static ModelConfig llama_moe_cfg(void) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    model_config_defaults(&c, ARCH_LLAMA);
    c.layers = 4, c.hidden = 16, c.heads = 4, c.kv_heads = 2, c.ffn = 24, c.vocab = 41, c.max_seq = 12;
    c.experts = 4, c.top_k = 2, c.shared_experts = 1, c.expert_ffn = 8, c.moe_every = 2;
    c.attn_bias = 1, c.mlp_bias = 1;
    return c;
}

/* Compare every tensor of `part` with the oracle's whole model, slice by slice. */
static int same_as_whole(const Model *part, Model *whole) {
    int bad = 0;
    for (int i = 0; i < part->table.count; i++) {
        const ParamInfo *p = &part->table.info[i];
        const ParamInfo *q = param_table_find(&whole->table, p->tied_copy ? "tok_emb" : p->name);
        if (!q) return -1;
        real *want = malloc(p->numel * sizeof(real));
        param_shard_copy(&part->cfg, p, part->tp.size, part->tp.rank, whole->params + q->offset, want, 1);
        if (memcmp(want, part->params + p->offset, p->numel * sizeof(real))) bad++;
        free(want);
    }
    return bad;
}

static void test_whole_model_matches_sequential(void) {
    ModelConfig cs[2] = {gpt2_cfg(), llama_moe_cfg()};
    for (int k = 0; k < 2; k++) {
        Model a, b;
        CHECK(!model_create(&a, &cs[k]) && !model_create(&b, &cs[k]), "create");
        oracle_init(&a, 1234 + k);
        model_init_weights(&b, 1234 + k);
        CHECK(!memcmp(a.params, b.params, a.table.total * sizeof(real)), "config %d: pieces = one sequential stream", k);
        model_destroy(&a);
        model_destroy(&b);
    }
}

static void test_slices_and_stages(void) {
    ModelConfig cs[2] = {gpt2_cfg(), llama_moe_cfg()};
    for (int k = 0; k < 2; k++) {
        Model whole;
        CHECK(!model_create(&whole, &cs[k]), "create");
        oracle_init(&whole, 99);
        StageSpec stages[2] = {{0, 2, 1, 0}, {2, cs[k].layers, 0, 1}};
        for (int tp = 1; tp <= 2; tp++)
            for (int ep = 1; ep <= (cs[k].experts ? 2 : 1); ep++)
                for (int s = 0; s < 2; s++)
                    for (int r = 0; r < tp; r++)
                        for (int e = 0; e < ep; e++) {
                            Model m;
                            CHECK(!model_create_ep(&m, &cs[k], 4, tp, r, ep, e, &stages[s]), "create part");
                            model_init_weights(&m, 99);
                            int bad = same_as_whole(&m, &whole);
                            CHECK(bad == 0, "config %d tp %d rank %d ep %d/%d stage %d: %d tensors differ", k, tp, r, e, ep,
                                  s, bad);
                            model_destroy(&m);
                        }
        model_destroy(&whole);
    }
}

/* Flat ranges of a slice (a ZeRO shard cuts a tensor anywhere) cover it with boxes, in order. */
typedef struct {
    WeightInit *w;
    int boxes;
} Counting;

static int counting_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data) {
    Counting *c = ctx;
    c->boxes++;
    return weight_init_box(c->w, name, gshape, box, data);
}

static void test_flat_ranges(void) {
    ModelConfig c = llama_moe_cfg();
    Model whole, part;
    CHECK(!model_create(&whole, &c) && !model_create_tp(&part, &c, 1, 2, 1), "create");
    oracle_init(&whole, 5);
    Counting cnt = {NULL, 0};
    CHECK(!weight_init_create(&cnt.w, &c, 5), "plan");
    unsigned seed = 1;
    for (int i = 0; i < part.table.count; i++) {
        const ParamInfo *p = &part.table.info[i];
        int64_t n = (int64_t)p->numel, a = 0;
        while (a < n) { /* random cuts */
            seed = seed * 1103515245u + 12345u;
            int64_t b = a + 1 + (int64_t)((seed >> 8) % (unsigned)(n - a));
            CHECK(!param_range_boxes(&c, p, 2, 1, a, b, part.params + p->offset + a, counting_box, &cnt), "range");
            a = b;
        }
    }
    CHECK(same_as_whole(&part, &whole) == 0, "flat ranges");
    CHECK(cnt.boxes > part.table.count, "ranges were cut into boxes (%d)", cnt.boxes);
    /* a name the plan does not know, and a box outside its tensor, are errors */
    int64_t g[2] = {16, 16};
    TensorBox box = {0, 1, 0, 1};
    real v;
    CHECK(weight_init_box(cnt.w, "layers.9.qkv_w", g, &box, &v) != 0, "unknown tensor refused");
    TensorBox out = {40, 2, 0, 16};
    real buf[32];
    CHECK(weight_init_box(cnt.w, "tok_emb", (int64_t[2]){41, 16}, &out, buf) != 0, "box outside refused");
    weight_init_free(cnt.w);
    model_destroy(&whole);
    model_destroy(&part);
}

int main(void) {
    RUN(test_whole_model_matches_sequential);
    RUN(test_slices_and_stages);
    RUN(test_flat_ranges);
    return TEST_SUMMARY();
}
