/* test_kernels_cpu.c: the CPU kernels that replaced library calls or scalar loops, against
 * plain sequential references computed here in double: gemm (every transpose combination,
 * ragged edges, accumulate; both the threaded and the serial entry point), attention forward/backward,
 * cross-entropy (and the LM head) over a padded vocabulary and the gradient norm's sum of squares; plus bit-identical results for 1 and 2 threads. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "test.h"

static real frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (real)((*s >> 8) * (1.0 / 16777216.0) - 0.5);
}

static void fill(real *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) x[i] = frand(&seed);
}

static void test_gemm_matches_reference(void) {
    int sizes[][3] = {{1, 1, 1}, {13, 33, 7}, {12, 32, 256}, {25, 70, 300}, {130, 45, 513}, {257, 1030, 40}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int M = sizes[si][0], N = sizes[si][1], K = sizes[si][2];
        real *A = malloc(sizeof(real) * M * K), *B = malloc(sizeof(real) * K * N), *C = malloc(sizeof(real) * M * N);
        real *C0 = malloc(sizeof(real) * M * N);
        fill(A, (size_t)M * K, 1 + si);
        fill(B, (size_t)K * N, 100 + si);
        fill(C0, (size_t)M * N, 200 + si);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 4; acc++) { /* bit 1: the serial entry point */
                    memcpy(C, C0, sizeof(real) * M * N);
                    if (acc & 2) gemm_serial(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, acc & 1, C, N);
                    else gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, acc & 1, C, N);
                    int bad = 0;
                    for (int i = 0; i < M && !bad; i++)
                        for (int j = 0; j < N && !bad; j++) {
                            double s = (acc & 1) ? C0[i * N + j] : 0;
                            for (int k = 0; k < K; k++)
                                s += (double)(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
                            if (fabs(C[i * N + j] - s) > 1e-5 * (1 + sqrt((double)K))) {
                                CHECK(0, "M=%d N=%d K=%d ta=%d tb=%d acc=%d at (%d,%d): %g vs %g", M, N, K, ta, tb,
                                      acc, i, j, (double)C[i * N + j], s);
                                bad = 1;
                            }
                        }
                }
        free(A); free(B); free(C); free(C0);
    }
}

/* Causal attention in double, one (b, h) at a time, straight from the definition. */
static void attention_reference(double *out, const real *qkv, int B, int T, int H, int KV, int hd) {
    int stride = (H + 2 * KV) * hd, group = H / KV;
    double *p = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const real *q = qkv + ((size_t)b * T + t) * stride + h * hd;
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const real *k = qkv + ((size_t)b * T + s) * stride + (H + h / group) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
                    p[s] = d / sqrt((double)hd);
                    if (p[s] > mx) mx = p[s];
                }
                for (int s = 0; s <= t; s++) sum += p[s] = exp(p[s] - mx);
                for (int i = 0; i < hd; i++) {
                    double y = 0;
                    for (int s = 0; s <= t; s++)
                        y += p[s] / sum * qkv[((size_t)b * T + s) * stride + (H + KV + h / group) * hd + i];
                    out[((size_t)b * T + t) * H * hd + h * hd + i] = y;
                }
            }
    free(p);
}

/* loss(qkv) = sum(out * w) for fixed random w, so d loss / d out = w. */
static double attention_loss(const real *qkv, const real *w, int B, int T, int H, int KV, int hd) {
    size_t n = (size_t)B * T * H * hd;
    double *out = malloc(sizeof(double) * n), l = 0;
    attention_reference(out, qkv, B, T, H, KV, hd);
    for (size_t i = 0; i < n; i++) l += out[i] * w[i];
    free(out);
    return l;
}

