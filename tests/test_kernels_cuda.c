/* test_kernels_cuda.c: every CUDA kernel against the CPU backend on random inputs, in fp32 and
 * in bf16 storage, and bit-identical results when run twice.
 *   fp32: relative error (||gpu - cpu|| / ||cpu||, every element written and finite) <= 1e-5,
 *         TF32 off;
 *   bf16: the inputs are bf16 values for both backends (the CPU gets them widened), so only the
 *         rounding inside the kernel counts; tolerances per kernel below: 4e-3 where the output
 *         alone is rounded (2^-9 per element at most), 1e-4 for sums of exact bf16 products into
 *         fp32, 1e-2 / 2e-2 for attention on the tensor cores (probabilities rounded to bf16 before
 *         they multiply V; the backward's dS as well).
 * Outputs are poisoned with NaN before each run, so an element a kernel forgets stays NaN.
 * Built three ways: against the CUDA backend (every case prints "skip NAME (no CUDA device)" on a
 * machine without one), against the CPU emulation of the same kernel sources
 * (test_kernels_cuda_emu, small shapes: tests/cuda_emu.h; it adds the test_emu_catches_* cases,
 * each proving one of the emulator's checks against a planted bug: tests/cuda_emu_cases.h), or
 * without CUDA at all (skips). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"
#include "util/bf16.h"

#if defined(MYRIAD_CUDA) || defined(MYRIAD_CUDA_EMU)
#include "kernels/backend.h"
#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/params.h"
#include "optim/adamw.h"

static int big; /* a real device: the shapes the presets use; the emulation: small ones */
#define SIZE(small, large) (big ? (large) : (small))

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) * (1.0 / 16777216.0) - 0.5);
}
static float *rnd(size_t n, unsigned seed, float scale) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = frand(&seed) * scale;
    return x;
}
static float *copy_of(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}
/* round to the storage type in place (the values both backends then see) */
static void round_to(float *x, size_t n, int dt) {
    if (dt == CUDA_BF16)
        for (size_t i = 0; i < n; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}
static void *up(const float *h, size_t n, int dt) {
    void *d = cuda_alloc(n * cuda_dtype_size(dt) + 16);
    if (dt == CUDA_F32) {
        cuda_copy_to_device(d, h, n * sizeof(float));
    } else {
        uint16_t *t = malloc(n * 2 + 2);
        for (size_t i = 0; i < n; i++) t[i] = f32_to_bf16(h[i]);
        cuda_copy_to_device(d, t, n * 2);
        cuda_synchronize();
        free(t);
    }
    cuda_synchronize();
    return d;
}
static void *up_bytes(const void *h, size_t bytes) {
    void *d = cuda_alloc(bytes + 16);
    cuda_copy_to_device(d, h, bytes);
    cuda_synchronize();
    return d;
}
static float *down(const void *d, size_t n, int dt) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    if (dt == CUDA_F32) {
        cuda_copy_to_host(h, d, n * sizeof(float));
    } else {
        uint16_t *t = malloc(n * 2 + 2);
        cuda_copy_to_host(t, d, n * 2);
        for (size_t i = 0; i < n; i++) h[i] = bf16_to_f32(t[i]);
        free(t);
    }
    return h;
}
static void poison(void *d, size_t bytes) {
    unsigned char *h = malloc(bytes + 1);
    memset(h, 0xff, bytes); /* NaN in fp32 and bf16 */
    cuda_copy_to_device(d, h, bytes);
    cuda_synchronize();
    free(h);
}
static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den == 0 ? sqrt(num) : sqrt(num / den);
}
static const char *dtn(int dt) { return dt == CUDA_BF16 ? "bf16" : "fp32"; }
#define CHECK_REL(got, want, n, tol, what, dt)                                                      \
    do {                                                                                            \
        double e_ = rel_err(got, want, n);                                                          \
        printf("  %-34s %s  rel err %.2e (tol %.0e)\n", what, dtn(dt), e_, (double)(tol));          \
        CHECK(e_ <= (tol), "%s %s: relative error %.3g > %.3g", what, dtn(dt), e_, (double)(tol));  \
    } while (0)
#define CHECK_SAME(a, b, n, what)                                                              \
    CHECK(!memcmp(a, b, (n) * sizeof(float)), "%s: two runs on the same inputs differ", what)
static double tol_out(int dt) { return dt == CUDA_BF16 ? 4e-3 : 1e-5; }

/* ---------------------------------------------------------------- memory */
static void test_memory(void) {
    size_t n = 1000;
    float *d = cuda_alloc(n * sizeof(float));
    float *h = down(d, n, CUDA_F32);
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= h[i] == 0;
    CHECK(zero, "cuda_alloc returns zeroed memory");
    float *x = rnd(n, 1, 1);
    float *pinned = cuda_host_alloc(n * sizeof(float));
    memcpy(pinned, x, n * sizeof(float));
    cuda_copy_to_device(d, pinned, n * sizeof(float));
    float *d2 = cuda_alloc(n * sizeof(float));
    cuda_copy_device(d2, d, n * sizeof(float));
    memset(pinned, 0, n * sizeof(float));
    cuda_copy_to_host_async(pinned, d2, n * sizeof(float));
    cuda_synchronize();
    CHECK(!memcmp(pinned, x, n * sizeof(float)), "host -> device -> device -> pinned host round trip");
    cuda_zero(d2, 10 * sizeof(float));
    float *z = down(d2, n, CUDA_F32);
    CHECK(z[0] == 0 && z[9] == 0 && z[10] == x[10], "cuda_zero clears exactly the bytes asked");
    size_t before = cuda_bytes_in_use();
    void *t = cuda_alloc(1 << 20);
    CHECK(cuda_bytes_in_use() >= before + (1 << 20) && cuda_bytes_peak() >= cuda_bytes_in_use(), "in-use counter");
    cuda_free(t);
    CHECK(cuda_bytes_in_use() == before, "in-use counter after free");
    cuda_free(d);
    cuda_free(d2);
    cuda_host_free(pinned);
    free(h); free(x); free(z);
}

static void test_convert(void) {
    size_t n = 1003;
    float *x = rnd(n, 2, 100);
    x[0] = 1.0f + 1.0f / 256; /* a tie: rounds to even (1.0) */
    x[1] = 1.0f + 3.0f / 256; /* a tie: rounds to even (1 + 1/64) */
    float *d32 = up(x, n, CUDA_F32);
    void *d16 = cuda_alloc(n * 2);
    cuda_convert(d16, CUDA_BF16, d32, CUDA_F32, n);
    uint16_t *raw = malloc(n * 2);
    cuda_copy_to_host(raw, d16, n * 2);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= raw[i] == f32_to_bf16(x[i]);
    CHECK(ok, "fp32 -> bf16 rounds to nearest even like the host");
    float *back = cuda_alloc(n * 4);
    cuda_convert(back, CUDA_F32, d16, CUDA_BF16, n);
    float *h = down(back, n, CUDA_F32);
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= h[i] == bf16_to_f32(raw[i]);
    CHECK(ok, "bf16 -> fp32 is exact");
    cuda_free(d32); cuda_free(d16); cuda_free(back);
    free(x); free(raw); free(h);
}

/* ---------------------------------------------------------------- GEMM */
static void test_gemm(void) {
    int sizes[][3] = {{1, 1, 1}, {13, 33, 7}, {64, 48, 80}, {SIZE(30, 300), SIZE(20, 1100), SIZE(40, 600)}};
    for (int in_dt = 0; in_dt < 2; in_dt++)
        for (int c_dt = 0; c_dt < 2; c_dt++) {
            if (in_dt == CUDA_F32 && c_dt == CUDA_BF16) continue;
            double tol = c_dt == CUDA_BF16 ? 4e-3 : in_dt == CUDA_BF16 ? 1e-4 : 1e-5;
            double worst = 0;
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                int M = sizes[si][0], N = sizes[si][1], K = sizes[si][2];
                float *A = rnd((size_t)M * K, 1 + si, 1), *B = rnd((size_t)K * N, 100 + si, 1);
                float *C0 = rnd((size_t)M * N, 200 + si, 1);
                round_to(A, (size_t)M * K, in_dt);
                round_to(B, (size_t)K * N, in_dt);
                round_to(C0, (size_t)M * N, c_dt);
                for (int ta = 0; ta < 2; ta++)
                    for (int tb = 0; tb < 2; tb++)
                        for (int acc = 0; acc < 2; acc++) {
                            float *ref = copy_of(C0, (size_t)M * N);
                            gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, acc, ref, N);
                            float *got[2];
                            for (int rep = 0; rep < 2; rep++) {
                                void *dA = up(A, (size_t)M * K, in_dt), *dB = up(B, (size_t)K * N, in_dt);
                                void *dC = up(C0, (size_t)M * N, c_dt);
                                if (!acc) poison(dC, (size_t)M * N * cuda_dtype_size(c_dt));
                                cuda_gemm(ta, tb, M, N, K, dA, ta ? M : K, dB, tb ? K : N, in_dt, acc, dC, N, c_dt);
                                got[rep] = down(dC, (size_t)M * N, c_dt);
                                cuda_free(dA); cuda_free(dB); cuda_free(dC);
                            }
                            double e = rel_err(got[0], ref, (size_t)M * N);
                            if (e > worst) worst = e;
                            CHECK(e <= tol, "gemm %s->%s M=%d N=%d K=%d ta=%d tb=%d acc=%d: rel err %.3g", dtn(in_dt),
                                  dtn(c_dt), M, N, K, ta, tb, acc, e);
                            CHECK_SAME(got[0], got[1], (size_t)M * N, "gemm");
                            free(ref); free(got[0]); free(got[1]);
                        }
                free(A); free(B); free(C0);
            }
            printf("  gemm %s inputs, %s output: worst rel err %.2e (tol %.0e)\n", dtn(in_dt), dtn(c_dt), worst, tol);
        }
}

/* the linear layer: inputs fp32 or bf16, output (and input gradient) fp32 or the inputs' type,
 * bias and weight gradients fp32 (the boundary's combinations) */
