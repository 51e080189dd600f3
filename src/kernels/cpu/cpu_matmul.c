/* cpu_matmul.c: the linear layer on the backend's gemm (cpu_gemm.c). Weights are [out, in] as in nn.Linear. */
#include <string.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_reduce.h"
#include "kernels/cpu/cpu_kernels.h"

void cpu_matmul_forward(real *out, const real *inp, const real *w, const real *bias, int N, int IC, int OC) {
    gemm(0, 1, N, OC, IC, inp, IC, w, IC, 0, out, OC);
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            real *row = out + (size_t)n * OC;
#pragma omp simd
            for (int o = 0; o < OC; o++) row[o] += bias[o];
        }
    }
}

void cpu_matmul_backward(real *dinp, real *dw, real *dbias, const real *dout, const real *inp, const real *w,
                     int N, int IC, int OC, int accumulate_dinp) {
    if (dinp)
        gemm(0, 0, N, IC, OC, dout, OC, w, IC, accumulate_dinp, dinp, IC);
    gemm(1, 0, OC, IC, N, dout, OC, inp, IC, 1, dw, IC);
    if (dbias) column_sums_accumulate(dbias, dout, N, OC);
}

/* The LM head over V real rows of Vr (kernels.h): GEMMs of the unpadded shape on strided rows,
 * so a padded run computes the unpadded one's bits whichever GEMM engine runs (BLAS's results
 * depend on the shape: its edge kernels and K unrolling differ). */
void cpu_lm_head_forward(real *logits, const real *inp, const real *w, int N, int IC, int V, int Vr) {
    gemm(0, 1, N, V, IC, inp, IC, w, IC, 0, logits, Vr);
    if (Vr > V)
        for (int n = 0; n < N; n++) memset(logits + (size_t)n * Vr + V, 0, (size_t)(Vr - V) * sizeof(real));
}

void cpu_lm_head_backward(real *dinp, real *dw, const real *dlogits, const real *inp, const real *w, int N, int IC,
                          int V, int Vr) {
    gemm(0, 0, N, IC, V, dlogits, Vr, w, IC, 0, dinp, IC);
    gemm(1, 0, V, IC, N, dlogits, Vr, inp, IC, 1, dw, IC);
}
