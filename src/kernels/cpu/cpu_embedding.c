/* cpu_embedding.c: token (+ learned position) embeddings. The backward scatter-add is
 * parallel over channel ranges, each thread walking all rows in order, so repeated tokens
 * accumulate in a fixed order whatever the thread count. */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_embedding_forward(real *out, const int32_t *tokens, const real *tok, const real *pos, int N, int T, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *y = out + (size_t)n * C;
        const real *e = tok + (size_t)tokens[n] * C;
        if (pos) {
            const real *p = pos + (size_t)(n % T) * C;
#pragma omp simd
            for (int c = 0; c < C; c++) y[c] = e[c] + p[c];
        } else {
            memcpy(y, e, (size_t)C * sizeof(real));
        }
    }
}

void cpu_embedding_backward(real *dtok, real *dpos, const real *dout, const int32_t *tokens, int N, int T, int C) {
    enum { COLS = 64 };
    int blocks = (C + COLS - 1) / COLS;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * COLS, c1 = c0 + COLS < C ? c0 + COLS : C;
        for (int n = 0; n < N; n++) {
            const real *dy = dout + (size_t)n * C;
            real *dt = dtok + (size_t)tokens[n] * C;
            for (int c = c0; c < c1; c++) dt[c] += dy[c];
            if (dpos) {
                real *dp = dpos + (size_t)(n % T) * C;
                for (int c = c0; c < c1; c++) dp[c] += dy[c];
            }
        }
    }
}
