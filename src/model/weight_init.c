/* weight_init.c: initial values by (tensor, global element) from the seed (see the header). */
#include "model/weight_init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

enum { RULE_ONE, RULE_ZERO, RULE_NORMAL };

typedef struct {
    char name[48];
    int rule;
    double std;
    uint64_t stream; /* index of the tensor's element 0 in the random stream (RULE_NORMAL) */
    int64_t rows, cols;
} InitTensor;

struct WeightInit {
    uint64_t seed;
    int n, slots;   /* tensors; hash slots (a power of two above 2n) */
    InitTensor *t;
    int *slot;      /* open addressing on the name: index into t, or -1 */
};

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char *base_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

int weight_init_create(WeightInit **out, const ModelConfig *c, uint64_t seed) {
    if (model_config_validate(c)) return -1;
    ParamTable whole;
    param_table_build(&whole, c, 1); /* the tp = 1, ep = 1 model: the order of the random stream */
    WeightInit *w = calloc(1, sizeof *w);
    w->seed = seed;
    w->n = whole.count;
    w->t = calloc((size_t)w->n, sizeof *w->t);
    for (w->slots = 16; w->slots < 2 * w->n; w->slots *= 2) {}
    w->slot = malloc((size_t)w->slots * sizeof(int));
    for (int i = 0; i < w->slots; i++) w->slot[i] = -1;
    double residual_std = 0.02 / sqrt(2.0 * c->layers);
    uint64_t stream = 0;
    for (int i = 0; i < whole.count; i++) {
        const ParamInfo *p = &whole.info[i];
        InitTensor *t = &w->t[i];
        const char *b = base_name(p->name);
        snprintf(t->name, sizeof t->name, "%s", p->name);
        t->rows = p->global_shape[0];
        t->cols = p->global_shape[1];
        if (!strcmp(b, "norm1_w") || !strcmp(b, "norm2_w") || !strcmp(b, "normf_w")) {
            t->rule = RULE_ONE;
        } else if (p->ndim == 1) {
            t->rule = RULE_ZERO;
        } else {
            t->rule = RULE_NORMAL;
            t->std = !strcmp(b, "attn_out_w") || !strcmp(b, "mlp_out_w") || !strcmp(b, "shared_out_w") ? residual_std
                                                                                                           : 0.02;
            t->stream = stream;
            stream += (uint64_t)(t->rows * t->cols); /* the global tensor: a padded vocabulary's rows draw nothing */
        }
        uint64_t h = name_hash(t->name) & (uint64_t)(w->slots - 1);
        while (w->slot[h] >= 0) h = (h + 1) & (uint64_t)(w->slots - 1);
        w->slot[h] = i;
    }
    param_table_free(&whole);
    *out = w;
    return 0;
}

void weight_init_free(WeightInit *w) {
    if (!w) return;
    free(w->t);
    free(w->slot);
    free(w);
}

static const InitTensor *find(const WeightInit *w, const char *name) {
    uint64_t h = name_hash(name) & (uint64_t)(w->slots - 1);
    for (; w->slot[h] >= 0; h = (h + 1) & (uint64_t)(w->slots - 1))
        if (!strcmp(w->t[w->slot[h]].name, name)) return &w->t[w->slot[h]];
    return NULL;
}

int weight_init_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data) {
    const WeightInit *w = ctx;
    const InitTensor *t = find(w, name);
    if (!t) return myr_error("internal: the initialization has no tensor %s", name);
    if (gshape[0] != t->rows || gshape[1] != t->cols || box->r0 < 0 || box->c0 < 0 || box->r0 + box->nr > t->rows ||
        box->c0 + box->nc > t->cols)
        return myr_error("internal: box [%lld+%lld, %lld+%lld] of %s lies outside its [%lld, %lld]", (long long)box->r0,
                         (long long)box->nr, (long long)box->c0, (long long)box->nc, name, (long long)t->rows,
                         (long long)t->cols);
    int64_t nr = box->nr, nc = box->nc;
    if (t->rule != RULE_NORMAL) {
        real v = t->rule == RULE_ONE ? 1 : 0;
        for (int64_t k = 0; k < nr * nc; k++) data[k] = v;
        return 0;
    }
    const uint64_t golden = 0x9E3779B97F4A7C15ull; /* splitmix64's increment (util/rng.h) */
#pragma omp parallel for schedule(static) if (nr * nc > 65536)
    for (int64_t r = 0; r < nr; r++) {
        uint64_t i = t->stream + (uint64_t)(box->r0 + r) * (uint64_t)t->cols + (uint64_t)box->c0;
        Rng rng = {w->seed + 2 * i * golden}; /* the state after the 2 i draws before element i */
        real *row = data + r * nc;
        for (int64_t k = 0; k < nc; k++) row[k] = (real)(t->std * rng_normal(&rng));
    }
    return 0;
}
