/* cpu_gemm.h: the CPU backend's GEMM (cpu_gemm.c), for the CPU kernels, the sgemm benchmark
 * and the CPU's measured peak (cpu_peak.h); the model reaches it only through matmul_* in kernels.h. */
#ifndef MYRIAD_KERNELS_CPU_GEMM_H
#define MYRIAD_KERNELS_CPU_GEMM_H

#include <cblas.h>

#include "kernels/real.h"

#ifdef MYRIAD_F64
#define cblas_gemm cblas_dgemm
#else
#define cblas_gemm cblas_sgemm
#endif

/* Row-major: C[M,N] (= or += when accumulate) op(A) @ op(B), op(A) is [M,K] (A stored [K,M]
 * when trans_a), op(B) is [K,N] (B stored [N,K] when trans_b). Our own AVX-512 kernel in fp32
 * when the CPU has it (gemm_is_native() says so), else BLAS. The sum over K runs in an order
 * fixed by the shapes. Host memory. */
void gemm(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
          int accumulate, real *C, int ldc);
int gemm_is_native(void);
/* Same contract as gemm() but on the calling thread only: for use inside parallel regions. */
void gemm_serial(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
                 int accumulate, real *C, int ldc);
/* The CPU's measured matmul rate, the denominator of MFU on the CPU: cpu_peak.h. */

#endif
