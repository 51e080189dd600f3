/* cpu_norm.c: LayerNorm (GPT-2) and RMSNorm (Llama), forward and backward.
 * Backward accumulates the weight/bias gradients in fixed 64-row chunks (see cpu_reduce.c)
 * so the result does not depend on the thread count. */
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"

enum { ROWS_PER_CHUNK = 64 };

void cpu_layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                       int N, int C, real eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        real *y = out + (size_t)n * C;
        real m = 0;
#pragma omp simd reduction(+ : m)
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        real v = 0;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        real s = 1 / R_SQRT(v + eps);
#pragma omp simd
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* Shared by both norms: per-chunk partial sums of dout*xhat (and dout) reduced in chunk order. */
static void reduce_partials(real *dst, const real *partial, int chunks, int C) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        real s = 0;
        for (int ch = 0; ch < chunks; ch++) s += partial[(size_t)ch * C + c];
        dst[c] += s;
    }
}

void cpu_layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, int N, int C) {
    int chunks = (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
    real *pw = calloc((size_t)chunks * C, sizeof(real));
    real *pb = calloc((size_t)chunks * C, sizeof(real));
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < chunks; ch++) {
        real *cw = pw + (size_t)ch * C, *cb = pb + (size_t)ch * C;
        int end = (ch + 1) * ROWS_PER_CHUNK < N ? (ch + 1) * ROWS_PER_CHUNK : N;
        for (int n = ch * ROWS_PER_CHUNK; n < end; n++) {
            const real *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            real *dx = dinp + (size_t)n * C;
            real m = mean[n], s = rstd[n];
            real mean_dxhat = 0, mean_dxhat_xhat = 0;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
            for (int c = 0; c < C; c++) {
                real xhat = (x[c] - m) * s;
                real dxhat = dy[c] * w[c];
                mean_dxhat += dxhat;
                mean_dxhat_xhat += dxhat * xhat;
            }
            mean_dxhat /= C;
            mean_dxhat_xhat /= C;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                real xhat = (x[c] - m) * s;
                real dxhat = dy[c] * w[c];
                dx[c] += s * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
                cw[c] += dy[c] * xhat;
                cb[c] += dy[c];
            }
        }
    }
    reduce_partials(dw, pw, chunks, C);
    reduce_partials(db, pb, chunks, C);
    free(pw);
    free(pb);
}

void cpu_rmsnorm_forward(real *out, real *rstd, const real *inp, const real *w, int N, int C, real eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *x = inp + (size_t)n * C;
        real *y = out + (size_t)n * C;
        real ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        real s = 1 / R_SQRT(ss / C + eps);
#pragma omp simd
        for (int c = 0; c < C; c++) y[c] = w[c] * (x[c] * s);
        rstd[n] = s;
    }
}

void cpu_rmsnorm_backward(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd,
                      int N, int C) {
    int chunks = (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
    real *pw = calloc((size_t)chunks * C, sizeof(real));
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < chunks; ch++) {
        real *cw = pw + (size_t)ch * C;
        int end = (ch + 1) * ROWS_PER_CHUNK < N ? (ch + 1) * ROWS_PER_CHUNK : N;
        for (int n = ch * ROWS_PER_CHUNK; n < end; n++) {
            const real *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            real *dx = dinp + (size_t)n * C;
            real s = rstd[n];
            real mean_dxhat_xhat = 0;
#pragma omp simd reduction(+ : mean_dxhat_xhat)
            for (int c = 0; c < C; c++) mean_dxhat_xhat += dy[c] * w[c] * x[c] * s;
            mean_dxhat_xhat /= C;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                real xhat = x[c] * s;
                dx[c] += s * (dy[c] * w[c] - xhat * mean_dxhat_xhat);
                cw[c] += dy[c] * xhat;
            }
        }
    }
    reduce_partials(dw, pw, chunks, C);
    free(pw);
}
