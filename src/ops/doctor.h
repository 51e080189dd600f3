/* doctor.h: `myriad doctor`, the pre-flight health check of the hosts of a job.
 *
 * Launched over the job's hosts like any MPI program, it measures every rank's GEMM rate and
 * memory bandwidth (STREAM triad), every tested host pair's point-to-point latency and bandwidth,
 * and the all-reduce bus bandwidth inside each host and across host pairs (doctor_measure.c,
 * scheduled by doctor_run.c). doctor_analyze.c compares each figure with the median of its
 * cohort (and with a baseline) and flags hosts more than a threshold worse, with the reason;
 * doctor_report.c prints the table and reads/writes the JSON form. Definitions, the noise
 * argument and how thresholds were chosen: docs/OPERATIONS.md. */
#ifndef MYRIAD_OPS_DOCTOR_H
#define MYRIAD_OPS_DOCTOR_H

#include <stddef.h>

#include "comm/comm.h"
#include "kernels/real.h"

typedef enum { CHK_GEMM, CHK_TRIAD, CHK_P2P_BW, CHK_P2P_LAT, CHK_AR_INTRA, CHK_AR_INTER, CHK_N } DoctorCheck;
typedef enum { SCOPE_RANK, SCOPE_HOST, SCOPE_PAIR } DoctorScope;

typedef struct {
    const char *name;  /* JSON key and flag suffix: --threshold-NAME */
    const char *title; /* words used in reasons: "GEMM rate" */
    const char *unit;
    DoctorScope scope;
    int higher_better; /* 0: latency */
} DoctorCheckInfo;

const DoctorCheckInfo *doctor_check_info(DoctorCheck c);
int doctor_check_by_name(const char *name); /* -1 when unknown */

#define DOCTOR_HOST_MAX 64
#define DOCTOR_DEFAULT_THRESHOLD 0.10
#define DOCTOR_DEFAULT_NOISE_K 2.0

/* One measured figure: the best of its repetitions. SCOPE_RANK: a = rank; SCOPE_HOST: a = host;
 * SCOPE_PAIR: a, b = hosts. */
typedef struct {
    int a, b;
    double value;
} DoctorSample;

/* What the measurements produced (rank 0 holds it) and how to judge it. */
typedef struct {
    int nhosts, nranks;
    char (*hosts)[DOCTOR_HOST_MAX]; /* names, as the ranks see them (MYRIAD_HOST or gethostname) */
    int *rank_host;                 /* host index of every rank */
    DoctorSample *samples[CHK_N];
    int nsamples[CHK_N];
    double threshold[CHK_N]; /* a host more than this fraction worse than the reference is flagged */
    double baseline[CHK_N];  /* reference from --baseline (its cohort median); 0 = none */
    float *raw[CHK_N];       /* every repetition: nraw[c] per sample, in sample order (NULL: none) */
    int nraw[CHK_N];
    double noise_k;          /* the limit is at least noise^noise_k (0: thresholds only) */
} DoctorResults;

typedef struct {
    int host;
    DoctorCheck check;
    int vs_baseline;  /* 0: against the cohort median */
    double deficit;   /* 1 - 1/slowdown: 0.41 = 41% below (for latency: 1.7x = 0.41) */
    char reason[256]; /* "p2p bandwidth to 2 of 2 peers 95% below the median (...)" (no host name) */
} DoctorFlag;

typedef struct {
    double median[CHK_N];      /* cohort reference; NAN when the cohort has fewer than 3 members */
    double reference[CHK_N];   /* the same median whatever the cohort's size (NAN: no figure): what a
                                * later run reads as its --baseline, so a 1- or 2-host job can make one */
    double noise[CHK_N];       /* best / median repetition of the noisiest sample (>= 1) */
    double effective[CHK_N];   /* the threshold applied: max(threshold, 1 - noise^-k) */
    double *host_value[CHK_N]; /* per host: worst rank, the host's figure, or its best peer; NAN: n/a */
    DoctorFlag *flags;
    int nflags;
} DoctorVerdict;

/* Cohorts smaller than this are not compared with their median (which of two is slow cannot be told). */
#define DOCTOR_MIN_COHORT 3