static void test_matmul(void) {
    int N = SIZE(24, 512), IC = SIZE(40, 768), OC = SIZE(56, 2304);
    int combos[3][2] = {{CUDA_F32, CUDA_F32}, {CUDA_BF16, CUDA_BF16}, {CUDA_BF16, CUDA_F32}};
    for (int ci = 0; ci < 3; ci++) {
        int dt = combos[ci][0], odt = combos[ci][1];
        float *inp = rnd((size_t)N * IC, 1, 1), *w = rnd((size_t)OC * IC, 2, 0.2f), *bias = rnd(OC, 3, 1);
        float *dout = rnd((size_t)N * OC, 4, 1), *dw0 = rnd((size_t)OC * IC, 5, 1), *db0 = rnd(OC, 6, 1);
        float *dinp0 = rnd((size_t)N * IC, 7, 1);
        round_to(inp, (size_t)N * IC, dt); round_to(w, (size_t)OC * IC, dt);
        round_to(dout, (size_t)N * OC, dt); round_to(dinp0, (size_t)N * IC, odt);
        float *out = malloc((size_t)N * OC * 4), *dw = copy_of(dw0, (size_t)OC * IC), *db = copy_of(db0, OC);
        float *dinp = copy_of(dinp0, (size_t)N * IC);
        cpu_matmul_forward(out, inp, w, bias, N, IC, OC);
        cpu_matmul_backward(dinp, dw, db, dout, inp, w, N, IC, OC, 1);
        float *g_out[2], *g_dw[2], *g_db[2], *g_dinp[2];
        long fallbacks_before = cuda_matmul_fallbacks();
        for (int rep = 0; rep < 2; rep++) {
            void *d_inp = up(inp, (size_t)N * IC, dt), *d_w = up(w, (size_t)OC * IC, dt);
            float *d_b = up(bias, OC, CUDA_F32);
            void *d_out = cuda_alloc((size_t)N * OC * 4), *d_dout = up(dout, (size_t)N * OC, dt);
            float *d_dw = up(dw0, (size_t)OC * IC, CUDA_F32), *d_db = up(db0, OC, CUDA_F32);
            void *d_dinp = up(dinp0, (size_t)N * IC, odt);
            poison(d_out, (size_t)N * OC * cuda_dtype_size(odt));
            cuda_matmul_forward(d_out, odt, d_inp, d_w, d_b, dt, N, IC, OC);
            cuda_matmul_backward(d_dinp, odt, d_dw, d_db, d_dout, d_inp, d_w, dt, N, IC, OC, 1);
            g_out[rep] = down(d_out, (size_t)N * OC, odt);
            g_dw[rep] = down(d_dw, (size_t)OC * IC, CUDA_F32);
            g_db[rep] = down(d_db, OC, CUDA_F32);
            g_dinp[rep] = down(d_dinp, (size_t)N * IC, odt);
            cuda_free(d_inp); cuda_free(d_w); cuda_free(d_b); cuda_free(d_out); cuda_free(d_dout);
            cuda_free(d_dw); cuda_free(d_db); cuda_free(d_dinp);
        }
        printf("  inputs %s, output %s (fp32 bias %s):\n", dtn(dt), dtn(odt),
               cuda_matmul_fallbacks() > fallbacks_before ? "through fp32 scratch: cuBLASLt took no fp32 bias here" : "in the cuBLASLt epilogue");
        CHECK_REL(g_out[0], out, (size_t)N * OC, odt == CUDA_BF16 ? 4e-3 : dt == CUDA_BF16 ? 1e-4 : 1e-5,
                  "matmul_forward (fp32 bias)", odt);
        CHECK_REL(g_dw[0], dw, (size_t)OC * IC, dt ? 1e-4 : 1e-5, "matmul_backward dw (fp32 +=)", dt);
        CHECK_REL(g_db[0], db, OC, 1e-5, "matmul_backward dbias (fp32 +=)", dt);
        CHECK_REL(g_dinp[0], dinp, (size_t)N * IC, odt == CUDA_BF16 ? 4e-3 : dt == CUDA_BF16 ? 1e-4 : 1e-5,
                  "matmul_backward dinp (+=)", odt);
        CHECK_SAME(g_out[0], g_out[1], (size_t)N * OC, "matmul_forward");
        CHECK_SAME(g_dw[0], g_dw[1], (size_t)OC * IC, "matmul dw");
        CHECK_SAME(g_db[0], g_db[1], OC, "matmul dbias");
        CHECK_SAME(g_dinp[0], g_dinp[1], (size_t)N * IC, "matmul dinp");
        for (int rep = 0; rep < 2; rep++) { free(g_out[rep]); free(g_dw[rep]); free(g_db[rep]); free(g_dinp[rep]); }
        free(inp); free(w); free(bias); free(dout); free(dw0); free(db0); free(dinp0);
        free(out); free(dw); free(db); free(dinp);
    }
}

static void test_matmul_gelu(void) {
    int N = SIZE(20, 512), IC = SIZE(32, 768), OCs[2] = {SIZE(48, 3072), 36 /* not a multiple of 8: unfused */};
    for (int dt = 0; dt < 2; dt++)
        for (int oi = 0; oi < 2; oi++) {
            int OC = OCs[oi];
            float *inp = rnd((size_t)N * IC, 1, 1), *w = rnd((size_t)OC * IC, 2, 0.3f), *bias = rnd(OC, 3, 1);
            round_to(inp, (size_t)N * IC, dt); round_to(w, (size_t)OC * IC, dt);
            float *pre = malloc((size_t)N * OC * 4), *out = malloc((size_t)N * OC * 4);
            cpu_matmul_forward(pre, inp, w, bias, N, IC, OC);
            float *pre_r = copy_of(pre, (size_t)N * OC);
            round_to(pre_r, (size_t)N * OC, dt);
            cpu_gelu_forward(out, pre, (size_t)N * OC);
            float *g_pre[2], *g_out[2];
            for (int rep = 0; rep < 2; rep++) {
                void *d_inp = up(inp, (size_t)N * IC, dt), *d_w = up(w, (size_t)OC * IC, dt);
                float *d_b = up(bias, OC, CUDA_F32);
                void *d_pre = cuda_alloc((size_t)N * OC * 4), *d_out = cuda_alloc((size_t)N * OC * 4);
                poison(d_pre, (size_t)N * OC * cuda_dtype_size(dt));
                poison(d_out, (size_t)N * OC * cuda_dtype_size(dt));
                cuda_matmul_forward_gelu(d_out, d_pre, d_inp, d_w, d_b, dt, N, IC, OC);
                g_pre[rep] = down(d_pre, (size_t)N * OC, dt);
                g_out[rep] = down(d_out, (size_t)N * OC, dt);
                cuda_free(d_inp); cuda_free(d_w); cuda_free(d_b); cuda_free(d_pre); cuda_free(d_out);
            }
            const char *name = oi ? "matmul_forward_gelu (unfused)" : "matmul_forward_gelu (epilogue)";
            CHECK_REL(g_pre[0], pre, (size_t)N * OC, tol_out(dt), name, dt);
            CHECK_REL(g_out[0], out, (size_t)N * OC, tol_out(dt), name, dt);
            CHECK_SAME(g_pre[0], g_pre[1], (size_t)N * OC, "gelu pre");
            CHECK_SAME(g_out[0], g_out[1], (size_t)N * OC, "gelu out");
            for (int rep = 0; rep < 2; rep++) { free(g_pre[rep]); free(g_out[rep]); }
            free(inp); free(w); free(bias); free(pre); free(pre_r); free(out);
        }
}

