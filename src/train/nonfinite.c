/* nonfinite.c: counts NaN and infinite weights tensor by tensor (see nonfinite.h). */
#include "train/nonfinite.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"

enum { CHUNK = 1 << 20 }; /* elements copied to the host at a time when the buffer lives on a device */

size_t count_nonfinite(const real *x, size_t n) {
    size_t bad = 0;
    if (dev_host_accessible()) {
        for (size_t k = 0; k < n; k++) bad += !isfinite(x[k]);
        return bad;
    }
    real *buf = malloc((n < CHUNK ? n : CHUNK) * sizeof(real) + 1);
    for (size_t k0 = 0; k0 < n; k0 += CHUNK) {
        size_t m = n - k0 < CHUNK ? n - k0 : CHUNK;
        dev_to_host(buf, x + k0, m * sizeof(real));
        for (size_t k = 0; k < m; k++) bad += !isfinite(buf[k]);
    }
    free(buf);
    return bad;
}

size_t model_count_nonfinite(const Model *m, const char **first) {
    size_t bad = 0;
    if (first) *first = NULL;
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        size_t here = count_nonfinite(m->params + p->offset, p->numel);
        if (here && first && !*first) *first = p->name;
        bad += here;
    }
    return bad;
}
