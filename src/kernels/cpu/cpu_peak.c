/* cpu_peak.c: this machine's achievable matmul rate, measured (the denominator of MFU on CPU,
 * where no datasheet peak applies). Best of a few square GEMMs, through the gemm kernel the model
 * uses, at the current thread count. A quick figure: `myriad bench sgemm` measures more shapes. */
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double kernels_measure_peak_flops(int n, int reps) {
    size_t bytes = (size_t)n * n * sizeof(real);
    real *a = cpu_alloc(bytes), *b = cpu_alloc(bytes), *c = cpu_alloc(bytes);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (real)((i % 7) * 0.01);
        b[i] = (real)((i % 5) * 0.02);
    }
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) { /* first run warms caches and threads */
        double t0 = now();
        gemm(0, 0, n, n, n, a, n, b, n, 0, c, n);
        double dt = now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    cpu_free(a);
    cpu_free(b);
    cpu_free(c);
    return 2.0 * n * n * (double)n / best;
}
