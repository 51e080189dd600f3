/* cpu_moe.c: the mixture-of-experts kernels of kernels.h: router softmax and top-k, its
 * backward, and the row gathers/scatters that move tokens to experts and back. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

#define MOE_ELEM real
#define MOE_ROW_FN static inline
#include "kernels/moe_router_row.h"

void cpu_moe_router_topk(real *probs, int32_t *topk, real *gates, int N, int E, int k) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        moe_router_topk_row(probs + (size_t)n * E, topk + (size_t)n * k, gates + (size_t)n * k, E, k);
}

void cpu_moe_router_backward(real *dlogits, const real *probs, const int32_t *topk, const real *gates, const real *dgates,
                         const real *daux, int N, int T, int E, int k) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *d = dlogits + (size_t)n * E;
        for (int e = 0; e < E; e++) d[e] = daux[(size_t)(n / T) * E + e]; /* d probs first */
        moe_router_backward_row(d, probs + (size_t)n * E, topk + (size_t)n * k, gates + (size_t)n * k,
                                dgates + (size_t)n * k, E, k);
    }
}

void cpu_moe_gather_rows(real *out, const real *x, const int32_t *idx, const real *scale, int R, int C) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        const real *src = x + (size_t)idx[r] * C;
        real *dst = out + (size_t)r * C, s = scale ? scale[r] : 1;
        for (int c = 0; c < C; c++) dst[c] = scale ? s * src[c] : src[c];
    }
}

void cpu_moe_scatter_rows(real *out, const real *x, const int32_t *idx, int R, int C) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        const real *src = x + (size_t)r * C;
        real *dst = out + (size_t)idx[r] * C;
        for (int c = 0; c < C; c++) dst[c] = src[c];
    }
}

void cpu_moe_combine(real *out, const real *x, const int32_t *idx, const real *w, int R, int C) {
    /* rows may repeat in idx, so threads split the columns: each output element is summed in r order */
    enum { BLOCK = 64 };
    int blocks = (C + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < blocks; b++) {
        int c0 = b * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        for (int r = 0; r < R; r++) {
            const real *src = x + (size_t)r * C;
            real *dst = out + (size_t)idx[r] * C, s = w ? w[r] : 1;
            for (int c = c0; c < c1; c++) dst[c] += s * src[c];
        }
    }
}

void cpu_moe_row_dot(real *out, const real *a, const int32_t *idx, const real *b, int R, int C) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        const real *u = a + (size_t)idx[r] * C, *v = b + (size_t)r * C;
        double s = 0;
        for (int c = 0; c < C; c++) s += (double)u[c] * v[c];
        out[r] = (real)s;
    }
}

void cpu_moe_scatter_scalars(real *dst, const real *src, const int32_t *slot, int A) {
    for (int a = 0; a < A; a++) dst[slot[a]] = src[a];
}
