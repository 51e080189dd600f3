/* tensor_parallel.c: comm-backed collectives for tensor parallelism. */
#include "parallel/tensor_parallel.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "parallel/device_comm.h"
#include "util/error.h"

static void sum_real(void *ctx, real *x, size_t n) {
    if (dcomm_all_reduce((Comm *)ctx, x, n, COMM_F32, COMM_SUM)) myr_die_last();
}

/* Doubles cross the wire bit-exactly (as pairs of 32-bit words) and are combined in rank order,
 * so every rank gets the same value. */
static void sum_exact(void *ctx, double *x, size_t n, int max) {
    Comm *g = ctx;
    int size = comm_size(g);
    double *all = malloc((size_t)size * n * sizeof(double));
    if (comm_all_gather(g, x, all, 2 * n, COMM_F32)) myr_die_last();
    for (size_t i = 0; i < n; i++) {
        double acc = all[i];
        for (int r = 1; r < size; r++) {
            double v = all[(size_t)r * n + i];
            acc = max ? (v > acc ? v : acc) : acc + v;
        }
        x[i] = acc;
    }
    free(all);
}

static void reduce_scatter(void *ctx, const real *full, real *local, size_t n) {
    if (dcomm_reduce_scatter((Comm *)ctx, full, local, n, COMM_F32, COMM_SUM)) myr_die_last();
}

/* Rows of fp32 or bf16 elements: a gather only moves bits, so bf16 travels as bf16. */
static void all_gather(void *ctx, const void *local, void *full, size_t n, size_t elem_size) {
    CommDtype dt = elem_size == 2 ? COMM_BF16 : COMM_F32;
    if (elem_size != 2 && elem_size != 4) myr_die("internal: tensor-parallel gather of %zu-byte elements", elem_size);
    if (dcomm_all_gather((Comm *)ctx, local, full, n, dt)) myr_die_last();
}

void tp_attach(Model *m, Comm *group) {
    m->tp.sum = sum_real;
    m->tp.sum_exact = sum_exact;
    m->tp.reduce_scatter = reduce_scatter;
    m->tp.all_gather = all_gather;
    m->tp.ctx = group;
}
