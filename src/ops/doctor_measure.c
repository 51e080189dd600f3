/* doctor_measure.c: the doctor's measurements, one figure per call. Who measures when (turns,
 * repetitions, pairs) is doctor_run.c's business; here each figure is made as robust as a
 * short measurement can be: compute checks keep the best of a few back-to-back runs (a
 * preempted run is only ever slower), communication checks size their iteration count from a
 * warm-up so a slow link costs about as much time as a fast one. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/kernels.h"
#include "ops/doctor.h"
#include "util/error.h"

#define COMM_TARGET_S 0.02 /* time one communication figure aims to take */
#define MAX_ITERS 64

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int iters_for(double warm_s, int lo, int hi) {
    int n = warm_s > 0 ? (int)(COMM_TARGET_S / warm_s) : hi;
    return n < lo ? lo : n > hi ? hi : n;
}

double doctor_gemm_gflops(const real *a, const real *b, real *c, int n, int k) {
    double best = 1e30;
    for (int r = 0; r <= k; r++) { /* run 0 warms caches and threads */
        double t0 = now_s();
        gemm(0, 0, n, n, n, a, n, b, n, 0, c, n);
        double dt = now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return 2.0 * n * n * (double)n / best / 1e9;
}

double doctor_triad_gbs(double *a, const double *b, const double *c, size_t n, int k) {
    const double s = 3.0;
    double best = 1e30;
    for (int r = 0; r <= k; r++) {
        double t0 = now_s();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double dt = now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return 24.0 * (double)n / best / 1e9;
}

/* Four GEMMs per timing: one 8192^3 bf16 product takes about a millisecond on an H100, and four
 * make the launch and the synchronisation a small part of what is timed. */
#define DEVICE_GEMMS 4

double doctor_device_gemm_gflops(const void *a, const void *b, void *c, int n, int k) {
    double best = 1e30;
    for (int r = 0; r <= k; r++) { /* run 0 warms up (cuBLAS picks and loads its kernel) */
        dev_sync();
        double t0 = now_s();
        for (int i = 0; i < DEVICE_GEMMS; i++) matmul_forward(c, 0, a, b, NULL, n, n, n);
        dev_sync();
        double dt = (now_s() - t0) / DEVICE_GEMMS;
        if (r > 0 && dt < best) best = dt;
    }
    return 2.0 * n * n * (double)n / best / 1e9;
}

double doctor_device_copy_gbs(void *dst, const void *src, size_t bytes, int k) {
    double best = 1e30;
    for (int r = 0; r <= k; r++) {
        dev_sync();
        double t0 = now_s();
        dev_to_dev(dst, src, bytes);
        dev_sync();
        double dt = now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return 2.0 * (double)bytes / best / 1e9;
}

const char *doctor_gemm_dtype(void) { return dev_host_accessible() ? "fp32" : dtype_name(kernels_dtype()); }
const char *doctor_memory_check(void) { return dev_host_accessible() ? "triad" : "copy"; }

static void must(int rc) {
    if (rc < 0) myr_die_last();
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* One direction of the bandwidth test: `from` sends n bursts of DOCTOR_P2P_WINDOW messages, all of
 * a burst in flight at once (as osu_bw does: one message at a time would measure the round trips
 * of a rendezvous protocol and the receiver's wake-ups, not the link), and `to` acknowledges the
 * last. Returns the sender's elapsed seconds (0 on the receiver). */
static double stream_one_way(Comm *w, int me, int from, int to, float *buf, size_t count, int n) {
    float ack = 0;
    CommRequest *req[DOCTOR_P2P_WINDOW];
    int sender = me == from;
    double t0 = now_s();
    for (int b = 0; b < n; b++) {
        for (int k = 0; k < DOCTOR_P2P_WINDOW; k++)
            must(sender ? comm_isend(w, buf + k * count, count, COMM_F32, to, &req[k])
                        : comm_irecv(w, buf + k * count, count, COMM_F32, from, &req[k]));
        for (int k = 0; k < DOCTOR_P2P_WINDOW; k++) must(comm_wait(&req[k]));
    }
    if (sender) {
        must(comm_recv(w, &ack, 1, COMM_F32, to));
        return now_s() - t0;
    }
    must(comm_send(w, &ack, 1, COMM_F32, from));
    return 0;
}

void doctor_p2p(Comm *w, int me, int peer, size_t bytes, float *buf, double *lat_us, double *bw_gbs) {
    int lead = me < peer ? me : peer, other = me < peer ? peer : me;
    float ctl[2] = {0, 0};
    size_t count = bytes / sizeof(float);
    /* latency: the leader times ping-pongs of one float; the first ones (connection set-up) are
     * not counted, and the leader tells its peer how many follow */
    double rtt[MAX_ITERS * 4];
    int n = 0;
    if (me == lead) {
        double t0 = now_s();
        for (int i = 0; i < 2; i++) must(comm_send(w, ctl, 1, COMM_F32, other)), must(comm_recv(w, ctl, 1, COMM_F32, other));
        n = iters_for((now_s() - t0) / 2, 5, MAX_ITERS * 4);
        ctl[0] = (float)n;
        must(comm_send(w, ctl, 1, COMM_F32, other));
        for (int i = 0; i < n; i++) {
            double t = now_s();
            must(comm_send(w, ctl, 1, COMM_F32, other));
            must(comm_recv(w, ctl, 1, COMM_F32, other));
            rtt[i] = now_s() - t;
        }
        qsort(rtt, (size_t)n, sizeof *rtt, cmp_double);
        *lat_us = rtt[n / 2] / 2 * 1e6;
    } else {
        for (int i = 0; i < 2; i++) must(comm_recv(w, ctl, 1, COMM_F32, lead)), must(comm_send(w, ctl, 1, COMM_F32, lead));
        must(comm_recv(w, ctl, 1, COMM_F32, lead));
        n = (int)ctl[0];
        for (int i = 0; i < n; i++) must(comm_recv(w, ctl, 1, COMM_F32, lead)), must(comm_send(w, ctl, 1, COMM_F32, lead));
        *lat_us = 0;
    }
    /* bandwidth: one warm-up burst sizes the count, then n bursts each way */
    double warm = stream_one_way(w, me, lead, other, buf, count, 1);
    if (me == lead) ctl[0] = (float)iters_for(warm, 1, 8);
    if (me == lead) must(comm_send(w, ctl, 1, COMM_F32, other));
    else must(comm_recv(w, ctl, 1, COMM_F32, lead));
    n = (int)ctl[0];
    double t_ab = stream_one_way(w, me, lead, other, buf, count, n);
    double t_ba = stream_one_way(w, me, other, lead, buf, count, n);
    /* the peer's sending time travels to the leader, which owns the figure */
    if (me == other) {
        ctl[1] = (float)t_ba;
        must(comm_send(w, ctl, 2, COMM_F32, lead));
        *bw_gbs = 0;
    } else {
        must(comm_recv(w, ctl, 2, COMM_F32, other));
        t_ba = ctl[1];
        *bw_gbs = 2.0 * n * DOCTOR_P2P_WINDOW * (double)(count * sizeof(float)) / (t_ab + t_ba) / 1e9;
    }
}

/* Seconds one all-reduce takes on the slowest member, averaged over n calls. */
static double allreduce_time(Comm *g, float *buf, size_t count, int n) {
    must(comm_barrier(g));
    double t0 = now_s();
    for (int i = 0; i < n; i++) must(comm_all_reduce(g, buf, buf, count, COMM_F32, COMM_SUM));
    float t = (float)((now_s() - t0) / n);
    must(comm_all_reduce(g, &t, &t, 1, COMM_F32, COMM_MAX));
    return t;
}

double doctor_allreduce_busbw(Comm *g, float *buf, size_t bytes) {
    size_t count = bytes / sizeof(float);
    int m = comm_size(g);
    must(comm_all_reduce(g, buf, buf, count, COMM_F32, COMM_SUM)); /* connections are made on first use */
    /* every member sees the same slowest warm-up time, so all choose the same count */
    int n = iters_for(allreduce_time(g, buf, count, 1), 1, 16);
    double t = allreduce_time(g, buf, count, n);
    return (double)(count * sizeof(float)) / t * (2.0 * (m - 1) / m) / 1e9; /* nccl-tests' busbw */
}
