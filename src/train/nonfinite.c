/* nonfinite.c: counts NaN and infinite weights tensor by tensor (see nonfinite.h). */
#include "train/nonfinite.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"

enum { CHUNK = 1 << 20 }; /* elements copied to the host at a time when weights live on a device */

size_t model_count_nonfinite(const Model *m, const char **first) {
    size_t bad = 0;
    if (first) *first = NULL;
    int host = dev_host_accessible(); /* else the weights are read through the host in chunks */
    real *buf = host ? NULL : malloc(CHUNK * sizeof(real));
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        size_t here = 0;
        for (size_t k0 = 0; k0 < p->numel; k0 += CHUNK) {
            size_t n = p->numel - k0 < CHUNK ? p->numel - k0 : CHUNK;
            const real *x = m->params + p->offset + k0;
            if (!host) {
                dev_to_host(buf, x, n * sizeof(real));
                x = buf;
            }
            for (size_t k = 0; k < n; k++) here += !isfinite(x[k]);
        }
        if (here && first && !*first) *first = p->name;
        bad += here;
    }
    free(buf);
    return bad;
}
