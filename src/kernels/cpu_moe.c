/* cpu_moe.c: the mixture-of-experts kernels of kernels.h: router softmax and top-k, its
 * backward, and the row gathers/scatters that move tokens to experts and back. */
#include <math.h>

#include "kernels/cpu_kernels.h"

void cpu_moe_router_topk(real *probs, int32_t *topk, real *gates, int N, int E, int k) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *p = probs + (size_t)n * E;
        double mx = p[0], sum = 0;
        for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
        for (int e = 0; e < E; e++) sum += exp((double)p[e] - mx);
        for (int e = 0; e < E; e++) p[e] = (real)(exp((double)p[e] - mx) / sum);
        /* k passes of arg-max; a strict > keeps the lower index on ties */
        int32_t *t = topk + (size_t)n * k;
        double chosen = 0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= t[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            t[j] = best;
            chosen += p[best];
        }
        for (int j = 0; j < k; j++) gates[(size_t)n * k + j] = (real)(p[t[j]] / chosen);
    }
}

void cpu_moe_router_backward(real *dlogits, const real *probs, const int32_t *topk, const real *gates, const real *dgates,
                         const real *daux, int N, int T, int E, int k) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *p = probs + (size_t)n * E, *g = gates + (size_t)n * k, *dg = dgates + (size_t)n * k;
        const int32_t *t = topk + (size_t)n * k;
        real *d = dlogits + (size_t)n * E;
        for (int e = 0; e < E; e++) d[e] = daux[(size_t)(n / T) * E + e]; /* d probs first */
        /* gate j = p[t_j] / S with S = sum of the chosen p: d p[t_i] += (dg_i - sum_j dg_j g_j) / S */
        double S = 0, dot = 0;
        for (int j = 0; j < k; j++) S += p[t[j]], dot += (double)dg[j] * g[j];
        for (int j = 0; j < k; j++) d[t[j]] += (real)((dg[j] - dot) / S);
        /* softmax: dlogit = p * (dp - sum(dp * p)) */
        double s = 0;
        for (int e = 0; e < E; e++) s += (double)d[e] * p[e];
        for (int e = 0; e < E; e++) d[e] = (real)(p[e] * (d[e] - s));
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
