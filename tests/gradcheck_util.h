/* gradcheck_util.h: every parameter's gradient against central finite differences (the model
 * compiled in double: build/libmyriad_f64.a); shared by the dense and the MoE gradient checks.
 * Include after test.h (it reports through CHECK). */
#ifndef MYRIAD_TESTS_GRADCHECK_UTIL_H
#define MYRIAD_TESTS_GRADCHECK_UTIL_H

#include <math.h>

#include "model/model.h"
#include "util/rng.h"

/* Move every parameter off its init by 0.3 N(0, 1) (norm weights at 1 and zero biases would leave
 * paths untested) and draw n input and target tokens, all from rng. */
static inline void gradcheck_perturb_and_draw(Model *m, Rng *rng, int32_t *x, int32_t *y, int n) {
    for (size_t i = 0; i < m->table.total; i++) m->params[i] += 0.3 * rng_normal(rng);
    for (int i = 0; i < n; i++) {
        x[i] = (int32_t)rng_below(rng, m->cfg.vocab);
        y[i] = (int32_t)rng_below(rng, m->cfg.vocab);
    }
}

/* m->grads must hold the gradient of the loss over (x, y) already. Checks each tensor's relative
 * error (< 1e-4, and a gradient that is not all zero) under `label`; returns the worst error and
 * its tensor's name in *worst_name. */
static inline double gradcheck_all_tensors(Model *m, const int32_t *x, const int32_t *y, int B, int T,
                                           const char *label, const char **worst_name) {
    double eps = 1e-6, worst = 0;
    *worst_name = "";
    for (int t = 0; t < m->table.count; t++) {
        const ParamInfo *p = &m->table.info[t];
        double diff2 = 0, g2 = 0, fd2 = 0;
        for (size_t k = 0; k < p->numel; k++) {
            real *w = m->params + p->offset + k;
            real saved = *w;
            *w = saved + eps;
            double lp = model_forward(m, x, y, B, T, 0);
            *w = saved - eps;
            double lm = model_forward(m, x, y, B, T, 0);
            *w = saved;
            double fd = (lp - lm) / (2 * eps), g = m->grads[p->offset + k];
            diff2 += (g - fd) * (g - fd);
            g2 += g * g;
            fd2 += fd * fd;
        }
        double rel = sqrt(diff2) / fmax(fmax(sqrt(g2), sqrt(fd2)), 1e-12);
        CHECK(rel < 1e-4, "%s %s: relative error %.3g", label, p->name, rel);
        CHECK(g2 > 0, "%s %s: gradient is all zero (path not exercised)", label, p->name);
        if (rel > worst) worst = rel, *worst_name = p->name;
    }
    return worst;
}

#endif
