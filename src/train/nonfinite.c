/* nonfinite.c: counts NaN and infinite weights tensor by tensor (see nonfinite.h). */
#include "train/nonfinite.h"

#include <math.h>

size_t model_count_nonfinite(const Model *m, const char **first) {
    size_t bad = 0;
    if (first) *first = NULL;
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.info[i];
        const real *x = m->params + p->offset;
        size_t here = 0;
        for (size_t k = 0; k < p->numel; k++) here += !isfinite(x[k]);
        if (here && first && !*first) *first = p->name;
        bad += here;
    }
    return bad;
}
