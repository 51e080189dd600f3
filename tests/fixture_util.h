/* fixture_util.h: reading PyTorch fixtures (tests/fixtures/, written by scripts/make_*_fixture.py)
 * and comparing against them; shared by the dense and the MoE fixture tests. */
#ifndef MYRIAD_TESTS_FIXTURE_UTIL_H
#define MYRIAD_TESTS_FIXTURE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <stdio.h>

#include "io/safetensors.h"
#include "kernels/real.h"
#include "model/hf_weights.h"

/* A tensor of the fixture as floats (malloc'd), its element count in *n; NULL if absent/unreadable. */
static inline float *read_tensor(const StFile *f, const char *name, int64_t *n) {
    const StTensor *t = st_find(f, name);
    if (!t) return NULL;
    *n = st_numel(t);
    float *buf = malloc((size_t)*n * sizeof(float));
    if (st_read_f32(f, t, buf, *n)) { free(buf); return NULL; }
    return buf;
}

/* max |got - ref| / max |ref| */
static inline double scaled_error(const float *ref, const real *got, int64_t n) {
    double maxdiff = 0, maxref = 0;
    for (int64_t i = 0; i < n; i++) {
        maxdiff = fmax(maxdiff, fabs((double)got[i] - ref[i]));
        maxref = fmax(maxref, fabs((double)ref[i]));
    }
    return maxdiff / fmax(maxref, 1e-30);
}

/* Our gradients as a safetensors file under their Hugging Face names (hf_save of the gradient
 * buffer), in a fresh directory made from the mkdtemp template `dir`, opened in *out (path: the
 * file's name). 0, or -1 (myr_last_error says why when hf_save or st_open failed). */
static inline int open_grads_as_hf(Model *m, char *dir, char *path, size_t n, StFile *out) {
    if (!mkdtemp(dir)) return -1;
    real *saved = m->params;
    m->params = m->grads;
    int rc = hf_save(dir, m);
    m->params = saved;
    if (rc) return -1;
    snprintf(path, n, "%s/model.safetensors", dir);
    return st_open(path, out);
}

#endif