/* ---------------------------------------------------------------- norms */
static void test_layernorm(void) {
    int N = SIZE(37, 4096), C = SIZE(72, 768);
    for (int dt = 0; dt < 2; dt++) {
        size_t n = (size_t)N * C;
        float *x = rnd(n, 1, 4), *w = rnd(C, 2, 1), *b = rnd(C, 3, 1), *dy = rnd(n, 4, 1), *dx0 = rnd(n, 5, 1);
        float *dw0 = rnd(C, 6, 1), *db0 = rnd(C, 7, 1);
        for (size_t i = 0; i < n; i++) x[i] += 0.5f; /* a mean away from 0 */
        round_to(x, n, dt); round_to(dy, n, dt); round_to(dx0, n, dt);
        float *y = malloc(n * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
        float *dx = copy_of(dx0, n), *dw = copy_of(dw0, C), *db = copy_of(db0, C);
        cpu_layernorm_forward(y, mean, rstd, x, w, b, N, C, 1e-5f);
        cpu_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
        float *g[2][6];
        for (int rep = 0; rep < 2; rep++) {
            void *d_x = up(x, n, dt), *d_y = cuda_alloc(n * 4), *d_dy = up(dy, n, dt), *d_dx = up(dx0, n, dt);
            float *d_w = up(w, C, 0), *d_b = up(b, C, 0), *d_mean = cuda_alloc(N * 4), *d_rstd = cuda_alloc(N * 4);
            float *d_dw = up(dw0, C, 0), *d_db = up(db0, C, 0);
            poison(d_y, n * cuda_dtype_size(dt)); poison(d_mean, N * 4); poison(d_rstd, N * 4);
            cuda_layernorm_forward(d_y, dt, d_mean, d_rstd, d_x, dt, d_w, d_b, N, C, 1e-5f);
            cuda_layernorm_backward(d_dx, dt, d_dw, d_db, d_dy, dt, d_x, d_w, d_mean, d_rstd, N, C);
            g[rep][0] = down(d_y, n, dt); g[rep][1] = down(d_mean, N, 0); g[rep][2] = down(d_rstd, N, 0);
            g[rep][3] = down(d_dx, n, dt); g[rep][4] = down(d_dw, C, 0); g[rep][5] = down(d_db, C, 0);
            cuda_free(d_x); cuda_free(d_y); cuda_free(d_dy); cuda_free(d_dx); cuda_free(d_w); cuda_free(d_b);
            cuda_free(d_mean); cuda_free(d_rstd); cuda_free(d_dw); cuda_free(d_db);
        }
        CHECK_REL(g[0][0], y, n, tol_out(dt), "layernorm_forward out", dt);
        CHECK_REL(g[0][1], mean, N, 1e-5, "layernorm_forward mean", dt);
        CHECK_REL(g[0][2], rstd, N, 1e-5, "layernorm_forward rstd", dt);
        CHECK_REL(g[0][3], dx, n, tol_out(dt), "layernorm_backward dx (+=)", dt);
        CHECK_REL(g[0][4], dw, C, 1e-5, "layernorm_backward dw", dt);
        CHECK_REL(g[0][5], db, C, 1e-5, "layernorm_backward db", dt);
        size_t sizes[6] = {n, N, N, n, C, C};
        for (int k = 0; k < 6; k++) CHECK_SAME(g[0][k], g[1][k], sizes[k], "layernorm");
        for (int rep = 0; rep < 2; rep++)
            for (int k = 0; k < 6; k++) free(g[rep][k]);
        free(x); free(w); free(b); free(dy); free(dx0); free(dw0); free(db0);
        free(y); free(mean); free(rstd); free(dx); free(dw); free(db);
    }
}

static void test_rmsnorm(void) {
    int N = SIZE(33, 4096), C = SIZE(64, 2048);
    for (int dt = 0; dt < 2; dt++) {
        size_t n = (size_t)N * C;
        float *x = rnd(n, 1, 4), *w = rnd(C, 2, 1), *dy = rnd(n, 4, 1), *dx0 = rnd(n, 5, 1), *dw0 = rnd(C, 6, 1);
        round_to(x, n, dt); round_to(dy, n, dt); round_to(dx0, n, dt);
        float *y = malloc(n * 4), *rstd = malloc(N * 4), *dx = copy_of(dx0, n), *dw = copy_of(dw0, C);
        cpu_rmsnorm_forward(y, rstd, x, w, N, C, 1e-5f);
        cpu_rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
        float *g[2][4];
        for (int rep = 0; rep < 2; rep++) {
            void *d_x = up(x, n, dt), *d_y = cuda_alloc(n * 4), *d_dy = up(dy, n, dt), *d_dx = up(dx0, n, dt);
            float *d_w = up(w, C, 0), *d_rstd = cuda_alloc(N * 4), *d_dw = up(dw0, C, 0);
            poison(d_y, n * cuda_dtype_size(dt)); poison(d_rstd, N * 4);
            cuda_rmsnorm_forward(d_y, dt, d_rstd, d_x, dt, d_w, N, C, 1e-5f);
            cuda_rmsnorm_backward(d_dx, dt, d_dw, d_dy, dt, d_x, d_w, d_rstd, N, C);
            g[rep][0] = down(d_y, n, dt); g[rep][1] = down(d_rstd, N, 0);
            g[rep][2] = down(d_dx, n, dt); g[rep][3] = down(d_dw, C, 0);
            cuda_free(d_x); cuda_free(d_y); cuda_free(d_dy); cuda_free(d_dx); cuda_free(d_w); cuda_free(d_rstd);
            cuda_free(d_dw);
        }
        CHECK_REL(g[0][0], y, n, tol_out(dt), "rmsnorm_forward out", dt);
        CHECK_REL(g[0][1], rstd, N, 1e-5, "rmsnorm_forward rstd", dt);
        CHECK_REL(g[0][2], dx, n, tol_out(dt), "rmsnorm_backward dx (+=)", dt);
        CHECK_REL(g[0][3], dw, C, 1e-5, "rmsnorm_backward dw", dt);
        size_t sizes[4] = {n, N, n, C};
        for (int k = 0; k < 4; k++) CHECK_SAME(g[0][k], g[1][k], sizes[k], "rmsnorm");
        for (int rep = 0; rep < 2; rep++)
            for (int k = 0; k < 4; k++) free(g[rep][k]);
        free(x); free(w); free(dy); free(dx0); free(dw0); free(y); free(rstd); free(dx); free(dw);
    }
}

/* ---------------------------------------------------------------- pointwise */
static void test_gelu_swiglu(void) {
    int N = SIZE(9, 1024), F = SIZE(37, 2816);
    size_t n = (size_t)N * F;
    for (int dt = 0; dt < 2; dt++) {
        float *x = rnd(2 * n + 1, 1, 8), *dy = rnd(2 * n + 1, 2, 1);
        round_to(x, 2 * n + 1, dt); round_to(dy, 2 * n + 1, dt);
        /* GELU over an odd count (the scalar path) and over n (the vector path when n % 4 == 0) */
        size_t counts[2] = {2 * n + 1, 2 * n};
        for (int ci = 0; ci < 2; ci++) {
            size_t m = counts[ci];
            float *y = malloc(m * 4), *dx = malloc(m * 4);
            cpu_gelu_forward(y, x, m);
            cpu_gelu_backward(dx, x, dy, m);
            float *gy[2], *gdx[2];
            for (int rep = 0; rep < 2; rep++) {
                void *d_x = up(x, m, dt), *d_dy = up(dy, m, dt), *d_y = cuda_alloc(m * 4), *d_dx = cuda_alloc(m * 4);
                poison(d_y, m * cuda_dtype_size(dt)); poison(d_dx, m * cuda_dtype_size(dt));
                cuda_gelu_forward(d_y, d_x, m, dt);
                cuda_gelu_backward(d_dx, d_x, d_dy, m, dt);
                gy[rep] = down(d_y, m, dt); gdx[rep] = down(d_dx, m, dt);
                cuda_free(d_x); cuda_free(d_dy); cuda_free(d_y); cuda_free(d_dx);
            }
            CHECK_REL(gy[0], y, m, tol_out(dt), ci ? "gelu_forward (vector path)" : "gelu_forward (scalar path)", dt);
            CHECK_REL(gdx[0], dx, m, tol_out(dt), "gelu_backward", dt);
            CHECK_SAME(gy[0], gy[1], m, "gelu");
            CHECK_SAME(gdx[0], gdx[1], m, "gelu backward");
            for (int rep = 0; rep < 2; rep++) { free(gy[rep]); free(gdx[rep]); }
            free(y); free(dx);
        }
        float *y = malloc(n * 4), *dx = malloc(2 * n * 4);
        cpu_swiglu_forward(y, x, N, F);
        cpu_swiglu_backward(dx, x, dy, N, F);
        float *gy[2], *gdx[2];
        for (int rep = 0; rep < 2; rep++) {
            void *d_x = up(x, 2 * n, dt), *d_dy = up(dy, n, dt), *d_y = cuda_alloc(n * 4), *d_dx = cuda_alloc(2 * n * 4);
            poison(d_y, n * cuda_dtype_size(dt)); poison(d_dx, 2 * n * cuda_dtype_size(dt));
            cuda_swiglu_forward(d_y, d_x, N, F, dt);
            cuda_swiglu_backward(d_dx, d_x, d_dy, N, F, dt);
            gy[rep] = down(d_y, n, dt); gdx[rep] = down(d_dx, 2 * n, dt);
            cuda_free(d_x); cuda_free(d_dy); cuda_free(d_y); cuda_free(d_dx);
        }
        CHECK_REL(gy[0], y, n, tol_out(dt), "swiglu_forward", dt);
        CHECK_REL(gdx[0], dx, 2 * n, tol_out(dt), "swiglu_backward", dt);
        CHECK_SAME(gy[0], gy[1], n, "swiglu");
        CHECK_SAME(gdx[0], gdx[1], 2 * n, "swiglu backward");
        for (int rep = 0; rep < 2; rep++) { free(gy[rep]); free(gdx[rep]); }
        free(x); free(dy); free(y); free(dx);
    }
}

static void test_residual_scale(void) {
    size_t n = SIZE(1001, 3 << 20);
    float *a = rnd(n, 1, 1), *b = rnd(n, 2, 1);
    for (int mask = 0; mask < 8; mask++) { /* out, a, b each fp32 or bf16 */
        int odt = mask & 1, adt = (mask >> 1) & 1, bdt = (mask >> 2) & 1;
        float *ar = copy_of(a, n), *br = copy_of(b, n), *ref = malloc(n * 4);
        round_to(ar, n, adt); round_to(br, n, bdt);
        cpu_residual_forward(ref, ar, br, n);
        void *d_a = up(ar, n, adt), *d_b = up(br, n, bdt), *d_o = cuda_alloc(n * 4);
        poison(d_o, n * cuda_dtype_size(odt));
        cuda_residual_forward(d_o, odt, d_a, adt, d_b, bdt, n);
        float *got = down(d_o, n, odt);
        double e = rel_err(got, ref, n);
        CHECK(e <= tol_out(odt), "residual out %s a %s b %s: rel err %.3g", dtn(odt), dtn(adt), dtn(bdt), e);
        cuda_add_inplace(d_a, adt, d_b, bdt, n); /* acc += x */
        float *acc = down(d_a, n, adt);
        e = rel_err(acc, ref, n);
        CHECK(e <= tol_out(adt), "add_inplace acc %s x %s: rel err %.3g", dtn(adt), dtn(bdt), e);
        cuda_free(d_a); cuda_free(d_b); cuda_free(d_o);
        free(ar); free(br); free(ref); free(got); free(acc);
    }
    float *d = up(a, n, 0);
    cuda_scale_inplace(d, 0.37f, n);
    float *got = down(d, n, 0), *ref = copy_of(a, n);
    cpu_scale_inplace(ref, 0.37f, n);
    CHECK(!memcmp(got, ref, n * 4), "scale_inplace: one rounding, the same bits as the CPU");
    cuda_free(d);
    free(a); free(b); free(got); free(ref);
    printf("  residual/add_inplace: all 8 storage combinations checked\n");
}

/* ---------------------------------------------------------------- embeddings */
static int32_t *tokens_with_repeats(int N, int V, unsigned seed) {
    int32_t *t = malloc(N * sizeof(int32_t));
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (i % 5 == 0 ? 7 : V)); /* small ids repeat often */
    }
    return t;
}

static void test_embedding(void) {
    int B = SIZE(3, 8), T = SIZE(13, 1024), C = SIZE(40, 768), V = SIZE(50, 50257), N = B * T;
    int32_t *tok = tokens_with_repeats(N, V, 11);
    for (int dt = 0; dt < 2; dt++) {
        float *wte = rnd((size_t)V * C, 1, 1), *wpe = rnd((size_t)T * C, 2, 1), *dout = rnd((size_t)N * C, 3, 1);
        float *dtok0 = rnd((size_t)V * C, 4, 1), *dpos0 = rnd((size_t)T * C, 5, 1);
        round_to(dout, (size_t)N * C, dt);
        float *out = malloc((size_t)N * C * 4), *dtok = copy_of(dtok0, (size_t)V * C), *dpos = copy_of(dpos0, (size_t)T * C);
        cpu_embedding_forward(out, tok, wte, wpe, N, T, C);
        cpu_embedding_backward(dtok, dpos, dout, tok, N, T, C);
        float *g[2][3];
        for (int rep = 0; rep < 2; rep++) {
            int32_t *d_tok = up_bytes(tok, N * 4);
            float *d_wte = up(wte, (size_t)V * C, 0), *d_wpe = up(wpe, (size_t)T * C, 0);
            void *d_out = cuda_alloc((size_t)N * C * 4), *d_dout = up(dout, (size_t)N * C, dt);
            float *d_dtok = up(dtok0, (size_t)V * C, 0), *d_dpos = up(dpos0, (size_t)T * C, 0);
            poison(d_out, (size_t)N * C * cuda_dtype_size(dt));
            cuda_embedding_forward(d_out, dt, d_tok, d_wte, d_wpe, N, T, C);
            cuda_embedding_backward(d_dtok, d_dpos, d_dout, dt, d_tok, N, T, C);
            g[rep][0] = down(d_out, (size_t)N * C, dt);
            g[rep][1] = down(d_dtok, (size_t)V * C, 0);
            g[rep][2] = down(d_dpos, (size_t)T * C, 0);
            cuda_free(d_tok); cuda_free(d_wte); cuda_free(d_wpe); cuda_free(d_out); cuda_free(d_dout);
            cuda_free(d_dtok); cuda_free(d_dpos);
        }
        CHECK_REL(g[0][0], out, (size_t)N * C, tol_out(dt), "embedding_forward", dt);
        /* the same fp32 additions in the same order as the CPU: identical bits */
        CHECK(!memcmp(g[0][1], dtok, (size_t)V * C * 4), "embedding_backward dtok: bits differ from the CPU backend");
        CHECK(!memcmp(g[0][2], dpos, (size_t)T * C * 4), "embedding_backward dpos: bits differ from the CPU backend");
        printf("  embedding_backward                 %s  bit-identical to the CPU backend\n", dtn(dt));
        for (int k = 0; k < 3; k++) CHECK_SAME(g[0][k], g[1][k], k == 1 ? (size_t)V * C : k == 2 ? (size_t)T * C : (size_t)N * C, "embedding");
        for (int rep = 0; rep < 2; rep++)
            for (int k = 0; k < 3; k++) free(g[rep][k]);
        free(wte); free(wpe); free(dout); free(dtok0); free(dpos0); free(out); free(dtok); free(dpos);
    }
    free(tok);
}