static void test_attention_matches_reference(void) {
    int cfg[][5] = {{2, 37, 4, 2, 8}, {1, 70, 3, 3, 16}, {1, 5, 2, 1, 64}};
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        int B = cfg[ci][0], T = cfg[ci][1], H = cfg[ci][2], KV = cfg[ci][3], hd = cfg[ci][4];
        int stride = (H + 2 * KV) * hd;
        size_t nq = (size_t)B * T * stride, no = (size_t)B * T * H * hd;
        real *qkv = malloc(sizeof(real) * nq), *out = malloc(sizeof(real) * no), *w = malloc(sizeof(real) * no);
        real *att = malloc(sizeof(real) * B * H * T * T), *dqkv = malloc(sizeof(real) * nq);
        double *ref = malloc(sizeof(double) * no);
        fill(qkv, nq, 7 + ci);
        for (size_t i = 0; i < nq; i++) qkv[i] *= 4; /* peaky softmax */
        fill(w, no, 9 + ci);
        cpu_attention_forward(out, att, qkv, B, T, H, KV, hd);
        attention_reference(ref, qkv, B, T, H, KV, hd);
        for (size_t i = 0; i < no; i++)
            if (fabs(out[i] - ref[i]) > 1e-5) { CHECK(0, "cfg %zu out[%zu] %g vs %g", ci, i, (double)out[i], ref[i]); break; }
        cpu_attention_backward(dqkv, w, qkv, att, B, T, H, KV, hd);
        /* central differences of the double reference at a spread of coordinates */
        for (size_t i = 0; i < nq; i += nq / 97 + 1) {
            real keep = qkv[i];
            double eps = 1e-3;
            qkv[i] = keep + (real)eps;
            double lp = attention_loss(qkv, w, B, T, H, KV, hd);
            qkv[i] = keep - (real)eps;
            double lm = attention_loss(qkv, w, B, T, H, KV, hd);
            qkv[i] = keep;
            double fd = (lp - lm) / ((double)(real)(keep + (real)eps) - (double)(real)(keep - (real)eps));
            CHECK_CLOSE(dqkv[i], fd, 2e-3, 2e-4, "dqkv");
        }
        free(qkv); free(out); free(w); free(att); free(dqkv); free(ref);
    }
}

static void test_cross_entropy_matches_reference(void) {
    int N = 5, V = 50257;
    real *z = malloc(sizeof(real) * N * V), *losses = malloc(sizeof(real) * N);
    int32_t targets[5] = {0, 17, 50256, 4000, 123};
    fill(z, (size_t)N * V, 3);
    for (size_t i = 0; i < (size_t)N * V; i++) z[i] *= 20;
    double *ref_loss = malloc(sizeof(double) * N), *ref_sum = malloc(sizeof(double) * N), *ref_max = malloc(sizeof(double) * N);
    for (int n = 0; n < N; n++) {
        double mx = -1e300, s = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, z[n * V + v]);
        for (int v = 0; v < V; v++) s += exp(z[n * V + v] - mx);
        ref_loss[n] = log(s) - (z[n * V + targets[n]] - mx);
        ref_sum[n] = s;
        ref_max[n] = mx;
    }
    real *keep = malloc(sizeof(real) * N * V);
    memcpy(keep, z, sizeof(real) * N * V);
    double mean = cpu_cross_entropy_forward_backward(z, losses, targets, N, V, V, 1, 2.0);
    double ref_mean = 0;
    for (int n = 0; n < N; n++) {
        CHECK_CLOSE(losses[n], ref_loss[n], 1e-6, 1e-6, "loss");
        ref_mean += ref_loss[n] / N;
        for (int v = 0; v < V; v += 997) {
            double g = exp(keep[n * V + v] - ref_max[n]) / ref_sum[n] * 2.0 / N - (v == targets[n] ? 2.0 / N : 0);
            CHECK_CLOSE(z[n * V + v], g, 1e-5, 1e-10, "dlogits");
        }
        double g = exp(keep[n * V + targets[n]] - ref_max[n]) / ref_sum[n] * 2.0 / N - 2.0 / N;
        CHECK_CLOSE(z[n * V + targets[n]], g, 1e-5, 1e-10, "dlogits at target");
    }
    CHECK_CLOSE(mean, ref_mean, 1e-6, 0, "mean loss");
    free(z); free(losses); free(ref_loss); free(ref_sum); free(ref_max); free(keep);
}

