/* bench_sgemm.c: `myriad bench sgemm`: this machine's fp32 matrix-multiply rate, the
 * denominator of the training step's "fraction of sgemm peak". Times myriad's gemm kernel
 * (src/kernels/cpu/cpu_gemm.c) and the BLAS library's cblas_sgemm, as configured by the
 * environment (e.g. OPENBLAS_CORETYPE), at the shapes of a GPT-2 training step (forward,
 * input-gradient and weight-gradient products of every linear layer) and at square sizes.
 * Each row is the best of --reps timed runs after one warm-up run, so a briefly busy core
 * lowers a row only if it is busy for every run. The line "peak X GFLOP/s" is the best rate of
 * any row and either library: the most this machine was seen to do; it is kept in the per-machine
 * cache (kernels/cpu/cpu_peak.h) as the MFU denominator of `myriad train` at that thread count,
 * unless the cache holds a higher figure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_peak.h"
#include "kernels/kernels.h"
#include "util/opts.h"
#include "util/error.h"


void openblas_set_num_threads(int num_threads); /* from OpenBLAS */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct {
    const char *what;
    int ta, tb, M, N, K;
} Shape;

/* Best-of-reps seconds for one product; which = 0: myriad's gemm, 1: cblas_sgemm. */
static double time_gemm(const Shape *s, int which, int reps, int threads, real *a, real *b, real *c) {
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = now_s();
        if (which == 0) gemm(s->ta, s->tb, s->M, s->N, s->K, a, lda, b, ldb, 0, c, s->N);
        else {
            openblas_set_num_threads(threads); /* BLAS with its own threads, as any other program uses it */
            cblas_gemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M,
                       s->N, s->K, 1, a, lda, b, ldb, 0, c, s->N);
            openblas_set_num_threads(1);
        }
        double dt = now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return best;
}

int bench_sgemm(int argc, char **argv) {
    int threads = 2, reps = 3, N = 1024, C = 768, V = 8192, blas = 1, square_only = 0;
    const Opt rows[] = {
        OPT_INT("--threads", "N", &threads, 1, 1024, "compute threads (default 2)"),
        OPT_INT("--reps", "R", &reps, 1, 1000, "runs of each shape; the best counts (default 3)"),
        OPT_INT("--tokens", "N", &N, 1, 1 << 20, "rows of the training-step shapes (default 1024)"),
        OPT_INT("--hidden", "C", &C, 1, 1 << 16, "model width of the training-step shapes (default 768)"),
        OPT_INT("--vocab-cols", "V", &V, 1, 1 << 20, "vocabulary columns of the lm_head shapes (default 8192)"),
        OPT_SWITCH_TO("--no-blas", &blas, 0, "time myriad's kernel only"),
        OPT_SWITCH("--square-only", &square_only, "only the square sizes"),
        OPT_END};
    OptCommand cmd = {.name = "bench sgemm",
                      .usage = "usage: myriad bench sgemm [options]\n"
                               "  fp32 GEMM rate (GFLOP/s) of myriad's kernel and of BLAS at the shapes of a GPT-2 step\n"
                               "  and at square sizes; last line: peak = best of all.",
                      .rows = rows};
    opts_parse(&cmd, argc, argv);
    kernels_set_threads(threads);
    int F = 4 * C;
    Shape shapes[] = {
        {"qkv fwd", 0, 1, N, 3 * C, C},    {"qkv dinp", 0, 0, N, C, 3 * C},  {"qkv dw", 1, 0, 3 * C, C, N},
        {"proj fwd", 0, 1, N, C, C},       {"proj dw", 1, 0, C, C, N},       {"fc fwd", 0, 1, N, F, C},
        {"fc dinp", 0, 0, N, C, F},        {"fc dw", 1, 0, F, C, N},         {"mlp_out fwd", 0, 1, N, C, F},
        {"mlp_out dw", 1, 0, C, F, N},     {"lm_head fwd", 0, 1, N, V, C},   {"lm_head dinp", 0, 0, N, C, V},
        {"lm_head dw", 1, 0, V, C, N},     {"square", 0, 0, 512, 512, 512},  {"square", 0, 0, 1024, 1024, 1024},
        {"square", 0, 0, 2048, 2048, 2048},
    };
    int count = sizeof shapes / sizeof shapes[0], first = square_only ? count - 3 : 0;
    size_t most = 0;
    for (int i = first; i < count; i++) {
        Shape *s = &shapes[i];
        size_t ma = (size_t)s->M * s->K, mb = (size_t)s->K * s->N, mc = (size_t)s->M * s->N;
        if (ma > most) most = ma;
        if (mb > most) most = mb;
        if (mc > most) most = mc;
    }
    real *a = dev_alloc(most), *b = dev_alloc(most), *c = dev_alloc(most);
    for (size_t i = 0; i < most; i++) {
        a[i] = (real)((i % 7) * 0.01 - 0.03);
        b[i] = (real)((i % 5) * 0.02 - 0.04);
    }
    printf("fp32 GEMM, %d threads, best of %d; BLAS core: %s; myriad gemm: %s\n", threads, reps,
           openblas_get_corename(), gemm_is_native() ? "own AVX-512 kernel" : "BLAS");
    printf("%-13s %6s %6s %6s  %10s %10s\n", "shape", "M", "N", "K", "myriad", "BLAS");
    double peak = 0;
    for (int i = first; i < count; i++) {
        Shape *s = &shapes[i];
        double flop = 2.0 * s->M * s->N * (double)s->K;
        double ours = flop / time_gemm(s, 0, reps, threads, a, b, c) / 1e9;
        double theirs = blas ? flop / time_gemm(s, 1, reps, threads, a, b, c) / 1e9 : 0;
        if (ours > peak) peak = ours;
        if (theirs > peak) peak = theirs;
        char blas_col[32] = "-";
        if (blas) snprintf(blas_col, sizeof blas_col, "%.1f", theirs);
        printf("%-13s %6d %6d %6d  %10.1f %10s\n", s->what, s->M, s->N, s->K, ours, blas_col);
        fflush(stdout);
    }
    printf("peak %.1f GFLOP/s\n", peak);
    /* the best figure seen is the MFU denominator of `myriad train` at this thread count (cpu_peak.h) */
    char key[512], path[4096], held[256];
    double cached = 0;
    cpu_peak_key(threads, key, sizeof key);
    cpu_peak_cache_path(path, sizeof path);
    int put = cpu_peak_cache_put(key, peak * 1e9, "bench sgemm");
    if (put < 0) printf("not cached as the MFU denominator: %s\n", myr_last_error());
    else if (put == 1) printf("cached in %s as the MFU denominator of myriad train at %d threads\n", path, threads);
    else if (!cpu_peak_cache_get(key, &cached, held, sizeof held))
        printf("the MFU denominator of myriad train at %d threads stays %.1f GFLOP/s (%s; %s)\n", threads, cached / 1e9,
               held, path);
    dev_free(a);
    dev_free(b);
    dev_free(c);
    return 0;
}