static void test_embedding_shard_position(void) {
    int N = SIZE(29, 4096), C = SIZE(24, 1024), V = SIZE(40, 32000), lo = V / 3, vn = V / 3, T = SIZE(8, 1024);
    int row0 = SIZE(5, 3000);
    int32_t *tok = tokens_with_repeats(N, V, 5);
    for (int dt = 0; dt < 2; dt++) {
        float *tab = rnd((size_t)vn * C, 1, 1), *dout = rnd((size_t)N * C, 2, 1), *dtab0 = rnd((size_t)vn * C, 3, 1);
        float *pos = rnd((size_t)T * C, 4, 1), *dpos0 = rnd((size_t)T * C, 5, 1), *base = rnd((size_t)N * C, 6, 1);
        float *bias = rnd(C, 7, 1), *db0 = rnd(C, 8, 1);
        round_to(dout, (size_t)N * C, dt); round_to(base, (size_t)N * C, dt); round_to(bias, C, dt);
        float *out = malloc((size_t)N * C * 4), *dtab = copy_of(dtab0, (size_t)vn * C), *dpos = copy_of(dpos0, (size_t)T * C);
        float *padd = copy_of(base, (size_t)N * C), *badd = copy_of(base, (size_t)N * C), *db = copy_of(db0, C);
        cpu_embedding_shard_forward(out, tok, tab, lo, vn, N, C);
        cpu_embedding_shard_backward(dtab, dout, tok, lo, vn, N, C);
        cpu_position_forward_add(padd, pos, row0, N, T, C);
        cpu_position_backward(dpos, dout, row0, N, T, C);
        cpu_bias_add(badd, bias, N, C);
        cpu_bias_backward(db, dout, N, C);
        int32_t *d_tok = up_bytes(tok, N * 4);
        float *d_tab = up(tab, (size_t)vn * C, 0), *d_dtab = up(dtab0, (size_t)vn * C, 0), *d_pos = up(pos, (size_t)T * C, 0);
        float *d_dpos = up(dpos0, (size_t)T * C, 0), *d_db = up(db0, C, 0);
        void *d_out = cuda_alloc((size_t)N * C * 4), *d_dout = up(dout, (size_t)N * C, dt);
        void *d_padd = up(base, (size_t)N * C, dt), *d_badd = up(base, (size_t)N * C, dt), *d_bias = up(bias, C, dt);
        poison(d_out, (size_t)N * C * cuda_dtype_size(dt));
        cuda_embedding_shard_forward(d_out, dt, d_tok, d_tab, lo, vn, N, C);
        cuda_embedding_shard_backward(d_dtab, d_dout, dt, d_tok, lo, vn, N, C);
        cuda_position_forward_add(d_padd, dt, d_pos, row0, N, T, C);
        cuda_position_backward(d_dpos, d_dout, dt, row0, N, T, C);
        cuda_bias_add(d_badd, dt, d_bias, dt, N, C);
        cuda_bias_backward(d_db, d_dout, dt, N, C);
        float *g_out = down(d_out, (size_t)N * C, dt), *g_dtab = down(d_dtab, (size_t)vn * C, 0);
        float *g_padd = down(d_padd, (size_t)N * C, dt), *g_dpos = down(d_dpos, (size_t)T * C, 0);
        float *g_badd = down(d_badd, (size_t)N * C, dt), *g_db = down(d_db, C, 0);
        CHECK_REL(g_out, out, (size_t)N * C, tol_out(dt), "embedding_shard_forward", dt);
        CHECK(!memcmp(g_dtab, dtab, (size_t)vn * C * 4), "embedding_shard_backward: bits differ from the CPU backend");
        CHECK_REL(g_padd, padd, (size_t)N * C, tol_out(dt), "position_forward_add", dt);
        CHECK(!memcmp(g_dpos, dpos, (size_t)T * C * 4), "position_backward: bits differ from the CPU backend");
        CHECK_REL(g_badd, badd, (size_t)N * C, tol_out(dt), "bias_add", dt);
        CHECK_REL(g_db, db, C, 1e-5, "bias_backward", dt);
        cuda_free(d_tok); cuda_free(d_tab); cuda_free(d_dtab); cuda_free(d_pos); cuda_free(d_dpos); cuda_free(d_db);
        cuda_free(d_out); cuda_free(d_dout); cuda_free(d_padd); cuda_free(d_badd); cuda_free(d_bias);
        free(tab); free(dout); free(dtab0); free(pos); free(dpos0); free(base); free(bias); free(db0);
        free(out); free(dtab); free(dpos); free(padd); free(badd); free(db);
        free(g_out); free(g_dtab); free(g_padd); free(g_dpos); free(g_badd); free(g_db);
    }
    free(tok);
}

/* ---------------------------------------------------------------- losses */
/* Rows of ld values with columns [V, ld) a padded vocabulary (--vocab-pad: 1000 in 1024, GPT-2's
 * 50257 in 50304), filled with huge logits that would take the softmax if read: the CPU
 * reference runs on the unpadded rows; the padding's gradient must be 0, and untouched without one. */
static float *pad_rows(const float *z, int N, int V, int ld, float fill) {
    float *p = malloc((size_t)N * ld * 4);
    for (int n = 0; n < N; n++)
        for (int v = 0; v < ld; v++) p[(size_t)n * ld + v] = v < V ? z[(size_t)n * V + v] : fill;
    return p;
}

/* The real columns of padded rows, and whether every padding value equals want. */
static float *unpad_rows(const float *p, int N, int V, int ld, float want, int *pad_ok) {
    float *z = malloc((size_t)N * V * 4);
    *pad_ok = 1;
    for (int n = 0; n < N; n++)
        for (int v = 0; v < ld; v++) {
            if (v < V) z[(size_t)n * V + v] = p[(size_t)n * ld + v];
            else *pad_ok &= p[(size_t)n * ld + v] == want;
        }
    return z;
}

static void test_cross_entropy(void) {
    int N = SIZE(5, 64), V = SIZE(1000, 50257);
    int32_t *tg = malloc(N * 4);
    for (int n = 0; n < N; n++) tg[n] = (n * 7919) % V;
    tg[N - 1] = V - 1;
    for (int padded = 0; padded < 2; padded++)
    for (int dt = 0; dt < 2; dt++)
        for (int want = 0; want < 2; want++) {
            int ld = padded ? (V + 127) / 128 * 128 : V;
            float *z = rnd((size_t)N * V, 3 + want, 20);
            round_to(z, (size_t)N * V, dt);
            float *zr = copy_of(z, (size_t)N * V), *losses = malloc(N * 4);
            double mean = cpu_cross_entropy_forward_backward(zr, losses, tg, N, V, V, want, 2.0);
            float *zp = pad_rows(z, N, V, ld, 9984.0f); /* exact in bf16 */
            float *gz[2], *gl[2];
            double gm[2];
            int pad_ok = 1;
            for (int rep = 0; rep < 2; rep++) {
                void *d_z = up(zp, (size_t)N * ld, dt);
                float *d_l = cuda_alloc(N * 4);
                int32_t *d_t = up_bytes(tg, N * 4);
                poison(d_l, N * 4);
                gm[rep] = cuda_cross_entropy_forward_backward(d_z, dt, d_l, d_t, N, V, ld, want, 2.0);
                float *got = down(d_z, (size_t)N * ld, dt);
                int ok;
                gz[rep] = unpad_rows(got, N, V, ld, want ? 0.0f : 9984.0f, &ok);
                pad_ok &= ok;
                free(got);
                gl[rep] = down(d_l, N, 0);
                cuda_free(d_z); cuda_free(d_l); cuda_free(d_t);
            }
            CHECK_REL(gl[0], losses, N, 1e-5, want ? "cross_entropy losses (with grad)" : "cross_entropy losses", dt);
            CHECK_CLOSE(gm[0], mean, 1e-5, 0, padded ? "mean loss (padded rows)" : "mean loss");
            if (want) CHECK_REL(gz[0], zr, (size_t)N * V, tol_out(dt), "cross_entropy dlogits", dt);
            else CHECK(!memcmp(gz[0], z, (size_t)N * V * 4), "logits untouched without a gradient");
            CHECK(pad_ok, "padding columns (ld %d, V %d): %s", ld, V, want ? "gradient not 0" : "written without a gradient");
            CHECK_SAME(gz[0], gz[1], (size_t)N * V, "cross entropy grad");
            CHECK_SAME(gl[0], gl[1], N, "cross entropy losses");
            CHECK(gm[0] == gm[1], "mean loss differs between runs");
            for (int rep = 0; rep < 2; rep++) { free(gz[rep]); free(gl[rep]); }
            free(z); free(zr); free(zp); free(losses);
        }
    free(tg);
}