/* A padded vocabulary (rows of ld > V values, --vocab-pad): the padding columns hold huge logits
 * that would dominate the softmax if read; the losses, mean and gradient of the real columns are
 * the unpadded kernel's bits, the padding's gradient is 0, and without a gradient nothing is
 * written. The vocabulary-parallel pieces likewise (and a rank with no tokens: max -inf, sum 0). */
/* The LM head over a padded vocabulary: the V real rows of Vr give the unpadded GEMMs' bits (the
 * model's padded runs equal unpadded ones whichever GEMM engine runs; BLAS gives other bits for
 * another shape), the padding columns of the logits are 0, the padding rows of dw untouched. */
static void test_lm_head_padded_vocab(void) {
    int N = 64, IC = 48, V = 67, Vr = 128;
    real *x = malloc(sizeof(real) * N * IC), *w = calloc((size_t)Vr * IC, sizeof(real));
    real *zd = malloc(sizeof(real) * N * V), *zp = malloc(sizeof(real) * N * Vr);
    real *dxd = malloc(sizeof(real) * N * IC), *dxp = malloc(sizeof(real) * N * IC);
    real *dwd = calloc((size_t)V * IC, sizeof(real)), *dwp = malloc(sizeof(real) * Vr * IC);
    fill(x, (size_t)N * IC, 31);
    fill(w, (size_t)V * IC, 32);
    for (size_t i = 0; i < (size_t)N * Vr; i++) zp[i] = 7; /* stale values in the padding */
    cpu_matmul_forward(zd, x, w, NULL, N, IC, V);
    cpu_lm_head_forward(zp, x, w, N, IC, V, Vr);
    int same = 1, zero = 1;
    for (int n = 0; n < N; n++) {
        same &= !memcmp(zp + (size_t)n * Vr, zd + (size_t)n * V, sizeof(real) * V);
        for (int v = V; v < Vr; v++) zero &= zp[(size_t)n * Vr + v] == 0;
    }
    CHECK(same && zero, "padded lm_head forward: real columns %s, padding %s", same ? "equal" : "differ",
          zero ? "0" : "not 0");
    fill(zd, (size_t)N * V, 33); /* dlogits; the padding columns 0, as the loss leaves them */
    for (int n = 0; n < N; n++)
        for (int v = 0; v < Vr; v++) zp[(size_t)n * Vr + v] = v < V ? zd[(size_t)n * V + v] : 0;
    for (size_t i = 0; i < (size_t)Vr * IC; i++) dwp[i] = i < (size_t)V * IC ? 0 : 5;
    cpu_matmul_backward(dxd, dwd, NULL, zd, x, w, N, IC, V, 0);
    cpu_lm_head_backward(dxp, dwp, zp, x, w, N, IC, V, Vr);
    int pad_rows = 1;
    for (size_t i = (size_t)V * IC; i < (size_t)Vr * IC; i++) pad_rows &= dwp[i] == 5;
    CHECK(!memcmp(dxd, dxp, sizeof(real) * N * IC), "padded lm_head backward: dinp differs");
    CHECK(!memcmp(dwd, dwp, sizeof(real) * V * IC), "padded lm_head backward: dw differs");
    CHECK(pad_rows, "padded lm_head backward wrote the padding rows of dw");
    free(x); free(w); free(zd); free(zp); free(dxd); free(dxp); free(dwd); free(dwp);
}

