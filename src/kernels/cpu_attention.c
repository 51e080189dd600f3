/* cpu_attention.c: causal multi-head / grouped-query attention on fused qkv rows.
 * Forward is parallel over (batch, head); backward over (batch, kv head) so that the query
 * heads sharing a kv head add into its dk/dv from one thread, in a fixed order. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

static inline real dot(const real *a, const real *b, int n) {
    real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void axpy(real *y, real a, const real *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

void attention_forward(real *out, real *att, const real *qkv, int B, int T, int H, int KV, int hd) {
    int stride = (H + 2 * KV) * hd, group = H / KV, C = H * hd;
    real scale = 1 / R_SQRT((real)hd);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            int g = h / group;
            const real *base = qkv + (size_t)b * T * stride;
            for (int t = 0; t < T; t++) {
                const real *q = base + (size_t)t * stride + (size_t)h * hd;
                real *p = att + (((size_t)b * H + h) * T + t) * T;
                real maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const real *k = base + (size_t)s * stride + (size_t)(H + g) * hd;
                    p[s] = dot(q, k, hd) * scale;
                    if (p[s] > maxv) maxv = p[s];
                }
                real sum = 0;
                for (int s = 0; s <= t; s++) {
                    p[s] = R_EXP(p[s] - maxv);
                    sum += p[s];
                }
                real inv = 1 / sum;
                for (int s = 0; s <= t; s++) p[s] *= inv;
                for (int s = t + 1; s < T; s++) p[s] = 0;
                real *y = out + ((size_t)b * T + t) * C + (size_t)h * hd;
                memset(y, 0, (size_t)hd * sizeof(real));
                for (int s = 0; s <= t; s++) axpy(y, p[s], base + (size_t)s * stride + (size_t)(H + KV + g) * hd, hd);
            }
        }
    }
}

void attention_backward(real *dqkv, const real *dout, const real *qkv, const real *att, int B, int T, int H, int KV,
                        int hd) {
    int stride = (H + 2 * KV) * hd, group = H / KV, C = H * hd;
    real scale = 1 / R_SQRT((real)hd);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < KV; g++) {
            const real *base = qkv + (size_t)b * T * stride;
            real *dbase = dqkv + (size_t)b * T * stride;
            real *dp = malloc((size_t)T * sizeof(real));
            for (int t = 0; t < T; t++) {
                memset(dbase + (size_t)t * stride + (size_t)(H + g) * hd, 0, (size_t)hd * sizeof(real));
                memset(dbase + (size_t)t * stride + (size_t)(H + KV + g) * hd, 0, (size_t)hd * sizeof(real));
            }
            for (int h = g * group; h < (g + 1) * group; h++) {
                for (int t = 0; t < T; t++) {
                    const real *p = att + (((size_t)b * H + h) * T + t) * T;
                    const real *dy = dout + ((size_t)b * T + t) * C + (size_t)h * hd;
                    const real *q = base + (size_t)t * stride + (size_t)h * hd;
                    real *dq = dbase + (size_t)t * stride + (size_t)h * hd;
                    /* dp = dy . v_s; dv_s += p_ts dy */
                    real pdp = 0;
                    for (int s = 0; s <= t; s++) {
                        const real *v = base + (size_t)s * stride + (size_t)(H + KV + g) * hd;
                        dp[s] = dot(dy, v, hd);
                        pdp += p[s] * dp[s];
                        axpy(dbase + (size_t)s * stride + (size_t)(H + KV + g) * hd, p[s], dy, hd);
                    }
                    memset(dq, 0, (size_t)hd * sizeof(real));
                    for (int s = 0; s <= t; s++) {
                        real ds = p[s] * (dp[s] - pdp) * scale;
                        const real *k = base + (size_t)s * stride + (size_t)(H + g) * hd;
                        axpy(dq, ds, k, hd);
                        axpy(dbase + (size_t)s * stride + (size_t)(H + g) * hd, ds, q, hd);
                    }
                }
            }
            free(dp);
        }
    }
}
