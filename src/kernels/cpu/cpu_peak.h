/* cpu_peak.h: this machine's matmul rate, the denominator of MFU on the CPU (no datasheet peak
 * applies): measured until stable (cpu_peak.c) and the best ever seen kept per machine
 * (cpu_peak_cache.c), so that every run of a machine divides by the same figure. */
#ifndef MYRIAD_KERNELS_CPU_PEAK_H
#define MYRIAD_KERNELS_CPU_PEAK_H

#include <stddef.h>

typedef struct {
    double flops;   /* the best run's FLOP/s */
    int runs;       /* timed runs made */
    double seconds; /* the measurement's wall time */
    int threads;    /* compute threads it ran with */
    int stable;     /* the best stopped improving (0: the budget ran out first) */
} CpuPeakMeasure;

/* n x n x n fp32 GEMMs through gemm() at the current thread count, until the best has not improved
 * by 1% in 5 runs (at least 6 runs), or budget_s seconds. Each run counts by whichever clock is
 * less disturbed by other processes: wall time, or the process's CPU time per thread. -1 when the
 * buffers cannot be had. */
int cpu_peak_measure(int n, double budget_s, CpuPeakMeasure *out);

/* The machine key of a measurement: CPU model, online CPUs, compute threads and which GEMM runs
 * (own AVX-512 kernel or BLAS and its core), e.g. "AMD EPYC 9B14 | 2 cpus | 2 threads | own avx512". */
void cpu_peak_key(int threads, char *key, size_t n);
/* The cache file: $MYRIAD_CACHE_DIR/cpu_peak.tsv, else $XDG_CACHE_HOME/myriad/..., else
 * $HOME/.cache/myriad/... ("" when none can be named). */
void cpu_peak_cache_path(char *path, size_t n);
/* The best rate cached for `key`, with what measured it and when ("bench sgemm, 2025-06-01").
 * 0 when found, -1 when not (no file, no line for the key, unreadable). */
int cpu_peak_cache_get(const char *key, double *flops, char *source, size_t source_n);
/* Records `flops` for `key` unless the cache holds a higher figure for it (the best seen stands:
 * another job only ever slows a measurement down). Written atomically. Returns 1 when the cache
 * now holds `flops`, 0 when it held more, -1 + myr_error when it cannot be written. */
int cpu_peak_cache_put(const char *key, double flops, const char *source);

#endif