static void test_vocab_parallel(void) {
    int N = SIZE(6, 64), V = SIZE(500, 16000), lo = SIZE(250, 16000);
    int32_t *tg = malloc(N * 4);
    for (int n = 0; n < N; n++) tg[n] = (n * 131) % (2 * V); /* half of them on this rank */
    for (int padded = 0; padded < 2; padded++)
    for (int dt = 0; dt < 2; dt++) {
        int ld = padded ? V + 12 : V; /* this rank's slice padded (reference: the unpadded rows) */
        float *z = rnd((size_t)N * V, 9, 16);
        round_to(z, (size_t)N * V, dt);
        double *mx = malloc(N * 8), *sum = malloc(N * 8), *tl = malloc(N * 8);
        cpu_vocab_shard_row_max(z, N, V, V, mx);
        cpu_vocab_shard_row_sumexp(z, N, V, V, mx, sum);
        cpu_vocab_shard_target_logit(z, tg, lo, N, V, V, tl);
        float *zr = copy_of(z, (size_t)N * V);
        cpu_vocab_shard_grad(zr, tg, lo, N, V, V, mx, sum, 0.25);
        float *zp = pad_rows(z, N, V, ld, 9984.0f);
        void *d_z = up(zp, (size_t)N * ld, dt);
        int32_t *d_t = up_bytes(tg, N * 4);
        double *d_mx = cuda_alloc(N * 8), *d_sum = cuda_alloc(N * 8), *d_tl = cuda_alloc(N * 8);
        cuda_vocab_shard_row_max(d_z, dt, N, V, ld, d_mx);
        cuda_vocab_shard_row_sumexp(d_z, dt, N, V, ld, d_mx, d_sum);
        cuda_vocab_shard_target_logit(d_z, dt, d_t, lo, N, V, ld, d_tl);
        cuda_vocab_shard_grad(d_z, dt, d_t, lo, N, V, ld, d_mx, d_sum, 0.25);
        double *g_mx = malloc(N * 8), *g_sum = malloc(N * 8), *g_tl = malloc(N * 8);
        cuda_copy_to_host(g_mx, d_mx, N * 8);
        cuda_copy_to_host(g_sum, d_sum, N * 8);
        cuda_copy_to_host(g_tl, d_tl, N * 8);
        float *got = down(d_z, (size_t)N * ld, dt);
        int pad_ok;
        float *g_z = unpad_rows(got, N, V, ld, 0.0f, &pad_ok);
        for (int n = 0; n < N; n++) {
            CHECK(g_mx[n] == mx[n], "row max %d: %g vs %g", n, g_mx[n], mx[n]);
            CHECK_CLOSE(g_sum[n], sum[n], 1e-12, 0, "row sum of exp (double)");
            CHECK(g_tl[n] == tl[n], "target logit %d", n);
        }
        CHECK_REL(g_z, zr, (size_t)N * V, tol_out(dt), "vocab_shard_grad", dt);
        CHECK(pad_ok, "vocab_shard_grad: padding columns (ld %d, V %d) not 0", ld, V);
        if (padded) { /* a rank whose slice holds no tokens: max -inf, sum 0 */
            cuda_vocab_shard_row_max(d_z, dt, N, 0, ld, d_mx);
            cuda_vocab_shard_row_sumexp(d_z, dt, N, 0, ld, d_mx, d_sum);
            cuda_copy_to_host(g_mx, d_mx, N * 8);
            cuda_copy_to_host(g_sum, d_sum, N * 8);
            CHECK(g_mx[0] == -INFINITY && g_sum[0] == 0, "no tokens: max %g, sum %g", g_mx[0], g_sum[0]);
        }
        cuda_free(d_z); cuda_free(d_t); cuda_free(d_mx); cuda_free(d_sum); cuda_free(d_tl);
        free(z); free(zp); free(got); free(mx); free(sum); free(tl); free(zr); free(g_mx); free(g_sum); free(g_tl);
        free(g_z);
    }
    free(tg);
}

/* ---------------------------------------------------------------- rotary */
static void test_rope(void) {
    int B = 2, T = SIZE(9, 1024), H = 4, KV = 2, hd = SIZE(16, 128), N = B * T, stride = (H + 2 * KV) * hd;
    int max_seq = T + 3;
    float *cs = malloc((size_t)max_seq * hd / 2 * 4), *sn = malloc((size_t)max_seq * hd / 2 * 4);
    float inv_freq[64];
    for (int i = 0; i < hd / 2; i++) inv_freq[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hd);
    cpu_rope_tables(cs, sn, max_seq, hd, inv_freq);
    float *d_cs = cuda_alloc((size_t)max_seq * hd / 2 * 4), *d_sn = cuda_alloc((size_t)max_seq * hd / 2 * 4);
    cuda_rope_tables(d_cs, d_sn, max_seq, hd, inv_freq);
    float *g_cs = down(d_cs, (size_t)max_seq * hd / 2, 0);
    CHECK(!memcmp(g_cs, cs, (size_t)max_seq * hd / 2 * 4), "rotary tables are the CPU backend's");
    for (int dt = 0; dt < 2; dt++)
        for (int inv = 0; inv < 2; inv++) {
            size_t n = (size_t)N * stride;
            float *x = rnd(n, 3 + inv, 2);
            round_to(x, n, dt);
            float *ref = copy_of(x, n);
            cpu_rope_apply(ref, cs, sn, N, T, H, KV, hd, stride, inv);
            void *d_x = up(x, n, dt);
            cuda_rope_apply(d_x, dt, d_cs, d_sn, N, T, H, KV, hd, stride, inv);
            float *g = down(d_x, n, dt);
            CHECK_REL(g, ref, n, tol_out(dt), inv ? "rope_apply (inverse)" : "rope_apply", dt);
            /* the v heads are not touched */
            int untouched = 1;
            for (int r = 0; r < N; r++)
                for (int i = (H + KV) * hd; i < stride; i++) untouched &= g[(size_t)r * stride + i] == x[(size_t)r * stride + i];
            CHECK(untouched, "rope_apply changed v");
            cuda_free(d_x);
            free(x); free(ref); free(g);
        }
    cuda_free(d_cs); cuda_free(d_sn);
    free(cs); free(sn); free(g_cs);
}

/* ---------------------------------------------------------------- attention */
/* lse of each (b, h, t) row, in double, from the definition */
static void lse_reference(float *lse, const float *qkv, int B, int T, int H, int KV, int hd) {
    int stride = (H + 2 * KV) * hd, group = H / KV;
    double *s = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * stride + h * hd;
                double mx = -1e300, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * stride + (H + h / group) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
                    s[u] = d / sqrt((double)hd);
                    if (s[u] > mx) mx = s[u];
                }
                for (int u = 0; u <= t; u++) sum += exp(s[u] - mx);
                lse[((size_t)b * H + h) * T + t] = (float)(mx + log(sum));
            }
    free(s);
}

static void attention_case(int impl, int dt, int B, int T, int H, int KV, int hd) {
    int stride = (H + 2 * KV) * hd;
    size_t nq = (size_t)B * T * stride, no = (size_t)B * T * H * hd;
    float *qkv = rnd(nq, 7 + T + hd, 3), *dout = rnd(no, 8 + T, 1);
    round_to(qkv, nq, dt);
    round_to(dout, no, dt);
    float *out = malloc(no * 4), *att = malloc((size_t)B * H * T * T * 4), *dqkv = malloc(nq * 4);
    float *lse = malloc((size_t)B * H * T * 4);
    cpu_attention_forward(out, att, qkv, B, T, H, KV, hd);
    cpu_attention_backward(dqkv, dout, qkv, att, B, T, H, KV, hd);
    lse_reference(lse, qkv, B, T, H, KV, hd);
    cuda_set_attention_impl(impl);
    float *g_out[2], *g_lse[2], *g_dqkv[2];
    for (int rep = 0; rep < 2; rep++) {
        void *d_qkv = up(qkv, nq, dt), *d_dout = up(dout, no, dt), *d_out = cuda_alloc(no * 4), *d_dqkv = cuda_alloc(nq * 4);
        float *d_lse = cuda_alloc((size_t)B * H * T * 4);
        poison(d_out, no * cuda_dtype_size(dt)); poison(d_lse, (size_t)B * H * T * 4); poison(d_dqkv, nq * cuda_dtype_size(dt));
        cuda_attention_forward(d_out, d_lse, d_qkv, B, T, H, KV, hd, dt);
        cuda_attention_backward(d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, H, KV, hd, dt);
        g_out[rep] = down(d_out, no, dt);
        g_lse[rep] = down(d_lse, (size_t)B * H * T, 0);
        g_dqkv[rep] = down(d_dqkv, nq, dt);
        cuda_free(d_qkv); cuda_free(d_dout); cuda_free(d_out); cuda_free(d_dqkv); cuda_free(d_lse);
    }
    cuda_set_attention_impl(CUDA_ATTN_AUTO);
    char what[96];
    double tf = dt == CUDA_F32 ? 1e-5 : impl == CUDA_ATTN_TC ? 1e-2 : 4e-3;
    double tb = dt == CUDA_F32 ? 1e-5 : impl == CUDA_ATTN_TC ? 2e-2 : 4e-3;
    snprintf(what, sizeof what, "attention %s B%d T%d H%d KV%d hd%d out", impl == CUDA_ATTN_TC ? "tc" : "simple", B, T,
             H, KV, hd);
    CHECK_REL(g_out[0], out, no, tf, what, dt);
    CHECK_REL(g_lse[0], lse, (size_t)B * H * T, dt == CUDA_F32 ? 1e-5 : 1e-4, "  lse", dt);
    CHECK_REL(g_dqkv[0], dqkv, nq, tb, "  dqkv", dt);
    CHECK_SAME(g_out[0], g_out[1], no, "attention out");
    CHECK_SAME(g_lse[0], g_lse[1], (size_t)B * H * T, "attention lse");
    CHECK_SAME(g_dqkv[0], g_dqkv[1], nq, "attention dqkv");
    for (int rep = 0; rep < 2; rep++) { free(g_out[rep]); free(g_lse[rep]); free(g_dqkv[rep]); }
    free(qkv); free(dout); free(out); free(att); free(dqkv); free(lse);
}

static void test_attention_simple(void) {
    /* the fixtures' shape (hd 8), GQA, ragged T, and the presets' head sizes */
    int cfg_small[][5] = {{2, 16, 4, 2, 8}, {1, 37, 4, 1, 32}, {1, 70, 2, 2, 64}, {1, 40, 4, 2, 128}};
    int cfg_big[][5] = {{2, 16, 4, 2, 8}, {4, 256, 4, 4, 32}, {2, 1024, 12, 12, 64}, {1, 1000, 8, 2, 128}};
    for (int i = 0; i < 4; i++)
        for (int dt = 0; dt < 2; dt++) {
            int *c = big ? cfg_big[i] : cfg_small[i];
            attention_case(CUDA_ATTN_SIMPLE, dt, c[0], c[1], c[2], c[3], c[4]);
        }
}

