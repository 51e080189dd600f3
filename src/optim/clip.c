/* clip.c: global gradient norm and the clip coefficient. */
#include "optim/clip.h"

#include "kernels/kernels.h"

double grad_sum_squares(const real *grads, size_t n) { return sum_squares(grads, n); }

double clip_coefficient(double total_norm, double max_norm) {
    if (max_norm <= 0) return 1.0;
    double coef = max_norm / (total_norm + 1e-6);
    return coef < 1.0 ? coef : 1.0;
}
