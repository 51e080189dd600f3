/* cpu_matmul.c: the linear layer on the backend's gemm (cpu_gemm.c). Weights are [out, in] as in nn.Linear. */
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