static void test_attention_tc(void) {
    int cfg_small[][5] = {{1, 70, 2, 2, 64}, {1, 150, 4, 2, 128}, {2, 64, 2, 1, 64}, {1, 200, 8, 2, 64}};
    int cfg_big[][5] = {{2, 1024, 12, 12, 64}, {1, 1000, 8, 2, 128}, {1, 4096, 4, 1, 64}, {2, 2048, 32, 8, 64}};
    for (int i = 0; i < 4; i++) {
        int *c = big ? cfg_big[i] : cfg_small[i];
        attention_case(CUDA_ATTN_TC, CUDA_BF16, c[0], c[1], c[2], c[3], c[4]);
    }
}

/* ---------------------------------------------------------------- mixture of experts */
static void test_moe(void) {
    int N = SIZE(37, 4096), T = SIZE(37, 1024), E = 8, k = 2, C = SIZE(24, 1024), R = N * k;
    float *logits = rnd((size_t)N * E, 1, 4), *dgates = rnd((size_t)N * k, 2, 1), *daux = rnd((size_t)(N / T) * E, 3, 1);
    float *probs = copy_of(logits, (size_t)N * E), *gates = malloc((size_t)N * k * 4), *dl = malloc((size_t)N * E * 4);
    int32_t *topk = malloc((size_t)N * k * 4);
    cpu_moe_router_topk(probs, topk, gates, N, E, k);
    cpu_moe_router_backward(dl, probs, topk, gates, dgates, daux, N, T, E, k);
    float *d_p = up(logits, (size_t)N * E, 0), *d_g = cuda_alloc((size_t)N * k * 4), *d_dg = up(dgates, (size_t)N * k, 0);
    float *d_aux = up(daux, (size_t)(N / T) * E, 0), *d_dl = cuda_alloc((size_t)N * E * 4);
    int32_t *d_topk = cuda_alloc((size_t)N * k * 4);
    cuda_moe_router_topk(d_p, d_topk, d_g, N, E, k);
    cuda_moe_router_backward(d_dl, d_p, d_topk, d_g, d_dg, d_aux, N, T, E, k);
    float *g_p = down(d_p, (size_t)N * E, 0), *g_g = down(d_g, (size_t)N * k, 0), *g_dl = down(d_dl, (size_t)N * E, 0);
    int32_t *g_topk = malloc((size_t)N * k * 4);
    cuda_copy_to_host(g_topk, d_topk, (size_t)N * k * 4);
    CHECK(!memcmp(g_topk, topk, (size_t)N * k * 4), "moe_router_topk: the chosen experts differ from the CPU's");
    CHECK_REL(g_p, probs, (size_t)N * E, 1e-6, "moe_router_topk probs", 0);
    CHECK_REL(g_g, gates, (size_t)N * k, 1e-6, "moe_router_topk gates", 0);
    CHECK_REL(g_dl, dl, (size_t)N * E, 1e-5, "moe_router_backward", 0);
    cuda_free(d_p); cuda_free(d_g); cuda_free(d_dg); cuda_free(d_aux); cuda_free(d_dl); cuda_free(d_topk);
    free(g_p); free(g_g); free(g_dl); free(g_topk);
    /* rows: gather by token with and without scale, scatter by a permutation, combine with repeats */
    int32_t *idx = malloc(R * 4), *perm = malloc(R * 4);
    for (int r = 0; r < R; r++) idx[r] = (r * 7) % N, perm[r] = r; /* each token k times */
    for (int r = R - 1; r > 0; r--) { int j = (r * 2654435761u) % (r + 1), t = perm[r]; perm[r] = perm[j]; perm[j] = t; }
    for (int dt = 0; dt < 2; dt++) {
        float *x = rnd((size_t)N * C, 5, 1), *y = rnd((size_t)R * C, 6, 1), *w = rnd(R, 7, 1), *acc0 = rnd((size_t)N * C, 8, 1);
        round_to(x, (size_t)N * C, dt); round_to(y, (size_t)R * C, dt); round_to(acc0, (size_t)N * C, dt);
        float *gat = malloc((size_t)R * C * 4), *gats = malloc((size_t)R * C * 4), *sc = malloc((size_t)R * C * 4);
        float *comb = copy_of(acc0, (size_t)N * C), *dots = malloc(R * 4);
        cpu_moe_gather_rows(gat, x, idx, NULL, R, C);
        cpu_moe_gather_rows(gats, x, idx, w, R, C);
        cpu_moe_scatter_rows(sc, y, perm, R, C);
        cpu_moe_combine(comb, y, idx, w, R, C);
        cpu_moe_row_dot(dots, x, idx, y, R, C);
        void *d_x = up(x, (size_t)N * C, dt), *d_y = up(y, (size_t)R * C, dt), *d_acc = up(acc0, (size_t)N * C, dt);
        float *d_w = up(w, R, 0), *d_dots = cuda_alloc(R * 4);
        int32_t *d_idx = up_bytes(idx, R * 4), *d_perm = up_bytes(perm, R * 4);
        void *d_gat = cuda_alloc((size_t)R * C * 4), *d_gats = cuda_alloc((size_t)R * C * 4), *d_sc = cuda_alloc((size_t)R * C * 4);
        poison(d_gat, (size_t)R * C * 4); poison(d_gats, (size_t)R * C * 4); poison(d_sc, (size_t)R * C * 4);
        cuda_moe_gather_rows(d_gat, d_x, d_idx, NULL, R, C, dt);
        cuda_moe_gather_rows(d_gats, d_x, d_idx, d_w, R, C, dt);
        cuda_moe_scatter_rows(d_sc, d_y, d_perm, R, C, dt);
        cuda_moe_combine(d_acc, dt, d_y, dt, d_idx, d_w, R, C);
        cuda_moe_row_dot(d_dots, d_x, d_idx, d_y, R, C, dt);
        float *g1 = down(d_gat, (size_t)R * C, dt), *g2 = down(d_gats, (size_t)R * C, dt), *g3 = down(d_sc, (size_t)R * C, dt);
        float *g4 = down(d_acc, (size_t)N * C, dt), *g5 = down(d_dots, R, 0);
        CHECK(!memcmp(g1, gat, (size_t)R * C * 4), "moe_gather_rows is a copy");
        CHECK_REL(g2, gats, (size_t)R * C, tol_out(dt), "moe_gather_rows (scaled)", dt);
        CHECK(!memcmp(g3, sc, (size_t)R * C * 4), "moe_scatter_rows is a copy");
        CHECK_REL(g4, comb, (size_t)N * C, tol_out(dt), "moe_combine", dt);
        CHECK_REL(g5, dots, R, 1e-6, "moe_row_dot", dt);
        /* the combine again from the same start: the same bits */
        void *d_acc2 = up(acc0, (size_t)N * C, dt);
        cuda_moe_combine(d_acc2, dt, d_y, dt, d_idx, d_w, R, C);
        float *g4b = down(d_acc2, (size_t)N * C, dt);
        CHECK_SAME(g4, g4b, (size_t)N * C, "moe_combine");
        cuda_free(d_x); cuda_free(d_y); cuda_free(d_acc); cuda_free(d_acc2); cuda_free(d_w); cuda_free(d_dots);
        cuda_free(d_idx); cuda_free(d_perm); cuda_free(d_gat); cuda_free(d_gats); cuda_free(d_sc);
        free(x); free(y); free(w); free(acc0); free(gat); free(gats); free(sc); free(comb); free(dots);
        free(g1); free(g2); free(g3); free(g4); free(g4b); free(g5);
    }
    free(logits); free(dgates); free(daux); free(probs); free(gates); free(dl); free(topk); free(idx); free(perm);
}

/* ---------------------------------------------------------------- optimizer and reductions */
static void test_adamw(void) {
    size_t n = SIZE(10000, 30000000);
    /* three tensors and a padding gap: [0, a) decay, [a, b) no decay, [b, c) gap, [c, n) decay */
    size_t a = n * 3 / 10, b = a + 100, c = b + 100;
    ParamInfo info[3];
    memset(info, 0, sizeof info);
    info[0].offset = 0, info[0].numel = a, info[0].decay = 1;
    info[1].offset = a, info[1].numel = b - a, info[1].decay = 0;
    info[2].offset = c, info[2].numel = n - c, info[2].decay = 1;
    ParamTable table;
    memset(&table, 0, sizeof table);
    table.count = 3;
    table.info = info;
    table.total = n;
    CudaAdamWSegment segs[3] = {{0, a, 1}, {a, b, 0}, {c, n, 1}};
    AdamWConfig cfg = {0.9, 0.95, 1e-8, 0.1};
    float *p = rnd(n, 1, 1), *g = rnd(n, 2, 0.1f);
    for (size_t i = b; i < c; i++) p[i] = 0, g[i] = 0.5f; /* padding: must stay as it is */
    AdamW opt;
    opt.lo = 0, opt.hi = n, opt.step = 0;
    opt.m = calloc(n, 4), opt.v = calloc(n, 4);
    float *pc = copy_of(p, n), *gc = copy_of(g, n);
    float *d_p = up(p, n, 0), *d_g = up(g, n, 0), *d_m = cuda_alloc(n * 4), *d_v = cuda_alloc(n * 4);
    CudaAdamWSegment *d_segs = up_bytes(segs, sizeof segs);
    void *d_copy = cuda_alloc(n * 2);
    for (int step = 1; step <= 3; step++) {
        float coef = step == 2 ? 0.5f : 1.0f; /* a clipped step: g is read times coef */
        for (size_t i = 0; i < n; i++) gc[i] = g[i] * coef;
        adamw_step_slice(&opt, &cfg, 1e-3 * step, pc, gc, &table);
        cuda_adamw(d_p, d_g, d_m, d_v, n, d_segs, 3, coef, 1e-3 * step, 0.9, 0.95, 1e-8, 0.1, step, d_copy);
    }
    float *gp = down(d_p, n, 0), *gm = down(d_m, n, 0), *gv = down(d_v, n, 0), *gcopy = down(d_copy, n, CUDA_BF16);
    CHECK_REL(gp, pc, n, 1e-6, "adamw params (3 steps, one clipped)", 0);
    CHECK_REL(gm, opt.m, n, 1e-6, "adamw m", 0);
    CHECK_REL(gv, opt.v, n, 1e-6, "adamw v", 0);
    int pad_ok = 1, copy_ok = 1;
    for (size_t i = b; i < c; i++) pad_ok &= gp[i] == 0;
    for (size_t i = 0; i < n; i++)
        if (i < b || i >= c) copy_ok &= gcopy[i] == bf16_to_f32(f32_to_bf16(gp[i]));
    CHECK(pad_ok, "adamw changed padding between tensors");
    CHECK(copy_ok, "adamw's bf16 copy is the rounded parameters");
    cuda_free(d_p); cuda_free(d_g); cuda_free(d_m); cuda_free(d_v); cuda_free(d_segs); cuda_free(d_copy);
    free(p); free(g); free(pc); free(gc); free(opt.m); free(opt.v); free(gp); free(gm); free(gv); free(gcopy);
}