static void test_cross_entropy_padded_vocab(void) {
    int N = 7, V = 67, ld = 128;
    real *dense = malloc(sizeof(real) * N * V), *pad = malloc(sizeof(real) * N * ld);
    real *ld_loss = malloc(sizeof(real) * N), *dn_loss = malloc(sizeof(real) * N);
    int32_t targets[7] = {0, 1, 66, 30, 5, 66, 12};
    fill(dense, (size_t)N * V, 11);
    for (int want = 0; want < 2; want++) {
        for (int n = 0; n < N; n++)
            for (int v = 0; v < ld; v++) pad[n * ld + v] = v < V ? dense[n * V + v] : 1e4f;
        real *d = malloc(sizeof(real) * N * V);
        memcpy(d, dense, sizeof(real) * N * V);
        double md = cpu_cross_entropy_forward_backward(d, dn_loss, targets, N, V, V, want, 2.0);
        double mp = cpu_cross_entropy_forward_backward(pad, ld_loss, targets, N, V, ld, want, 2.0);
        CHECK(md == mp, "padded mean loss %.17g vs %.17g", mp, md);
        CHECK(!memcmp(dn_loss, ld_loss, sizeof(real) * N), "padded row losses differ");
        int same = 1, zero = 1;
        for (int n = 0; n < N; n++) {
            same &= !memcmp(pad + n * ld, d + n * V, sizeof(real) * V);
            for (int v = V; v < ld; v++) zero &= pad[n * ld + v] == (want ? 0 : 1e4f);
        }
        CHECK(same, "padded dlogits differ from the unpadded ones (want_grad %d)", want);
        CHECK(zero, "padding columns: %s", want ? "gradient is not 0" : "written without a gradient");
        free(d);
    }
    /* vocabulary-parallel pieces: this rank holds tokens [40, 67) of the vocabulary in ld columns */
    int lo = 40, Vr = V - lo;
    double mx[7], sm[7], tl[7], mx2[7], sm2[7], tl2[7];
    real *zr = malloc(sizeof(real) * N * Vr);
    for (int n = 0; n < N; n++)
        for (int v = 0; v < ld; v++) {
            pad[n * ld + v] = v < Vr ? dense[n * V + lo + v] : 1e4f;
            if (v < Vr) zr[n * Vr + v] = dense[n * V + lo + v];
        }
    cpu_vocab_shard_row_max(zr, N, Vr, Vr, mx);
    cpu_vocab_shard_row_max(pad, N, Vr, ld, mx2);
    cpu_vocab_shard_row_sumexp(zr, N, Vr, Vr, mx, sm);
    cpu_vocab_shard_row_sumexp(pad, N, Vr, ld, mx, sm2);
    cpu_vocab_shard_target_logit(zr, targets, lo, N, Vr, Vr, tl);
    cpu_vocab_shard_target_logit(pad, targets, lo, N, Vr, ld, tl2);
    CHECK(!memcmp(mx, mx2, sizeof mx) && !memcmp(sm, sm2, sizeof sm) && !memcmp(tl, tl2, sizeof tl),
          "padded vocabulary-parallel statistics differ");
    cpu_vocab_shard_grad(zr, targets, lo, N, Vr, Vr, mx, sm, 0.5);
    cpu_vocab_shard_grad(pad, targets, lo, N, Vr, ld, mx, sm, 0.5);
    int same = 1, zero = 1;
    for (int n = 0; n < N; n++) {
        same &= !memcmp(pad + n * ld, zr + n * Vr, sizeof(real) * Vr);
        for (int v = Vr; v < ld; v++) zero &= pad[n * ld + v] == 0;
    }
    CHECK(same && zero, "padded vocab_shard_grad: real columns %s, padding %s", same ? "equal" : "differ",
          zero ? "0" : "not 0");
    cpu_vocab_shard_row_max(pad, N, 0, ld, mx2); /* a rank with no tokens */
    cpu_vocab_shard_row_sumexp(pad, N, 0, ld, mx, sm2);
    CHECK(mx2[0] == -INFINITY && sm2[0] == 0, "no tokens: max %g sum %g", mx2[0], sm2[0]);
    free(dense); free(pad); free(ld_loss); free(dn_loss); free(zr);
}

