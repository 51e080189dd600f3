/* cpu_gemm.h: backend-internal GEMM entry points (the public one, gemm, is in kernels.h). */
#ifndef MYRIAD_KERNELS_CPU_GEMM_H
#define MYRIAD_KERNELS_CPU_GEMM_H

#include "kernels/real.h"

/* Same contract as gemm() but on the calling thread only: for use inside parallel regions. */
void gemm_serial(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
                 int accumulate, real *C, int ldc);

#endif
