/* cpu_memory.c: CPU backend memory and thread control. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/error.h"

void openblas_set_num_threads(int num_threads); /* from OpenBLAS; not in cblas.h everywhere */

static int current_threads = 0;

real *dev_alloc(size_t count) {
    if (count == 0) count = 1;
    /* 64-byte alignment for AVX-512 loads; calloc would not guarantee it. */
    size_t bytes = (count * sizeof(real) + 63) / 64 * 64;
    real *p = aligned_alloc(64, bytes);
    if (!p) myr_die("out of memory allocating %.1f MiB (reduce --batch or --seq, or the model size)",
                    bytes / 1048576.0);
    memset(p, 0, bytes);
    return p;
}

void dev_free(real *p) { free(p); }

void dev_zero(real *p, size_t count) { memset(p, 0, count * sizeof(real)); }

void kernels_set_threads(int threads) {
    if (threads < 1) threads = 1;
    current_threads = threads;
    omp_set_num_threads(threads);
    openblas_set_num_threads(1); /* BLAS runs inside our OpenMP threads (see cpu_gemm.c) */
}

int kernels_threads(void) { return current_threads ? current_threads : omp_get_max_threads(); }
