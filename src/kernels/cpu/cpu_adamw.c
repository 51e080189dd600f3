/* cpu_adamw.c: the fused AdamW update of a run of elements (the scalars are formed once per
 * tensor by src/optim/adamw.c, in torch.optim.AdamW's rounding points). */
#include "kernels/cpu/cpu_kernels.h"

void cpu_adamw_update(real *p, const real *g, real *m, real *v, size_t n, const AdamWScalars *s) {
    real decay = s->decay, b1 = s->beta1, b2 = s->beta2, one_b1 = s->one_minus_beta1, one_b2 = s->one_minus_beta2;
    real bc2_sqrt = s->bc2_sqrt, eps = s->eps, neg_step = s->neg_step;
    int wd = s->apply_decay;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        real gi = g[i];
        real pi = wd ? p[i] * decay : p[i];
        real mi = m[i] * b1 + gi * one_b1;
        real vi = v[i] * b2 + (gi * gi) * one_b2;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + neg_step * (mi / (R_SQRT(vi) / bc2_sqrt + eps));
    }
}
