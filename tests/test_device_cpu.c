/* test_device_cpu.c: the backend boundary on the CPU (docs/GPU.md): backend selection and its
 * errors; the device guard (host code touching device memory faults, the copy functions work);
 * the accounting of device bytes; the reuse of freed blocks; and the bf16 emulation's rounding points: every op of the bf16
 * table stores bf16 and equals the fp32 reference kernel on the widened operands, rounded to
 * nearest even once per stored output (fp32 outputs not rounded at all). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "test.h"
#include "util/bf16.h"
#include "util/error.h"

static void test_select_errors(void) {
    KernelOptions o = {"tpu", -1, 0, 0};
    CHECK(kernels_select(&o) == -1 && strstr(myr_last_error(), "unknown --device 'tpu'"), "%s", myr_last_error());
    char why[512];
    if (!kernels_cuda_usable(why, sizeof why)) {
        KernelOptions c = {"cuda", -1, 0, 0};
        CHECK(kernels_select(&c) == -1 && strstr(myr_last_error(), "--device cuda: "), "%s", myr_last_error());
        CHECK(strstr(myr_last_error(), why) != NULL, "the reason: %s", myr_last_error());
    }
    CHECK(!strcmp(kernels_device(), "cpu") && kernels_dtype() == DTYPE_F32, "a failed select keeps the CPU fp32 table");
}

/* In a child: select the guarded CPU backend (mode "1" or "strict"), then touch device memory
 * directly (touch = 1: must die of SIGSEGV; touch = 2: the same while another thread runs kernels
 * on device memory, which opens it under "1" but not under "strict") or only through the copies
 * (touch = 0: must exit 0 with the value back). */
static void *busy_kernels(void *p) {
    for (;;) scale_inplace(p, 1, 1 << 16);
    return NULL;
}

static int guarded_child(const char *mode, int touch) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MYRIAD_DEVICE_GUARD", mode, 1);
        KernelOptions o = {"cpu", DTYPE_F32, 0, 0};
        if (kernels_select(&o) || dev_host_accessible()) _exit(3);
        real *p = dev_alloc(1000), x = 7, y = 0;
        if (touch == 2) {
            pthread_t t;
            pthread_create(&t, NULL, busy_kernels, dev_alloc(1 << 16));
            for (int i = 0; i < 100000; i++) ((volatile real *)p)[i % 1000] = x; /* under "1": often open */
            _exit(5);
        }
        if (touch) p[10] = x; /* a host write to device memory */
        host_to_dev(p + 10, &x, sizeof x);
        scale_inplace(p, 3, 1000); /* a kernel opens the memory while it runs */
        dev_to_host(&y, p + 10, sizeof y);
        _exit(y == 21 ? 0 : 4);
    }
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void test_guard_faults_on_host_access(void) {
    const char *modes[] = {"1", "strict"};
    for (int m = 0; m < 2; m++) {
        int st = guarded_child(modes[m], 1);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "a direct host write under the guard %s: status %d", modes[m],
              st);
        st = guarded_child(modes[m], 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "copies and kernels under the guard %s: status %d", modes[m], st);
    }
    /* strict: a host write faults at once even while another thread's kernels use device memory */
    int st = guarded_child("strict", 2);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "strict guard with kernels running elsewhere: status %d", st);
}

static void test_memory_accounting(void) {
    size_t now0, peak0, now1, peak1, now2, peak2;
    kernels_memory_usage(&now0, &peak0);
    real *a = dev_alloc(1000);
    void *b = dev_alloc_bytes(3000);
    kernels_memory_usage(&now1, &peak1);
    CHECK(now1 == now0 + 1000 * sizeof(real) + 3000, "in use %zu -> %zu", now0, now1);
    dev_free(a);
    kernels_memory_usage(&now2, &peak2);
    CHECK(now2 == now0 + 3000 && peak2 >= now1, "after a free: in use %zu, peak %zu", now2, peak2);
    dev_free(b);
}

/* A freed block serves the next request of at most its size and at least four fifths of it,
 * zeroed like a new one; smaller or larger requests get blocks of their own (dispatch.c). */
static void test_freed_block_reuse(void) {
    size_t n = 1 << 20, now0, now1;
    unsigned char *p = dev_alloc_bytes(n);
    memset(p, 0xAB, n);
    dev_free(p);
    kernels_memory_usage(&now0, NULL);
    unsigned char *q = dev_alloc_bytes(n - n / 8);
    kernels_memory_usage(&now1, NULL);
    CHECK(q == p, "a request an eighth smaller did not reuse the freed block");
    CHECK(now1 == now0 + n, "a reused block counts its capacity: %zu -> %zu", now0, now1);
    size_t nonzero = 0;
    for (size_t i = 0; i < n - n / 8; i++) nonzero += q[i] != 0;
    CHECK(nonzero == 0, "%zu bytes of the reused block not zeroed", nonzero);
    dev_free(q);
    unsigned char *half = dev_alloc_bytes(n / 2), *more = dev_alloc_bytes(n + 64);
    CHECK(half != p && more != p, "a block served a request it wastes more than a fifth of, or too large for it");
    unsigned char *again = dev_alloc_bytes(n);
    CHECK(again == p, "the exact size did not reuse the block");
    dev_free(half);
    dev_free(more);
    dev_free(again);
}

