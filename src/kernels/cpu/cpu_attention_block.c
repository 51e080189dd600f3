/* cpu_attention_block.c: blockwise attention for ring (context-parallel) attention: one block
 * pair of queries x keys at a time, as small GEMMs per (batch, head), with the online-softmax
 * merge into a running (output, log-sum-exp) in the forward and the flash-style backward from
 * the final log-sum-exp and delta = rowsum(dout * out). Forward and delta are parallel over
 * (batch, head); backward over (batch, kv head) so that the query heads sharing a kv head add
 * into its dk/dv from one thread, in a fixed order (the result does not depend on threads). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_math.h"

enum { TILE = 64 }; /* query rows per tile: a tile of scores stays in cache */

/* keys row t may see: all Sk, or t + 1 on the causal diagonal */
static int keys_seen(const AttnBlock *s, int t) { return s->causal ? t + 1 : s->Sk; }
/* the first key row t may see: 0, or the start of its document within this block */
static int first_key(const AttnBlock *s, int b, int t) {
    if (!s->q_lo) return 0;
    int j = s->q_lo[b * s->lo_bs + t] - s->k_pos0;
    return j < 0 ? 0 : j;
}

void cpu_attention_block_forward(real *out, real *lse, const real *q, const real *k, const real *v, const AttnBlock *s) {
    int B = s->B, H = s->H, Sq = s->Sq, Sk = s->Sk, hd = s->hd, group = s->H / s->KV;
    real scale = 1 / R_SQRT((real)hd);
#pragma omp parallel
    {
        /* per thread, one tile of query rows: the probabilities, the output and each row's block lse */
        real *P = malloc(((size_t)TILE * Sk + (size_t)TILE * hd + TILE) * sizeof(real));
        real *ob = P + (size_t)TILE * Sk, *bl = ob + (size_t)TILE * hd;
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                int g = h / group;
                const real *kp = k + b * s->kv_bs + (size_t)g * hd, *vp = v + b * s->kv_bs + (size_t)g * hd;
                for (int t0 = 0; t0 < Sq; t0 += TILE) {
                    int rows = Sq - t0 < TILE ? Sq - t0 : TILE, end = s->causal ? t0 + rows : Sk; /* keys [0, end) */
                    const real *qp = q + b * s->q_bs + (size_t)t0 * s->q_rs + (size_t)h * hd;
                    real *op = out + b * s->o_bs + (size_t)t0 * s->o_rs + (size_t)h * hd;
                    real *lp = lse + b * s->lse_bs + h * s->lse_hs + t0;
                    gemm_serial(0, 1, rows, end, hd, qp, s->q_rs, kp, s->kv_rs, 0, P, end);
                    for (int r = 0; r < rows; r++) {
                        real *p = P + (size_t)r * end;
                        int n = keys_seen(s, t0 + r), j0 = first_key(s, b, t0 + r);
                        if (j0 >= n) { /* the whole block lies before this row's document */
                            memset(p, 0, (size_t)end * sizeof(real));
                            bl[r] = -INFINITY;
                            continue;
                        }
                        for (int j = 0; j < j0; j++) p[j] = 0;
                        real maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
                        for (int j = j0; j < n; j++) {
                            p[j] *= scale;
                            maxv = p[j] > maxv ? p[j] : maxv;
                        }
                        real sum = 0;
#pragma omp simd reduction(+ : sum)
                        for (int j = j0; j < n; j++) {
                            p[j] = vexp(p[j] - maxv);
                            sum += p[j];
                        }
                        real inv = 1 / sum;
#pragma omp simd
                        for (int j = j0; j < n; j++) p[j] *= inv;
                        for (int j = n; j < end; j++) p[j] = 0;
                        bl[r] = maxv + R_LOG(sum);
                    }
                    gemm_serial(0, 0, rows, hd, end, P, end, vp, s->kv_rs, 0, ob, hd);
                    /* online-softmax merge into the running output (normalised) and lse */
                    for (int r = 0; r < rows; r++) {
                        real old = lp[r], blk = bl[r], *o = op + (size_t)r * s->o_rs;
                        const real *x = ob + (size_t)r * hd;
                        if (blk == -INFINITY) continue; /* no key of this block is visible */
                        if (old == -INFINITY) {
                            memcpy(o, x, (size_t)hd * sizeof(real));
                            lp[r] = blk;
                            continue;
                        }
                        real hi = old > blk ? old : blk;
                        real merged = hi + R_LOG(R_EXP(old - hi) + R_EXP(blk - hi));
                        real a = R_EXP(old - merged), c = R_EXP(blk - merged);
                        for (int d = 0; d < hd; d++) o[d] = a * o[d] + c * x[d];
                        lp[r] = merged;
                    }
                }
            }
        }
        free(P);
    }
}

