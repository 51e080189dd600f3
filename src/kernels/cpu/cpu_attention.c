/* cpu_attention.c: causal multi-head / grouped-query attention on fused qkv rows, as small
 * GEMMs per (batch, head) over 64-row query blocks (block i needs keys 0 .. end of block i
 * only, so the causal half is mostly skipped). Forward is parallel over (batch, head); backward
 * over (batch, kv head) so that the query heads sharing a kv head add into its dk/dv from one
 * thread, in a fixed order. The GEMMs run on the calling thread (gemm_serial). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_kernels.h"

enum { QBLOCK = 64 };

size_t cpu_attention_saved_count(int B, int T, int H) { return (size_t)B * H * T * T; }

void cpu_attention_forward(real *out, real *att, const real *qkv, int B, int T, int H, int KV, int hd) {
    int stride = (H + 2 * KV) * hd, group = H / KV, C = H * hd;
    real scale = 1 / R_SQRT((real)hd);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            int g = h / group;
            const real *base = qkv + (size_t)b * T * stride;
            const real *q = base + (size_t)h * hd, *k = base + (size_t)(H + g) * hd, *v = base + (size_t)(H + KV + g) * hd;
            real *P = att + ((size_t)b * H + h) * T * T;
            for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                int rows = T - t0 < QBLOCK ? T - t0 : QBLOCK, end = t0 + rows; /* keys [0, end) */
                real *Pb = P + (size_t)t0 * T;
                gemm_serial(0, 1, rows, end, hd, q + (size_t)t0 * stride, stride, k, stride, 0, Pb, T);
                for (int r = 0; r < rows; r++) {
                    int t = t0 + r;
                    real *p = Pb + (size_t)r * T;
                    real maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
                    for (int s = 0; s <= t; s++) {
                        p[s] *= scale;
                        maxv = p[s] > maxv ? p[s] : maxv;
                    }
                    real sum = 0;
#pragma omp simd reduction(+ : sum)
                    for (int s = 0; s <= t; s++) {
                        p[s] = vexp(p[s] - maxv);
                        sum += p[s];
                    }
                    real inv = 1 / sum;
#pragma omp simd
                    for (int s = 0; s <= t; s++) p[s] *= inv;
                    for (int s = t + 1; s < T; s++) p[s] = 0;
                }
                gemm_serial(0, 0, rows, hd, end, Pb, T, v, stride, 0, out + ((size_t)b * T + t0) * C + (size_t)h * hd, C);
            }
        }
    }
}

void cpu_attention_backward(real *dqkv, const real *dout, const real *qkv, const real *att, int B, int T, int H, int KV,
                        int hd) {
    int stride = (H + 2 * KV) * hd, group = H / KV, C = H * hd;
    real scale = 1 / R_SQRT((real)hd);
#pragma omp parallel
    {
        real *dS = malloc((size_t)QBLOCK * T * sizeof(real)); /* one query block of d(scores) */
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++) {
            for (int g = 0; g < KV; g++) {
                const real *base = qkv + (size_t)b * T * stride;
                real *dbase = dqkv + (size_t)b * T * stride;
                const real *k = base + (size_t)(H + g) * hd, *v = base + (size_t)(H + KV + g) * hd;
                real *dk = dbase + (size_t)(H + g) * hd, *dv = dbase + (size_t)(H + KV + g) * hd;
                for (int t = 0; t < T; t++) {
                    memset(dk + (size_t)t * stride, 0, (size_t)hd * sizeof(real));
                    memset(dv + (size_t)t * stride, 0, (size_t)hd * sizeof(real));
                }
                for (int h = g * group; h < (g + 1) * group; h++) {
                    const real *q = base + (size_t)h * hd, *dy = dout + (size_t)b * T * C + (size_t)h * hd;
                    real *dq = dbase + (size_t)h * hd;
                    const real *P = att + ((size_t)b * H + h) * T * T;
                    for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                        int rows = T - t0 < QBLOCK ? T - t0 : QBLOCK, end = t0 + rows;
                        const real *Pb = P + (size_t)t0 * T, *dyb = dy + (size_t)t0 * C;
                        /* dv[0:end] += P_blk^T dy_blk; dP_blk = dy_blk v[0:end]^T */
                        gemm_serial(1, 0, end, hd, rows, Pb, T, dyb, C, 1, dv, stride);
                        gemm_serial(0, 1, rows, end, hd, dyb, C, v, stride, 0, dS, T);
                        /* dS = P * (dP - sum_s P dP) * scale, row by row */
                        for (int r = 0; r < rows; r++) {
                            int t = t0 + r;
                            const real *p = Pb + (size_t)r * T;
                            real *ds = dS + (size_t)r * T;
                            real pdp = 0;
#pragma omp simd reduction(+ : pdp)
                            for (int s = 0; s <= t; s++) pdp += p[s] * ds[s];
#pragma omp simd
                            for (int s = 0; s <= t; s++) ds[s] = p[s] * (ds[s] - pdp) * scale;
                            for (int s = t + 1; s < end; s++) ds[s] = 0;
                        }
                        /* dq_blk = dS k[0:end]; dk[0:end] += dS^T q_blk */
                        gemm_serial(0, 0, rows, hd, end, dS, T, k, stride, 0, dq + (size_t)t0 * stride, stride);
                        gemm_serial(1, 0, end, hd, rows, dS, T, q + (size_t)t0 * stride, stride, 1, dk, stride);
                    }
                }
            }
        }
        free(dS);
    }
}