/* Judge r: fills v (free with doctor_verdict_free). 0, or -1 with myr_error(). */
int doctor_analyze(const DoctorResults *r, DoctorVerdict *v);
void doctor_verdict_free(DoctorVerdict *v);
/* Whether `host` has any flag. */
int doctor_host_flagged(const DoctorVerdict *v, int host);

/* ---- reporting (doctor_report.c) ---- */
typedef struct {
    char device[8];       /* "cpu" or "cuda": where the compute checks ran */
    char dtype[8];        /* the GEMM's element type (doctor_gemm_dtype) */
    char memory[8];       /* the memory check: "triad" or "copy" (doctor_memory_check) */
    char device_name[96]; /* rank 0's device, as the driver or /proc names it */
    int reps;
    size_t gemm_n, triad_bytes, msg_bytes;
    int peers, concurrent, shared_kernels, raw;
    const int *skip; /* checks not measured (may be NULL) */
    double seconds;
    double phase_s[3]; /* compute checks, intra-host all-reduce, host pairs */
} DoctorSetup;

/* The human table on stdout. */
void doctor_print_table(const DoctorResults *r, const DoctorVerdict *v, const DoctorSetup *s);
/* The JSON form (docs/OPERATIONS.md); caller frees. */
char *doctor_json(const DoctorResults *r, const DoctorVerdict *v, const DoctorSetup *s);
/* Read the references (cohort medians of any size) of a doctor JSON file as baselines (checks it lacks stay 0). */
int doctor_load_baseline(const char *path, double baseline[CHK_N]);

/* ---- measurement (doctor_measure.c): one figure each; the caller schedules who measures when ---- */
/* Best of `k` n x n x n fp32 GEMMs of the CPU backend (kernels/cpu/cpu_gemm.h), in GFLOP/s. */
double doctor_gemm_gflops(const real *a, const real *b, real *c, int n, int k);
/* Best of `k` passes of a[i] = b[i] + s * c[i] over n doubles, in GB/s (24 bytes per element, as STREAM). */
double doctor_triad_gbs(double *a, const double *b, const double *c, size_t n, int k);
/* The same two checks on a device whose memory the host cannot touch (a GPU; the device guard):
 * best of `k` n x n x n GEMMs of the selected backend (kernels.h matmul_forward, the run's dtype:
 * cuBLAS on a GPU), in GFLOP/s; best of `k` device-to-device copies of `bytes`, counting the bytes
 * read and written, in GB/s. Each timing waits for the device before and after. */
double doctor_device_gemm_gflops(const void *a, const void *b, void *c, int n, int k);
double doctor_device_copy_gbs(void *dst, const void *src, size_t bytes, int k);
/* What the compute checks measure with the selected backend: the GEMM's element type ("fp32" when
 * the host's BLAS runs it) and the memory check ("triad" on host memory, "copy" on a device). */
const char *doctor_gemm_dtype(void);
const char *doctor_memory_check(void);
/* Default sizes: small enough for a CPU's caches to matter little, large enough for a GPU's not to
 * (a GPU's L2 holds tens of MB, and a small GEMM only measures its launch) */
#define DOCTOR_GEMM_N_CPU 384
#define DOCTOR_GEMM_N_GPU 8192
#define DOCTOR_TRIAD_MB_CPU 48
#define DOCTOR_TRIAD_MB_GPU 2048
#define DOCTOR_P2P_WINDOW 8 /* bandwidth messages in flight at once */
/* Ping-pong latency (median half round trip, microseconds) and bandwidth (bytes both ways over
 * the time, GB/s) between world ranks `me` and `peer` (the lower of the two leads); buf holds
 * DOCTOR_P2P_WINDOW messages of `bytes`. */
void doctor_p2p(Comm *world, int me, int peer, size_t bytes, float *buf, double *lat_us, double *bw_gbs);
/* All-reduce bus bandwidth over group g (nccl-tests' 2(n-1)/n factor), GB/s; the slowest member's time. */
double doctor_allreduce_busbw(Comm *g, float *buf, size_t bytes);

#endif
