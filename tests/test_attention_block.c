/* test_attention_block.c: the blockwise attention kernels that ring (context-parallel) attention
 * is built of, on the CPU. The sequence is cut into 2cp chunks and rank r's chunks r and
 * 2cp-1-r meet every key chunk in ring order (own keys first, then rank r-1's, ...), with the
 * mask of each pair (causal on the diagonal, full before, skipped after) and the online-softmax
 * merge; output and gradients must equal the whole-sequence causal attention (cpu_attention_*,
 * itself checked against finite differences in test_kernels_cpu.c) and a double reference; the
 * block gradients are also checked against central differences of that reference directly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "test.h"

static real frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (real)((*s >> 8) * (1.0 / 16777216.0) - 0.5);
}

/* double causal attention, then loss = sum(out * w) */
static double reference_loss(const real *qkv, const real *w, int B, int T, int H, int KV, int hd, double *out) {
    int stride = (H + 2 * KV) * hd, group = H / KV, Y = H * hd;
    double loss = 0, *p = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const real *q = qkv + ((size_t)b * T + t) * stride + h * hd;
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const real *k = qkv + ((size_t)b * T + s) * stride + (H + h / group) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
                    p[s] = d / sqrt((double)hd);
                    mx = p[s] > mx ? p[s] : mx;
                }
                for (int s = 0; s <= t; s++) sum += p[s] = exp(p[s] - mx);
                for (int i = 0; i < hd; i++) {
                    double o = 0;
                    for (int s = 0; s <= t; s++)
                        o += p[s] / sum * qkv[((size_t)b * T + s) * stride + (H + KV + h / group) * hd + i];
                    if (out) out[((size_t)b * T + t) * Y + h * hd + i] = o;
                    loss += o * w[((size_t)b * T + t) * Y + h * hd + i];
                }
            }
    free(p);
    return loss;
}

/* the block pair (query chunk qc, key chunk kc) over the whole-sequence buffers */
static AttnBlock pair(int B, int T, int H, int KV, int hd, int S, int causal) {
    int stride = (H + 2 * KV) * hd, Y = H * hd;
    AttnBlock s = {B, S, S, H, KV, hd, causal, stride, stride, Y,
                   (size_t)T * stride, (size_t)T * stride, (size_t)T * Y, (size_t)H * T, (size_t)T, NULL, 0, 0};
    return s;
}

/* ring order for rank r of cp: key chunks of ranks r, r-1, ..., r+1 */
static void ring_forward(real *out, real *lse, const real *qkv, int B, int T, int H, int KV, int hd, int cp) {
    int S = T / (2 * cp), stride = (H + 2 * KV) * hd, Y = H * hd;
    for (size_t i = 0; i < (size_t)B * H * T; i++) lse[i] = -INFINITY;
    for (int r = 0; r < cp; r++)
        for (int step = 0; step < cp; step++) {
            int j = (r - step + cp) % cp, qcs[2] = {r, 2 * cp - 1 - r}, kcs[2] = {j, 2 * cp - 1 - j};
            for (int a = 0; a < 2; a++)
                for (int c = 0; c < 2; c++) {
                    int qc = qcs[a], kc = kcs[c];
                    if (kc > qc) continue;
                    AttnBlock s = pair(B, T, H, KV, hd, S, kc == qc);
                    const real *q = qkv + (size_t)qc * S * stride, *k = qkv + (size_t)kc * S * stride + H * hd;
                    cpu_attention_block_forward(out + (size_t)qc * S * Y, lse + (size_t)qc * S, q, k, k + KV * hd, &s);
                }
        }
}

static void ring_backward(real *dq, real *dkv, const real *dout, const real *out, const real *lse, const real *qkv,
                          int B, int T, int H, int KV, int hd, int cp) {
    int S = T / (2 * cp), stride = (H + 2 * KV) * hd, Y = H * hd;
    real *delta = malloc(sizeof(real) * B * H * T);
    AttnBlock whole = pair(B, T, H, KV, hd, T, 0);
    cpu_attention_block_delta(delta, dout, out, &whole);
    for (int r = 0; r < cp; r++)
        for (int step = 0; step < cp; step++) {
            int j = (r - step + cp) % cp, qcs[2] = {r, 2 * cp - 1 - r}, kcs[2] = {j, 2 * cp - 1 - j};
            for (int a = 0; a < 2; a++)
                for (int c = 0; c < 2; c++) {
                    int qc = qcs[a], kc = kcs[c];
                    if (kc > qc) continue;
                    AttnBlock s = pair(B, T, H, KV, hd, S, kc == qc);
                    size_t qo = (size_t)qc * S * stride, ko = (size_t)kc * S * stride + H * hd;
                    cpu_attention_block_backward(dq + (size_t)qc * S * Y, dkv + ko, dkv + ko + KV * hd,
                                                 dout + (size_t)qc * S * Y, qkv + qo, qkv + ko, qkv + ko + KV * hd,
                                                 lse + (size_t)qc * S, delta + (size_t)qc * S, &s);
                }
        }
    free(delta);
}

