/* nonfinite.h: finding NaN and infinity in a model's weights (wherever the backend keeps them: a device's
 * buffers are read through the host in chunks), for the checks that
 * keep a non-finite model from being trained from, evaluated as if fine, or saved over a good one. */
#ifndef MYRIAD_TRAIN_NONFINITE_H
#define MYRIAD_TRAIN_NONFINITE_H

#include <stddef.h>

#include "model/model.h"

/* Non-finite parameters of m (padding excluded); *first names the first tensor holding one
 * (NULL when none). */
size_t model_count_nonfinite(const Model *m, const char **first);
/* Non-finite elements of n reals in backend memory (a ZeRO-3 parameter shard, say). */
size_t count_nonfinite(const real *x, size_t n);

#endif