void cpu_attention_block_delta(real *delta, const real *dout, const real *out, const AttnBlock *s) {
    int B = s->B, H = s->H, Sq = s->Sq, hd = s->hd;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < Sq; t++) {
                const real *dy = dout + b * s->o_bs + (size_t)t * s->o_rs + (size_t)h * hd;
                const real *y = out + b * s->o_bs + (size_t)t * s->o_rs + (size_t)h * hd;
                real acc = 0;
                for (int d = 0; d < hd; d++) acc += dy[d] * y[d];
                delta[b * s->lse_bs + h * s->lse_hs + t] = acc;
            }
}

void cpu_attention_block_backward(real *dq, real *dk, real *dv, const real *dout, const real *q, const real *k,
                                  const real *v, const real *lse, const real *delta, const AttnBlock *s) {
    int B = s->B, KV = s->KV, Sq = s->Sq, Sk = s->Sk, hd = s->hd, group = s->H / s->KV;
    real scale = 1 / R_SQRT((real)hd);
#pragma omp parallel
    {
        real *P = malloc(2 * (size_t)TILE * Sk * sizeof(real)), *dS = P + (size_t)TILE * Sk;
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++) {
            for (int g = 0; g < KV; g++) {
                const real *kp = k + b * s->kv_bs + (size_t)g * hd, *vp = v + b * s->kv_bs + (size_t)g * hd;
                real *dkp = dk + b * s->kv_bs + (size_t)g * hd, *dvp = dv + b * s->kv_bs + (size_t)g * hd;
                for (int h = g * group; h < (g + 1) * group; h++)
                    for (int t0 = 0; t0 < Sq; t0 += TILE) {
                        int rows = Sq - t0 < TILE ? Sq - t0 : TILE, end = s->causal ? t0 + rows : Sk;
                        const real *qp = q + b * s->q_bs + (size_t)t0 * s->q_rs + (size_t)h * hd;
                        const real *dyp = dout + b * s->o_bs + (size_t)t0 * s->o_rs + (size_t)h * hd;
                        real *dqp = dq + b * s->o_bs + (size_t)t0 * s->o_rs + (size_t)h * hd;
                        const real *lp = lse + b * s->lse_bs + h * s->lse_hs + t0;
                        const real *dl = delta + b * s->lse_bs + h * s->lse_hs + t0;
                        gemm_serial(0, 1, rows, end, hd, qp, s->q_rs, kp, s->kv_rs, 0, P, end);
                        gemm_serial(0, 1, rows, end, hd, dyp, s->o_rs, vp, s->kv_rs, 0, dS, end);
                        for (int r = 0; r < rows; r++) {
                            real *p = P + (size_t)r * end, *ds = dS + (size_t)r * end, l = lp[r], d0 = dl[r];
                            int n = keys_seen(s, t0 + r), j0 = first_key(s, b, t0 + r);
                            for (int j = 0; j < j0 && j < n; j++) p[j] = 0, ds[j] = 0;
#pragma omp simd
                            for (int j = j0; j < n; j++) {
                                p[j] = vexp(p[j] * scale - l);
                                ds[j] = p[j] * (ds[j] - d0) * scale;
                            }
                            for (int j = n; j < end; j++) p[j] = 0, ds[j] = 0;
                        }
                        gemm_serial(1, 0, end, hd, rows, P, end, dyp, s->o_rs, 1, dvp, s->kv_rs);
                        gemm_serial(0, 0, rows, hd, end, dS, end, kp, s->kv_rs, 1, dqp, s->o_rs);
                        gemm_serial(1, 0, end, hd, rows, dS, end, qp, s->q_rs, 1, dkp, s->kv_rs);
                    }
            }
        }
        free(P);
    }
}
