/* adamw.c: the AdamW update over a parameter range, tensor by tensor (decay differs). */
#include "optim/adamw.h"

#include <math.h>

#include "kernels/kernels.h"

void adamw_create(AdamW *o, size_t lo, size_t hi) {
    o->lo = lo;
    o->hi = hi;
    o->m = dev_alloc(hi - lo);
    o->v = dev_alloc(hi - lo);
    o->step = 0;
}

void adamw_destroy(AdamW *o) {
    dev_free(o->m);
    dev_free(o->v);
    o->m = o->v = NULL;
}

/* Same operation order and rounding points as torch's _single_tensor_adamw (fp32 tensors,
 * python-float scalars): p *= (1 - lr*wd); m = m*b1 + g*(1-b1); v = v*b2 + g*g*(1-b2);
 * p += -step_size * m / (sqrt(v)/sqrt(bc2) + eps). The scalars are rounded here once; the
 * element loop is the fused adamw_update kernel (kernels.h). */
static void update(real *p, const real *g, real *m, real *v, size_t n, const AdamWConfig *c, double lr, double wd,
                   long step) {
    double bc1 = 1 - pow(c->beta1, (double)step), bc2 = 1 - pow(c->beta2, (double)step);
    AdamWScalars s = {.decay = (real)(1 - lr * wd),
                      .beta1 = (real)c->beta1,
                      .beta2 = (real)c->beta2,
                      .one_minus_beta1 = (real)(1 - c->beta1),
                      .one_minus_beta2 = (real)(1 - c->beta2),
                      .bc2_sqrt = (real)sqrt(bc2),
                      .eps = (real)c->eps,
                      .neg_step = (real)(-(lr / bc1)),
                      .apply_decay = wd != 0};
    adamw_update(p, g, m, v, n, &s);
}

void adamw_step(AdamW *o, const AdamWConfig *cfg, double lr, real *params, const real *grads,
                const ParamTable *table) {
    adamw_step_slice(o, cfg, lr, params + o->lo, grads + o->lo, table);
}

void adamw_step_slice(AdamW *o, const AdamWConfig *cfg, double lr, real *p_at_lo, const real *g_at_lo,
                      const ParamTable *table) {
    o->step++;
    for (int t = 0; t < table->count; t++) {
        const ParamInfo *p = &table->info[t];
        size_t a = p->offset > o->lo ? p->offset : o->lo;
        size_t b = p->offset + p->numel < o->hi ? p->offset + p->numel : o->hi;
        if (a >= b) continue;
        update(p_at_lo + (a - o->lo), g_at_lo + (a - o->lo), o->m + (a - o->lo), o->v + (a - o->lo), b - a, cfg, lr,
               p->decay ? cfg->weight_decay : 0.0, o->step);
    }
}
