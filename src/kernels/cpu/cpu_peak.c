/* cpu_peak.c: this machine's achievable matmul rate, measured (the denominator of MFU on CPU,
 * where no datasheet peak applies), through the gemm kernel the model uses.
 *
 * Why not a few timed runs: three 1024^3 GEMMs at start-up measured anywhere from 23 to 117
 * GFLOP/s on one 2-core machine shared with other jobs (bench sgemm: 234), and a denominator
 * measured low made MFU read 139%. A busy core only ever slows a run down, so the measurement is
 * the best of many runs, repeated until the best stops improving; and each run is also timed by
 * the process's CPU clock (work per CPU-second, times the threads): time the OS gave to other
 * processes inflates the wall clock, not that one. cpu_peak_cache.c keeps the best ever seen. */
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_peak.h"

static double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cpu_peak_measure(int n, double budget_s, CpuPeakMeasure *out) {
    size_t bytes = (size_t)n * n * sizeof(real);
    real *a = cpu_alloc(bytes), *b = cpu_alloc(bytes), *c = cpu_alloc(bytes);
    if (!a || !b || !c) {
        cpu_free(a), cpu_free(b), cpu_free(c);
        return -1;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (real)((i % 7) * 0.01);
        b[i] = (real)((i % 5) * 0.02);
    }
    double flop = 2.0 * n * n * (double)n, threads = cpu_threads();
    double start = now(CLOCK_MONOTONIC), best = 0;
    int runs = 0, since_better = 0;
    gemm(0, 0, n, n, n, a, n, b, n, 0, c, n); /* warms caches, pages and the thread pool */
    /* at least 6 timed runs; then until 5 in a row improved the best by under 1%, or the budget */
    while (runs < 1000) {
        double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        gemm(0, 0, n, n, n, a, n, b, n, 0, c, n);
        double wall = now(CLOCK_MONOTONIC) - w0, cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        double by_wall = flop / wall, by_cpu = cpu > 0 ? flop * threads / cpu : 0;
        /* CPU time can read low (a thread's time not yet accounted): never more than the wall allows
         * with every thread busy, nor more than the threads' share of the wall clock says */
        double rate = by_cpu > by_wall * threads ? by_wall : by_cpu > by_wall ? by_cpu : by_wall;
        runs++;
        if (rate > best * 1.01) since_better = 0;
        else since_better++;
        if (rate > best) best = rate;
        if (runs >= 6 && since_better >= 5) break;
        if (now(CLOCK_MONOTONIC) - start > budget_s && runs >= 2) break;
    }
    cpu_free(a), cpu_free(b), cpu_free(c);
    out->flops = best;
    out->runs = runs;
    out->seconds = now(CLOCK_MONOTONIC) - start;
    out->threads = (int)threads;
    out->stable = since_better >= 5;
    return 0;
}
