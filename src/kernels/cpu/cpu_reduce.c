/* cpu_reduce.c: reductions whose result does not depend on the number of threads.
 * Column sums over many rows use fixed row chunks: each chunk is summed in row order into
 * its own partial, then the partials are added in chunk order. The chunking depends only on
 * the shape, so --threads 1 and --threads 2 produce the same bits. */
#include <stdlib.h>

#include "kernels/cpu/cpu_reduce.h"
#include "kernels/cpu/cpu_kernels.h"
#include "util/bf16.h"

enum { ROWS_PER_CHUNK = 64 };

void column_sums_accumulate(real *acc, const real *x, int N, int C) {
    int chunks = (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
    real *partial = malloc((size_t)chunks * C * sizeof(real));
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < chunks; ch++) {
        real *p = partial + (size_t)ch * C;
        for (int c = 0; c < C; c++) p[c] = 0;
        int end = (ch + 1) * ROWS_PER_CHUNK < N ? (ch + 1) * ROWS_PER_CHUNK : N;
        for (int n = ch * ROWS_PER_CHUNK; n < end; n++) {
            const real *row = x + (size_t)n * C;
#pragma omp simd
            for (int c = 0; c < C; c++) p[c] += row[c];
        }
    }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        real s = 0;
        for (int ch = 0; ch < chunks; ch++) s += partial[(size_t)ch * C + c];
        acc[c] += s;
    }
    free(partial);
}

/* One chunk's sum of squares in LANES independent double accumulators (element i goes to lane
 * i mod LANES), added in lane order at the end. A single running sum cannot be vectorized without
 * reordering it; fixed lanes can, and their order is part of the code, so AVX2 and AVX-512 builds
 * and every thread count give the same bits. */
enum { LANES = 8 };
static double chunk_sum_squares(const real *x, size_t n) {
    double lane[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
#pragma omp simd
        for (int j = 0; j < LANES; j++) lane[j] += (double)x[i + j] * x[i + j];
    for (int j = 0; i < n; i++, j++) lane[j] += (double)x[i] * x[i];
    double s = 0;
    for (int j = 0; j < LANES; j++) s += lane[j];
    return s;
}

double cpu_sum_squares(const real *x, size_t n) {
    enum { CHUNK = 1 << 14 };
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    double *partial = malloc((chunks ? chunks : 1) * sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t ch = 0; ch < chunks; ch++) {
        size_t end = (ch + 1) * CHUNK < n ? (ch + 1) * CHUNK : n;
        partial[ch] = chunk_sum_squares(x + ch * CHUNK, end - ch * CHUNK);
    }
    double total = 0;
    for (size_t ch = 0; ch < chunks; ch++) total += partial[ch];
    free(partial);
    return total;
}

void cpu_scale_inplace(real *x, real s, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* The comm layer's bf16 reduction (docs/COMM.md): src holds nsrc copies of n bf16 values back to
 * back; each output is their fp32 sum (or max) in copy order, divided by `divisor` for op 1 (avg),
 * rounded once to bf16. Elements are independent, so threads cannot change the bits. */
void cpu_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t k = 0; k < n; k++) {
        float acc = bf16_to_f32(src[k]);
        for (int s = 1; s < nsrc; s++) {
            float v = bf16_to_f32(src[(size_t)s * n + k]);
            acc = op == 2 ? (v > acc ? v : acc) : acc + v;
        }
        if (op == 1 && divisor > 1) acc /= (float)divisor;
        out[k] = f32_to_bf16(acc);
    }
}
