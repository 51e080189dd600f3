/* clip.h: global-norm gradient clipping with torch.nn.utils.clip_grad_norm_ semantics:
 * total = sqrt(sum of squares of all gradients); coef = max_norm / (total + 1e-6);
 * gradients are scaled by coef when coef < 1. Returns the norm before clipping. */
#ifndef MYRIAD_OPTIM_CLIP_H
#define MYRIAD_OPTIM_CLIP_H

#include <stddef.h>

#include "kernels/real.h"

/* Squares are summed in double in a fixed order; sum_sq may come from several ranks (ZeRO),
 * so the norm and the scaling are separate steps. */
double grad_sum_squares(const real *grads, size_t n);
/* Scale factor for a total norm (1 when no clipping: max_norm <= 0 or norm small enough). */
double clip_coefficient(double total_norm, double max_norm);

#endif