/* Runs gemm, attention and cross-entropy with `threads` threads; returns a checksum-free copy. */
static real *run_all(int threads) {
    kernels_set_threads(threads);
    int M = 300, N = 1100, K = 600, B = 2, T = 64, H = 4, KV = 2, hd = 16, V = 3000;
    int stride = (H + 2 * KV) * hd;
    size_t ng = (size_t)M * N, nq = (size_t)B * T * stride, no = (size_t)B * T * H * hd, nz = (size_t)B * T * V;
    real *res = calloc(ng * 2 + nq + no + nz + 1, sizeof(real));
    real *A = malloc(sizeof(real) * M * K), *Bm = malloc(sizeof(real) * K * N), *qkv = malloc(sizeof(real) * nq);
    real *att = malloc(sizeof(real) * B * H * T * T), *w = malloc(sizeof(real) * no), *losses = malloc(sizeof(real) * B * T);
    int32_t *tg = malloc(sizeof(int32_t) * B * T);
    fill(A, (size_t)M * K, 1);
    fill(Bm, (size_t)K * N, 2);
    fill(qkv, nq, 3);
    fill(w, no, 4);
    for (int i = 0; i < B * T; i++) tg[i] = (i * 37) % V;
    real *p = res;
    gemm(0, 0, M, N, K, A, K, Bm, N, 0, p, N);
    p += ng;
    gemm(1, 1, N, M, K, Bm, N, A, K, 0, p, M);
    p += ng;
    cpu_attention_forward(p, att, qkv, B, T, H, KV, hd);
    p += no;
    cpu_attention_backward(p, w, qkv, att, B, T, H, KV, hd);
    p += nq;
    fill(p, nz, 5);
    p[nz] = (real)cpu_cross_entropy_forward_backward(p, losses, tg, B * T, V, V, 1, 1.0);
    free(A); free(Bm); free(qkv); free(att); free(w); free(losses); free(tg);
    return res;
}

static void test_bit_identical_across_threads(void) {
    int M = 300, N = 1100, B = 2, T = 64, H = 4, KV = 2, hd = 16, V = 3000;
    size_t total = (size_t)M * N * 2 + (size_t)B * T * (H + 2 * KV) * hd + (size_t)B * T * H * hd + (size_t)B * T * V + 1;
    real *one = run_all(1), *two = run_all(2);
    CHECK(!memcmp(one, two, total * sizeof(real)), "results differ between 1 and 2 threads");
    free(one);
    free(two);
}

/* The sum of squares behind gradient clipping: lanes and chunks with ragged ends (n is neither a
 * multiple of the 8 lanes nor of the 16,384-element chunks), against a long-double sum, and the
 * same bits for 1 and 2 threads. */
static void test_sum_squares(void) {
    size_t sizes[] = {0, 1, 7, 9, 16384 * 3 + 5, 1000003};
    for (int c = 0; c < 6; c++) {
        size_t n = sizes[c];
        real *x = malloc((n ? n : 1) * sizeof(real));
        fill(x, n, 11 + c);
        long double ref = 0;
        for (size_t i = 0; i < n; i++) ref += (long double)x[i] * x[i];
        kernels_set_threads(1);
        double one = cpu_sum_squares(x, n);
        kernels_set_threads(2);
        double two = cpu_sum_squares(x, n);
        CHECK_CLOSE(one, (double)ref, 1e-13, 1e-300, "sum of squares against a long-double sum");
        CHECK(!memcmp(&one, &two, sizeof one), "sum of squares differs between 1 and 2 threads");
        free(x);
    }
}

int main(void) {
    kernels_set_threads(2);
    RUN(test_sum_squares);
    RUN(test_gemm_matches_reference);
    RUN(test_attention_matches_reference);
    RUN(test_cross_entropy_matches_reference);
    RUN(test_cross_entropy_padded_vocab);
    RUN(test_lm_head_padded_vocab);
    RUN(test_bit_identical_across_threads);
    return TEST_SUMMARY();
}