static void test_ring_equals_causal(void) {
    int cfg[][6] = {{2, 12, 4, 2, 8, 2}, {1, 24, 3, 3, 16, 3}, {2, 16, 4, 1, 8, 4}, {1, 10, 2, 2, 4, 1}};
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        int B = cfg[ci][0], T = cfg[ci][1], H = cfg[ci][2], KV = cfg[ci][3], hd = cfg[ci][4], cp = cfg[ci][5];
        int stride = (H + 2 * KV) * hd, Y = H * hd;
        size_t nq = (size_t)B * T * stride, no = (size_t)B * T * Y;
        real *qkv = malloc(sizeof(real) * nq), *w = malloc(sizeof(real) * no), *out = malloc(sizeof(real) * no);
        real *lse = malloc(sizeof(real) * B * H * T), *ref_out = malloc(sizeof(real) * no);
        real *att = malloc(sizeof(real) * B * H * T * T), *ref_d = malloc(sizeof(real) * nq);
        real *dq = calloc(no, sizeof(real)), *dkv = calloc(nq, sizeof(real));
        double *dref = malloc(sizeof(double) * no);
        unsigned seed = 11 + (unsigned)ci;
        for (size_t i = 0; i < nq; i++) qkv[i] = 4 * frand(&seed); /* peaky softmax */
        for (size_t i = 0; i < no; i++) w[i] = frand(&seed);
        ring_forward(out, lse, qkv, B, T, H, KV, hd, cp);
        cpu_attention_forward(ref_out, att, qkv, B, T, H, KV, hd);
        reference_loss(qkv, w, B, T, H, KV, hd, dref);
        for (size_t i = 0; i < no; i++) {
            CHECK_CLOSE(out[i], ref_out[i], 1e-5, 1e-6, "ring output vs causal attention");
            CHECK_CLOSE(out[i], dref[i], 1e-5, 1e-6, "ring output vs double reference");
        }
        ring_backward(dq, dkv, w, out, lse, qkv, B, T, H, KV, hd, cp);
        cpu_attention_backward(ref_d, w, qkv, att, B, T, H, KV, hd);
        for (int n = 0; n < B * T; n++)
            for (int c = 0; c < stride; c++) {
                real got = c < Y ? dq[(size_t)n * Y + c] : dkv[(size_t)n * stride + c];
                CHECK_CLOSE(got, ref_d[(size_t)n * stride + c], 1e-4, 1e-6, "ring gradient vs causal attention");
            }
        /* central differences of the double reference, straight against the block gradients */
        for (size_t i = 0; i < nq; i += nq / 61 + 1) {
            real keep = qkv[i];
            double eps = 1e-3;
            qkv[i] = keep + (real)eps;
            double lp = reference_loss(qkv, w, B, T, H, KV, hd, NULL);
            qkv[i] = keep - (real)eps;
            double lm = reference_loss(qkv, w, B, T, H, KV, hd, NULL);
            qkv[i] = keep;
            double fd = (lp - lm) / ((double)(real)(keep + (real)eps) - (double)(real)(keep - (real)eps));
            size_t n = i / stride, c = i % stride;
            real got = c < (size_t)Y ? dq[n * Y + c] : dkv[i];
            CHECK_CLOSE(got, fd, 2e-3, 2e-4, "ring gradient vs finite differences");
        }
        free(qkv); free(w); free(out); free(lse); free(ref_out); free(att); free(ref_d); free(dq); free(dkv); free(dref);
    }
}

/* the merge is order-free: keys folded in a different order give the same output */
static void test_merge_order(void) {
    int B = 1, T = 16, H = 2, KV = 1, hd = 8, S = 4, stride = (H + 2 * KV) * hd, Y = H * hd;
    real qkv[16 * 32], o1[16 * 16], o2[16 * 16], l1[2 * 16], l2[2 * 16];
    unsigned seed = 5;
    for (int i = 0; i < T * stride; i++) qkv[i] = 3 * frand(&seed);
    for (int i = 0; i < B * H * T; i++) l1[i] = l2[i] = -INFINITY;
    int qc = 3; /* the last chunk sees chunks 0, 1, 2 fully and itself causally */
    int orders[2][4] = {{3, 0, 1, 2}, {1, 2, 3, 0}};
    for (int o = 0; o < 2; o++)
        for (int k = 0; k < 4; k++) {
            int kc = orders[o][k];
            AttnBlock s = pair(B, T, H, KV, hd, S, kc == qc);
            cpu_attention_block_forward((o ? o2 : o1) + qc * S * Y, (o ? l2 : l1) + qc * S, qkv + qc * S * stride,
                                        qkv + kc * S * stride + H * hd, qkv + kc * S * stride + (H + KV) * hd, &s);
        }
    for (int t = qc * S; t < T; t++)
        for (int c = 0; c < Y; c++) CHECK_CLOSE(o1[t * Y + c], o2[t * Y + c], 1e-6, 1e-7, "merge order");
}

int main(void) {
    kernels_set_threads(2);
    RUN(test_ring_equals_causal);
    RUN(test_merge_order);
    return TEST_SUMMARY();
}