/* deterministic pseudo-random values in [-1, 1) */
static real rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (real)((*s >> 8) / 8388608.0 - 1.0);
}

/* n bf16 values (device) and their exact fp32 widening (host) */
static act *bf16_input(unsigned *seed, size_t n, real **wide) {
    real *f = malloc(n * sizeof(real));
    for (size_t i = 0; i < n; i++) f[i] = bf16_to_f32(f32_to_bf16(rnd(seed)));
    act *d = dev_alloc_act(n);
    act_from_f32(d, f, n); /* exact: already bf16 values */
    *wide = f;
    return d;
}

/* the bf16 output equals the fp32 reference rounded once */
static int same_rounded(const act *got, const real *ref, size_t n) {
    const uint16_t *g = (const uint16_t *)got;
    for (size_t i = 0; i < n; i++)
        if (g[i] != f32_to_bf16(ref[i])) return 0;
    return 1;
}

static void test_bf16_rounding_points(void) {
    CHECK(act_size() == 2 && kernels_dtype() == DTYPE_BF16, "bf16 selected: act_size %zu", act_size());
    unsigned seed = 12345;
    enum { N = 24, IC = 40, OC = 36 };
    real *x, *w, *dy;
    act *xd = bf16_input(&seed, N * IC, &x), *wd = bf16_input(&seed, OC * IC, &w), *dyd = bf16_input(&seed, N * OC, &dy);
    real bias[OC], ref[N * OC], ref_in[N * IC];
    for (int i = 0; i < OC; i++) bias[i] = rnd(&seed);
    /* linear: act output rounded once; fp32 output exact */
    act *y = dev_alloc_act(N * OC);
    real *y32 = dev_alloc(N * OC);
    matmul_forward(y, 0, xd, wd, bias, N, IC, OC);
    matmul_forward(y32, 1, xd, wd, bias, N, IC, OC);
    cpu_matmul_forward(ref, x, w, bias, N, IC, OC);
    CHECK(same_rounded(y, ref, N * OC), "matmul_forward: bf16 output is the fp32 result rounded once");
    CHECK(!memcmp(y32, ref, sizeof ref), "matmul_forward: fp32 output unrounded");
    /* backward: fp32 dW; dinp act (rounded) or fp32 */
    real *dw = dev_alloc(OC * IC), *dwr = calloc(OC * IC, sizeof(real)), *dx32 = dev_alloc(N * IC);
    act *dx = dev_alloc_act(N * IC);
    matmul_backward(dx, 0, dw, NULL, dyd, xd, wd, N, IC, OC, 0);
    cpu_matmul_backward(ref_in, dwr, NULL, dy, x, w, N, IC, OC, 0);
    CHECK(same_rounded(dx, ref_in, N * IC), "matmul_backward: bf16 input gradient rounded once");
    CHECK(!memcmp(dw, dwr, OC * IC * sizeof(real)), "matmul_backward: fp32 weight gradient unrounded");
    matmul_backward(dx32, 1, dw, NULL, dyd, xd, wd, N, IC, OC, 0);
    CHECK(!memcmp(dx32, ref_in, sizeof ref_in), "matmul_backward: fp32 input gradient unrounded");
    /* norms: fp32 statistics, output rounded once */
    real g[IC], b[IC], mean[N], rstd[N], mref[N], rref[N], nref[N * IC];
    for (int i = 0; i < IC; i++) g[i] = 1 + rnd(&seed) / 4, b[i] = rnd(&seed) / 4;
    act *ln = dev_alloc_act(N * IC);
    layernorm_forward(ln, mean, rstd, x, g, b, N, IC, 1e-5f);
    cpu_layernorm_forward(nref, mref, rref, x, g, b, N, IC, 1e-5f);
    CHECK(same_rounded(ln, nref, N * IC) && !memcmp(mean, mref, sizeof mean) && !memcmp(rstd, rref, sizeof rstd),
          "layernorm_forward");
    rmsnorm_forward(ln, rstd, x, g, N, IC, 1e-5f);
    cpu_rmsnorm_forward(nref, rref, x, g, N, IC, 1e-5f);
    CHECK(same_rounded(ln, nref, N * IC) && !memcmp(rstd, rref, sizeof rstd), "rmsnorm_forward");
    /* pointwise */
    gelu_forward(dx, xd, N * IC);
    cpu_gelu_forward(ref_in, x, N * IC);
    CHECK(same_rounded(dx, ref_in, N * IC), "gelu_forward");
    real *dyw;
    act *dyx = bf16_input(&seed, N * IC, &dyw);
    gelu_backward(dx, xd, dyx, N * IC);
    cpu_gelu_backward(ref_in, x, dyw, N * IC);
    CHECK(same_rounded(dx, ref_in, N * IC), "gelu_backward");
    swiglu_forward(dx, xd, N, IC / 2);
    cpu_swiglu_forward(ref_in, x, N, IC / 2);
    CHECK(same_rounded(dx, ref_in, N * IC / 2), "swiglu_forward");
    /* attention: output rounded once; saved probabilities fp32 */
    enum { B = 2, T = 12, H = 2, KV = 1, HD = 8, W = (H + 2 * KV) * HD };
    real *qkv, *att = dev_alloc(attention_saved_count(B, T, H)), *attr = malloc(attention_saved_count(B, T, H) * sizeof(real));
    act *qkvd = bf16_input(&seed, B * T * W, &qkv), *o = dev_alloc_act(B * T * H * HD);
    real oref[B * T * H * HD];
    attention_forward(o, att, qkvd, B, T, H, KV, HD);
    cpu_attention_forward(oref, attr, qkv, B, T, H, KV, HD);
    CHECK(same_rounded(o, oref, B * T * H * HD), "attention_forward output");
    CHECK(!memcmp(att, attr, attention_saved_count(B, T, H) * sizeof(real)), "attention_forward saved state");
    /* cross-entropy: fp32 loss, gradient rounded over the logits */
    int32_t tg[N];
    for (int i = 0; i < N; i++) tg[i] = (int32_t)(i * 7 % OC);
    real losses[N], lref[N];
    act *z = dev_alloc_act(N * OC);
    dev_to_dev(z, y, N * OC * act_size());
    real *zw = malloc(N * OC * sizeof(real));
    act_to_f32(zw, y, N * OC);
    double mean_loss = cross_entropy_forward_backward(z, losses, tg, N, OC, OC, 1, 1.0);
    double mref_loss = cpu_cross_entropy_forward_backward(zw, lref, tg, N, OC, OC, 1, 1.0);
    CHECK(mean_loss == mref_loss && !memcmp(losses, lref, sizeof losses), "cross-entropy loss in fp32");
    CHECK(same_rounded(z, zw, N * OC), "cross-entropy gradient rounded once");
    /* MoE row moves: copies stay exact, scaled gathers round once, the combine accumulates fp32 */
    int32_t idx[4] = {3, 0, 3, 7};
    real scale[4] = {0.5f, 1.25f, -2, 0.3f}, acc[N * IC] = {0}, accr[N * IC] = {0}, gref[4 * IC];
    act *rows = dev_alloc_act(4 * IC);
    moe_gather_rows(rows, xd, idx, scale, 4, IC);
    cpu_moe_gather_rows(gref, x, idx, scale, 4, IC);
    CHECK(same_rounded(rows, gref, 4 * IC), "moe_gather_rows (scaled)");
    moe_combine(acc, rows, idx, scale, 4, IC);
    real *rows_w = malloc(4 * IC * sizeof(real));
    act_to_f32(rows_w, rows, 4 * IC);
    cpu_moe_combine(accr, rows_w, idx, scale, 4, IC);
    CHECK(!memcmp(acc, accr, sizeof acc), "moe_combine into fp32");
    /* act_from_f32 rounds to nearest even; act_at steps 2 bytes */
    real ties[3] = {1.00390625f, 1.01171875f, -3.0e38f}; /* 1 + 2^-8 (tie, to even: 1), 1 + 3 * 2^-8 (tie, up) */
    act *t = dev_alloc_act(3);
    act_from_f32(t, ties, 3);
    const uint16_t *tb = (const uint16_t *)t;
    CHECK(tb[0] == 0x3f80 && tb[1] == 0x3f82, "ties to even: %04x %04x", tb[0], tb[1]);
    CHECK((char *)act_at(t, 2) - (char *)t == 4, "act_at: 2 bytes per element");
    free(x), free(w), free(dy), free(dwr), free(dyw), free(qkv), free(attr), free(zw), free(rows_w);
    void *bufs[] = {xd, wd, dyd, y, y32, dw, dx32, dx, ln, dyx, att, qkvd, o, z, rows, t};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(bufs[i]);
}

int main(void) {
    RUN(test_guard_faults_on_host_access); /* forks: before this process selects anything */
    RUN(test_select_errors);
    KernelOptions o = {"cpu", DTYPE_BF16, 0, 0};
    if (kernels_select(&o)) {
        fprintf(stderr, "%s\n", myr_last_error());
        return 1;
    }
    RUN(test_memory_accounting);
    RUN(test_freed_block_reuse);
    RUN(test_bf16_rounding_points);
    return TEST_SUMMARY();
}