static void test_sum_squares(void) {
    size_t sizes[3] = {1, 16385, SIZE(100003, 124000000)};
    for (int i = 0; i < 3; i++) {
        size_t n = sizes[i];
        float *x = rnd(n, 5 + i, 2);
        double ref = cpu_sum_squares(x, n);
        float *d = up(x, n, 0);
        double got = cuda_sum_squares(d, n), again = cuda_sum_squares(d, n);
        CHECK_CLOSE(got, ref, 1e-12, 0, "sum_squares");
        CHECK(got == again, "sum_squares differs between runs");
        double *acc = cuda_alloc(8), h = 0;
        double one = 1.5;
        cuda_copy_to_device(acc, &one, 8);
        cuda_sum_squares_accumulate(acc, d, n, 2.0);
        cuda_copy_to_host(&h, acc, 8);
        CHECK_CLOSE(h, 1.5 + 2.0 * ref, 1e-12, 0, "sum_squares_accumulate");
        cuda_free(d); cuda_free(acc);
        free(x);
    }
}


/* ---------------------------------------------------------------- ops new at the boundary */
static void test_boundary_ops(void) {
    int N = SIZE(37, 4096);
    double *mx = malloc(N * 8), *sm = malloc(N * 8), *tl = malloc(N * 8);
    unsigned seed = 3;
    for (int n = 0; n < N; n++) mx[n] = 5 * frand(&seed), sm[n] = 1 + 100 * (frand(&seed) + 0.5), tl[n] = mx[n] - 3 * (frand(&seed) + 0.5);
    float *losses = malloc(N * 4);
    double mean = cpu_vocab_shard_losses(losses, mx, sm, tl, N);
    double *d_mx = up_bytes(mx, N * 8), *d_sm = up_bytes(sm, N * 8), *d_tl = up_bytes(tl, N * 8);
    float *d_l = cuda_alloc(N * 4);
    poison(d_l, N * 4);
    double gmean = cuda_vocab_shard_losses(d_l, d_mx, d_sm, d_tl, N);
    float *gl = down(d_l, N, 0);
    CHECK_REL(gl, losses, N, 1e-6, "vocab_shard_losses", 0);
    CHECK_CLOSE(gmean, mean, 1e-12, 0, "vocab_shard_losses mean");
    /* d gate per assignment into its slot */
    int A = SIZE(50, 8192), slots = A + 7;
    float *src = rnd(A, 4, 1), *dst = rnd(slots, 5, 1);
    int32_t *slot = malloc(A * 4);
    for (int a = 0; a < A; a++) slot[a] = (int32_t)(((unsigned)a * 2654435761u) % (unsigned)slots);
    for (int a = 0; a < A; a++) /* a permutation's prefix: distinct slots */
        for (int b = 0; b < a; b++)
            if (slot[b] == slot[a]) { slot[a] = (slot[a] + 1) % slots; b = -1; }
    float *ref = copy_of(dst, slots);
    cpu_moe_scatter_scalars(ref, src, slot, A);
    float *d_dst = up(dst, slots, 0), *d_src = up(src, A, 0);
    int32_t *d_slot = up_bytes(slot, A * 4);
    cuda_moe_scatter_scalars(d_dst, d_src, d_slot, A);
    float *g = down(d_dst, slots, 0);
    CHECK(!memcmp(g, ref, slots * 4), "moe_scatter_scalars");
    /* one AdamW range with the host's scalars, with and without decay */
    size_t n = SIZE(5000, 1 << 24);
    for (int decay = 0; decay < 2; decay++) {
        AdamWScalars sc = {0.9999f, 0.9f, 0.95f, 0.1f, 0.05f, 0.3f, 1e-8f, -0.002f, decay};
        CudaAdamWStep cs = {sc.decay, sc.beta1, sc.beta2, sc.one_minus_beta1, sc.one_minus_beta2, sc.bc2_sqrt, sc.eps,
                            sc.neg_step, sc.apply_decay};
        float *p = rnd(n, 6, 1), *gr = rnd(n, 7, 1), *m = rnd(n, 8, 0.1f), *v = rnd(n, 9, 0.01f);
        for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
        float *d_p = up(p, n, 0), *d_g = up(gr, n, 0), *d_m = up(m, n, 0), *d_v = up(v, n, 0);
        cpu_adamw_update(p, gr, m, v, n, &sc);
        cuda_adamw_update(d_p, d_g, d_m, d_v, n, cs);
        float *gp = down(d_p, n, 0), *gm = down(d_m, n, 0), *gv = down(d_v, n, 0);
        CHECK_REL(gp, p, n, 1e-6, decay ? "adamw_update p (decay)" : "adamw_update p", 0);
        CHECK_REL(gm, m, n, 1e-6, "adamw_update m", 0);
        CHECK_REL(gv, v, n, 1e-6, "adamw_update v", 0);
        cuda_free(d_p); cuda_free(d_g); cuda_free(d_m); cuda_free(d_v);
        free(p); free(gr); free(m); free(v); free(gp); free(gm); free(gv);
    }
    cuda_free(d_mx); cuda_free(d_sm); cuda_free(d_tl); cuda_free(d_l); cuda_free(d_dst); cuda_free(d_src); cuda_free(d_slot);
    free(mx); free(sm); free(tl); free(losses); free(gl); free(src); free(dst); free(slot); free(ref); free(g);
}

/* ---------------------------------------------------------------- the table, against the CPU's
 * The CUDA backend's table (what kernels.h dispatches to) against the CPU table of the same dtype
 * (cpu_bf16.c emulates exactly these rounding points): the storage types at the boundary. */
typedef struct {
    void *h, *d; /* host act (fp32 or bf16 bits) and its device copy */
    size_t n;
    int dt;
} Act;
static Act act_new(const float *x, size_t n, int dt) {
    Act a = {malloc(n * cuda_dtype_size(dt) + 4), NULL, n, dt};
    for (size_t i = 0; i < n; i++) {
        if (dt == CUDA_BF16) ((uint16_t *)a.h)[i] = f32_to_bf16(x[i]);
        else ((float *)a.h)[i] = x[i];
    }
    a.d = up_bytes(a.h, n * cuda_dtype_size(dt));
    return a;
}
static float *act_host(const Act *a) {
    float *y = malloc(a->n * 4 + 4);
    for (size_t i = 0; i < a->n; i++) y[i] = a->dt == CUDA_BF16 ? bf16_to_f32(((uint16_t *)a->h)[i]) : ((float *)a->h)[i];
    return y;
}
static float *act_dev(const Act *a) { return down(a->d, a->n, a->dt); }
static void act_free(Act *a) { free(a->h); cuda_free(a->d); }
#define CHECK_ACT(a, tol, what)                                      \
    do {                                                             \
        float *g_ = act_dev(&(a)), *c_ = act_host(&(a));             \
        CHECK_REL(g_, c_, (a).n, (a).dt == CUDA_BF16 ? (tol) : 1e-5, what, (a).dt); \
        free(g_); free(c_);                                          \
    } while (0)

/* the comm layer's bf16 reduction (CUDA-aware MPI) bit for bit against the CPU's, and the
 * communication stream: work on it ordered after the compute stream's and back by events */
static void test_comm_kernels(void) {
    size_t n = SIZE(1001, 1 << 20);
    int nsrc = 3;
    float *x = rnd(n * nsrc, 7, 4);
    void *d_src = up(x, n * nsrc, CUDA_BF16), *d_out = cuda_alloc(n * 2 + 16);
    uint16_t *src = malloc(n * nsrc * 2), *ref = malloc(n * 2), *got = malloc(n * 2);
    for (size_t i = 0; i < n * nsrc; i++) src[i] = f32_to_bf16(x[i]);
    for (int op = 0; op < 3; op++) {
        cpu_reduce_bf16(ref, src, nsrc, n, op, nsrc);
        poison(d_out, n * 2);
        cuda_reduce_bf16(d_out, d_src, nsrc, n, op, nsrc);
        cuda_copy_to_host(got, d_out, n * 2);
        CHECK(!memcmp(got, ref, n * 2), "reduce_bf16 op %d: not the CPU's bits", op);
    }
    /* compute -> comm -> compute by events: the calls are accepted and the events complete */
    float *h = rnd(n, 8, 1), *want = copy_of(h, n);
    for (size_t i = 0; i < n; i++) want[i] *= 2;
    float *d_a = up(h, n, CUDA_F32), *d_b = cuda_alloc(n * 4);
    void *e1 = cuda_event_create(), *e2 = cuda_event_create();
    CHECK(cuda_stream_handle(1) != NULL && cuda_stream_handle(1) != cuda_stream_handle(0), "a stream of its own");
    cuda_scale_inplace(d_a, 2, n);
    cuda_event_record(e1, 0);
    cuda_stream_wait_event(1, e1);
    cuda_event_record(e2, 1);
    cuda_stream_wait_event(0, e2);
    float *back = down(d_a, n, CUDA_F32);
    CHECK(!memcmp(back, want, n * 4), "the compute stream's work is lost");
    cuda_event_sync(e2);
    CHECK(cuda_event_query(e1) == 1 && cuda_event_query(e2) == 1, "synchronized events are done");
    cuda_event_destroy(e1), cuda_event_destroy(e2);
    cuda_free(d_src), cuda_free(d_out), cuda_free(d_a), cuda_free(d_b);
    free(x), free(src), free(ref), free(got), free(h), free(want), free(back);
}

