/* cpu_reduce.h: deterministic column reductions shared by the CPU kernels (internal). */
#ifndef MYRIAD_KERNELS_CPU_REDUCE_H
#define MYRIAD_KERNELS_CPU_REDUCE_H
#include "kernels/real.h"
/* acc[c] += sum over n of x[n*C + c], in an order fixed by (N, C) alone. */
void column_sums_accumulate(real *acc, const real *x, int N, int C);
#endif
