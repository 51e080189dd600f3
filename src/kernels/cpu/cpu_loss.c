/* cpu_loss.c: softmax fused with cross-entropy (mean over tokens). Each row: max, then
 * e^(z - max) with the vectorised exp (cpu_math.h), summed in double (V can be 50k+, and an
 * fp32 sum would drift from PyTorch) in a fixed order; with a gradient wanted the exponentials
 * are kept in the logits buffer and scaled in place, so exp runs once per logit. The per-row
 * losses are summed in row order in double, so the mean does not depend on the thread count.
 * Rows are ld apart; only columns [0, V) are read (a padded vocabulary's columns [V, ld) are not
 * tokens, and get a zero gradient), so the result is the same bits for any ld. */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_kernels.h"

double cpu_cross_entropy_forward_backward(real *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                                      int want_grad, double grad_scale) {
    real dscale = (real)(grad_scale / N);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *z = logits + (size_t)n * ld;
        real maxv = z[0];
#pragma omp simd reduction(max : maxv)
        for (int v = 0; v < V; v++) maxv = z[v] > maxv ? z[v] : maxv;
        real zt = z[targets[n]];
        double sum = 0;
        if (want_grad) {
#pragma omp simd reduction(+ : sum)
            for (int v = 0; v < V; v++) {
                real e = vexp(z[v] - maxv);
                z[v] = e;
                sum += e;
            }
        } else {
#pragma omp simd reduction(+ : sum)
            for (int v = 0; v < V; v++) sum += vexp(z[v] - maxv);
        }
        losses[n] = (real)(log(sum) - (double)(zt - maxv));
        if (want_grad) {
            real scale = (real)(1.0 / sum) * dscale;
#pragma omp simd
            for (int v = 0; v < V; v++) z[v] *= scale;
            z[targets[n]] -= dscale;
            for (int v = V; v < ld; v++) z[v] = 0;
        }
    }
    double total = 0;
    for (int n = 0; n < N; n++) total += losses[n];
    return total / N;
}
