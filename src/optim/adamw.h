/* adamw.h: AdamW with the semantics of torch.optim.AdamW (decoupled weight decay applied as
 * p *= 1 - lr*wd before the Adam update; bias corrections in double), weight decay only on
 * tensors with 2 or more dimensions. State (m, v) covers a contiguous range [lo, hi) of the
 * flat parameter buffer, so a ZeRO shard owns exactly its slice of the state. */
#ifndef MYRIAD_OPTIM_ADAMW_H
#define MYRIAD_OPTIM_ADAMW_H

#include <stddef.h>

#include "kernels/real.h"
#include "model/params.h"

typedef struct {
    double beta1, beta2, eps, weight_decay;
} AdamWConfig;

typedef struct {
    size_t lo, hi; /* the parameter range this state covers */
    real *m, *v;   /* [hi - lo] */
    long step;     /* completed steps */
} AdamW;

void adamw_create(AdamW *o, size_t lo, size_t hi);
void adamw_destroy(AdamW *o);
/* One update of params[lo, hi) from grads (indexed like params) at learning rate lr. */
void adamw_step(AdamW *o, const AdamWConfig *cfg, double lr, real *params, const real *grads,
                const ParamTable *table);

/* The same update where p and g point at element `lo` of the range (a ZeRO shard stored
 * apart from the full flat buffer). */
void adamw_step_slice(AdamW *o, const AdamWConfig *cfg, double lr, real *p_at_lo, const real *g_at_lo,
                      const ParamTable *table);

#endif