static void test_backend_table(void) {
    for (int dt = 0; dt < 2; dt++) {
        KernelOptions o = {"cuda", dt == CUDA_BF16 ? DTYPE_BF16 : DTYPE_F32, 0, 0};
        char why[256];
        const KernelBackend *g = cuda_backend(&o, why, sizeof why);
        const KernelBackend *c = dt == CUDA_BF16 ? cpu_bf16_backend() : &cpu_f32_table;
        CHECK(g != NULL, "cuda_backend: %s", why);
        if (!g) return;
        CHECK(g->act_size == c->act_size && g->dtype == c->dtype && !g->host_accessible, "table facts");
        DeviceInfo info;
        CHECK(g->device_info(&info) == 0 && info.total_bytes > 0 && info.count >= 1, "device_info");
        int B = 2, T = SIZE(40, 512), H = 4, KV = 2, hd = SIZE(64, 64), C = H * hd, Nr = B * T, V = SIZE(300, 8000);
        int stride = (H + 2 * KV) * hd;
        float *x = rnd((size_t)Nr * C, 1, 2), *w = rnd((size_t)(size_t)stride * C, 2, 0.1f), *bias = rnd(stride, 3, 1);
        float *lw = rnd(C, 4, 1), *lb = rnd(C, 5, 1);
        float *d_x = up(x, (size_t)Nr * C, 0), *d_bias = up(bias, stride, 0), *d_lw = up(lw, C, 0), *d_lb = up(lb, C, 0);
        /* layernorm -> act; linear to act and to fp32 */
        Act ln = act_new(x, (size_t)Nr * C, dt), wa = act_new(w, (size_t)(size_t)stride * C, dt), qkv;
        float *mean = malloc(Nr * 4), *rstd = malloc(Nr * 4), *d_mean = cuda_alloc(Nr * 4), *d_rstd = cuda_alloc(Nr * 4);
        c->layernorm_forward(ln.h, mean, rstd, x, lw, lb, Nr, C, 1e-5f);
        g->layernorm_forward(ln.d, d_mean, d_rstd, d_x, d_lw, d_lb, Nr, C, 1e-5f);
        CHECK_ACT(ln, 4e-3, "table layernorm_forward");
        float *q0 = rnd((size_t)Nr * stride, 6, 1);
        qkv = act_new(q0, (size_t)Nr * stride, dt);
        c->matmul_forward(qkv.h, 0, ln.h, wa.h, bias, Nr, C, stride);
        g->matmul_forward(qkv.d, 0, ln.d, wa.d, d_bias, Nr, C, stride);
        CHECK_ACT(qkv, 8e-3, "table matmul_forward (act out)");
        float *o32 = malloc((size_t)Nr * stride * 4), *d_o32 = cuda_alloc((size_t)Nr * stride * 4);
        c->matmul_forward(o32, 1, ln.h, wa.h, bias, Nr, C, stride);
        g->matmul_forward(d_o32, 1, ln.d, wa.d, d_bias, Nr, C, stride);
        float *go32 = down(d_o32, (size_t)Nr * stride, 0);
        CHECK_REL(go32, o32, (size_t)Nr * stride, dt ? 1e-4 : 1e-5, "table matmul_forward (fp32 out)", dt);
        /* attention through the tables (each saves its own kind of statistics) */
        float *ydummy = rnd((size_t)Nr * C, 7, 1);
        Act y = act_new(ydummy, (size_t)Nr * C, dt), dy = act_new(x, (size_t)Nr * C, dt);
        Act dq = act_new(q0, (size_t)Nr * stride, dt);
        float *sv_c = malloc(c->attention_saved_count(B, T, H) * 4), *sv_g = cuda_alloc(g->attention_saved_count(B, T, H) * 4);
        CHECK(g->attention_saved_count(B, T, H) == (size_t)B * H * T, "the CUDA backend saves B*H*T values");
        c->attention_forward(y.h, sv_c, qkv.h, B, T, H, KV, hd);
        g->attention_forward(y.d, sv_g, qkv.d, B, T, H, KV, hd);
        CHECK_ACT(y, 1e-2, "table attention_forward");
        c->attention_backward(dq.h, dy.h, qkv.h, y.h, sv_c, B, T, H, KV, hd);
        g->attention_backward(dq.d, dy.d, qkv.d, y.d, sv_g, B, T, H, KV, hd);
        CHECK_ACT(dq, 2e-2, "table attention_backward");
        /* cross-entropy over act logits */
        float *z = rnd((size_t)Nr * V, 8, 10);
        Act logits = act_new(z, (size_t)Nr * V, dt);
        int32_t *tg = malloc(Nr * 4);
        for (int i = 0; i < Nr; i++) tg[i] = (i * 31) % V;
        int32_t *d_tg = up_bytes(tg, Nr * 4);
        float *ls = malloc(Nr * 4), *d_ls = cuda_alloc(Nr * 4);
        double mc = c->cross_entropy_forward_backward(logits.h, ls, tg, Nr, V, V, 1, 1.0);
        double mg = g->cross_entropy_forward_backward(logits.d, d_ls, d_tg, Nr, V, V, 1, 1.0);
        CHECK_CLOSE(mg, mc, 1e-5, 0, "table cross_entropy mean");
        CHECK_ACT(logits, 4e-3, "table cross_entropy dlogits");
        /* a checkpoint snapshot is ordered after the work queued before it, and complete at the wait */
        if (dt == CUDA_F32) {
            size_t nb = (size_t)Nr * stride * 4;
            float *snap = g->host_alloc_pinned(nb);
            memset(snap, 0, nb);
            g->memset_zero(d_o32, nb); /* a snapshot taken before the matmul would read zeros */
            g->matmul_forward(d_o32, 1, ln.d, wa.d, d_bias, Nr, C, stride); /* rewrites what go32 holds */
            g->snapshot_async(snap, d_o32, nb);
            g->snapshot_wait();
            CHECK(!memcmp(snap, go32, nb), "snapshot_async after queued kernels, complete at snapshot_wait");
            g->host_free_pinned(snap);
        }
        /* conversions */
        float *back = cuda_alloc((size_t)Nr * C * 4);
        g->act_to_f32(back, ln.d, (size_t)Nr * C);
        float *gb = down(back, (size_t)Nr * C, 0), *hb = act_host(&ln);
        CHECK(!memcmp(gb, hb, (size_t)Nr * C * 4) || dt == CUDA_F32, "act_to_f32 is exact");
        cuda_free(d_x); cuda_free(d_bias); cuda_free(d_lw); cuda_free(d_lb); cuda_free(d_mean); cuda_free(d_rstd);
        cuda_free(d_o32); cuda_free(sv_g); cuda_free(d_tg); cuda_free(d_ls); cuda_free(back);
        act_free(&ln); act_free(&wa); act_free(&qkv); act_free(&y); act_free(&dy); act_free(&dq); act_free(&logits);
        free(x); free(w); free(bias); free(lw); free(lb); free(mean); free(rstd); free(q0); free(o32); free(go32);
        free(ydummy); free(sv_c); free(z); free(tg); free(ls); free(gb); free(hb);
    }
}

#ifdef MYRIAD_CUDA_EMU
#include "cuda_emu_cases.h"
#endif

#ifndef MYRIAD_CUDA_EMU
static void test_peak_flops(void) {
    double f16 = cuda_measure_peak_flops(4096, 3, CUDA_BF16), f32 = cuda_measure_peak_flops(2048, 2, CUDA_F32);
    printf("  measured GEMM rate: bf16 %.0f TFLOP/s (8192^3 would be higher), fp32 %.1f TFLOP/s\n", f16 / 1e12, f32 / 1e12);
    CHECK(f16 > 0 && f32 > 0, "rates are positive");
}
#endif

int main(int argc, char **argv) {
    char err[512];
#ifdef MYRIAD_CUDA_EMU
    big = 0;
#else
    big = getenv("MYRIAD_TEST_SMALL") == NULL; /* small: the shapes of the emulation (compute-sanitizer runs) */
#endif
    int have = cuda_device_count() > 0 && cuda_init(0, err, sizeof err) == 0;
    const char *why = "no CUDA device";
    if (!have && cuda_device_count() > 0) {
        printf("cuda_init failed: %s\n", err);
        why = "CUDA did not start";
    }
    if (have) {
        CudaDeviceInfo info;
        cuda_device_info(0, &info, err, sizeof err);
        printf("device: %s, %d SMs, compute capability %d.%d\n", info.name, info.sm_count, info.cc_major, info.cc_minor);
    }
    /* an argument runs only the cases whose name contains it (one case per process, so a device
     * fault in one kernel cannot hide the others' results: scripts/gpu_check.sh) */
    const char *only = argc > 1 ? argv[1] : NULL;
#define CASE(fn)                                                \
    do {                                                        \
        if (only && !strstr(#fn, only)) break;                  \
        if (have) RUN(fn);                                      \
        else SKIP(fn, why);                                     \
    } while (0)
    kernels_set_threads(2);
    CASE(test_memory);
    CASE(test_convert);
    CASE(test_gemm);
    CASE(test_matmul);
    CASE(test_matmul_gelu);
    CASE(test_layernorm);
    CASE(test_rmsnorm);
    CASE(test_gelu_swiglu);
    CASE(test_residual_scale);
    CASE(test_embedding);
    CASE(test_embedding_shard_position);
    CASE(test_cross_entropy);
    CASE(test_vocab_parallel);
    CASE(test_rope);
    CASE(test_attention_simple);
    CASE(test_attention_tc);
    CASE(test_moe);
    CASE(test_adamw);
    CASE(test_sum_squares);
    CASE(test_boundary_ops);
    CASE(test_comm_kernels);
    CASE(test_backend_table);
#ifdef MYRIAD_CUDA_EMU
    /* the emulator's own checks, each against a planted bug (tests/cuda_emu_cases.h); not CASE(),
     * which scripts/gpu_check.sh lists for the device */
#define EMULATOR_CHECK(fn)                     \
    do {                                       \
        if (only && !strstr(#fn, only)) break; \
        if (have) RUN(fn);                     \
        else SKIP(fn, why);                    \
    } while (0)
    EMULATOR_CHECK(test_emu_catches_cp_async_wait);
    EMULATOR_CHECK(test_emu_catches_misaligned_cp_async_ldmatrix);
    EMULATOR_CHECK(test_emu_catches_misaligned_vector_access);
    EMULATOR_CHECK(test_emu_catches_big_dynamic_smem);
    EMULATOR_CHECK(test_emu_catches_stale_static_smem);
    EMULATOR_CHECK(test_emu_catches_block_order);
    EMULATOR_CHECK(test_emu_catches_unsynchronized_copy);
    if (!only) SKIP(test_peak_flops, "timing has no meaning in the emulation");
#else
    CASE(test_peak_flops);
#endif
    if (have) cuda_shutdown();
    return TEST_SUMMARY();
}

#else /* built without the CUDA backend */
int main(void) {
    const char *names[] = {"test_memory", "test_convert", "test_gemm", "test_matmul", "test_matmul_gelu",
                           "test_layernorm", "test_rmsnorm", "test_gelu_swiglu", "test_residual_scale",
                           "test_embedding", "test_embedding_shard_position", "test_cross_entropy",
                           "test_vocab_parallel", "test_rope", "test_attention_simple", "test_attention_tc",
                           "test_moe", "test_adamw", "test_sum_squares", "test_boundary_ops",
                           "test_backend_table", "test_peak_flops"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) printf("skip %s (built without CUDA)\n", names[i]);
    return 0;
}
#endif
