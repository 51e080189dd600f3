/* cpu_loss.c: softmax fused with cross-entropy (mean over tokens). The per-row losses are
 * summed in row order in double, so the mean does not depend on the thread count. */
#include "kernels/kernels.h"

double cross_entropy_forward_backward(real *logits, real *losses, const int32_t *targets, int N, int V,
                                      int want_grad, double grad_scale) {
    real dscale = (real)(grad_scale / N);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *z = logits + (size_t)n * V;
        real maxv = z[0];
        for (int v = 1; v < V; v++)
            if (z[v] > maxv) maxv = z[v];
        /* sum of exp in double: V can be 50k+, and fp32 accumulation would drift from PyTorch */
        double sum = 0;
        for (int v = 0; v < V; v++) sum += exp((double)(z[v] - maxv));
        double logsum = log(sum);
        losses[n] = (real)(logsum - (double)(z[targets[n]] - maxv));
        if (want_grad) {
            real inv = (real)(1.0 / sum);
#pragma omp simd
            for (int v = 0; v < V; v++) z[v] = R_EXP(z[v] - maxv) * inv * dscale;
            z[targets[n]] -= dscale;
        }
    }
    double total = 0;
    for (int n = 0; n < N; n++) total += losses[n];
    return total / N;
}
