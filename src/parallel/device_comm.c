/* device_comm.c: collectives over device buffers through the transport chosen once per process
 * (see the header): MPI staged through a pool of pinned host buffers (allocating pinned memory
 * is slow on CUDA, and the same sizes recur every step), MPI given the device buffers directly
 * (with the comm layer's arithmetic and copies on the device, comm_device_buffers), or NCCL
 * (device_comm_nccl.c). */
#include "parallel/device_comm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nccl_lib.h"
#include "kernels/kernels.h"
#include "parallel/device_comm_nccl.h"
#include "util/error.h"

static int chosen = -1; /* a DcommTransport once dcomm_setup has run */
static char chosen_desc[256];

/* ---- the comm layer's device-side helpers for the direct MPI path ---- */

static void *d_alloc(size_t bytes) { return dev_alloc_bytes(bytes); }
static void d_free(void *p) { dev_free(p); }
static void d_copy(void *dst, const void *src, size_t bytes) { dev_to_dev(dst, src, bytes); }
static void d_scale(float *x, size_t n, float s) {
    scale_inplace((real *)x, (real)s, n);
    dev_sync(); /* MPI may read the result next */
}
static void d_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, CommOp op, int divisor) {
    dev_reduce_bf16(out, src, nsrc, n, (int)op, divisor);
    dev_sync();
}
static const void *d_mpi_address(const void *p) { return dev_transport_address(p); }
static const CommDeviceOps device_ops = {d_alloc, d_free, d_copy, d_scale, d_reduce_bf16, d_mpi_address};

/* ---- choosing the transport ---- */

int dcomm_setup(char *desc, size_t desc_size) {
    if (chosen >= 0) {
        if (desc && desc_size) snprintf(desc, desc_size, "%s", chosen_desc);
        return 0;
    }
    CommTransport want = comm_options()->transport;
    int cuda = !strcmp(kernels_device(), "cuda");
    if (want == COMM_TRANSPORT_NCCL || (want == COMM_TRANSPORT_AUTO && cuda)) {
        char why[512] = "";
        if (dnccl_setup(why, sizeof why) == 0) {
            chosen = DCOMM_NCCL;
            snprintf(chosen_desc, sizeof chosen_desc, "nccl %d.%d.%d%s", nccl_version() / 10000,
                     nccl_version() / 100 % 100, nccl_version() % 100,
                     nccl_is_emulation() ? " (the emulation over MPI, tests/nccl_emu.c)" : "");
        } else if (want == COMM_TRANSPORT_NCCL) {
            return myr_error("--comm nccl: %s", why);
        } else {
            snprintf(chosen_desc, sizeof chosen_desc, "mpi, as NCCL is not usable (%.150s)", why);
        }
    }
    if (chosen < 0) {
        int direct = dev_host_accessible() || (comm_cuda_aware() && dev_transport_capable());
        chosen = direct ? DCOMM_MPI_DIRECT : DCOMM_MPI_STAGED;
        if (!chosen_desc[0])
            snprintf(chosen_desc, sizeof chosen_desc, "mpi (%s)",
                     dev_host_accessible() ? "device memory is host memory"
                     : direct            ? "device buffers direct: CUDA-aware"
                                         : "device buffers staged through pinned host memory");
    }
    if (desc && desc_size) snprintf(desc, desc_size, "%s", chosen_desc);
    return 0;
}

static DcommTransport transport(void) {
    if (chosen < 0 && dcomm_setup(NULL, 0)) myr_die_last();
    return (DcommTransport)chosen;
}

DcommTransport dcomm_transport(void) { return transport(); }
int dcomm_direct(void) { return transport() != DCOMM_MPI_STAGED; }

/* Direct MPI: the buffers are the device's, so the comm layer touches them only through
 * device_ops (none needed where device memory is host memory), and MPI does not order itself
 * after the queued kernels that produce them, so those are waited for first. */
static const CommDeviceOps *direct_begin(void) {
    if (dev_host_accessible()) return comm_device_buffers(NULL);
    dev_sync();
    return comm_device_buffers(&device_ops);
}
#define DIRECT(call)                                      \
    do {                                                  \
        const CommDeviceOps *prev_ = direct_begin();      \
        int rc_ = (call);                                 \
        comm_device_buffers(prev_);                       \
        return rc_;                                       \
    } while (0)

/* ---- pinned staging pool ---- */

typedef struct {
    void *p;
    size_t bytes;
    int busy;
} Staging;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static Staging *pool;
static size_t npool;

/* The smallest free buffer of at least `bytes`, else a new one (never freed: reused each step). */
static void *stage_get(size_t bytes) {
    if (!bytes) bytes = 1;
    pthread_mutex_lock(&pool_lock);
    Staging *best = NULL;
    for (size_t i = 0; i < npool; i++)
        if (!pool[i].busy && pool[i].bytes >= bytes && (!best || pool[i].bytes < best->bytes)) best = &pool[i];
    if (!best) {
        pool = realloc(pool, (npool + 1) * sizeof *pool);
        best = &pool[npool++];
        best->bytes = bytes;
        best->p = host_alloc_pinned(bytes);
    }
    best->busy = 1;
    void *p = best->p;
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static void stage_put(void *p) {
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < npool; i++)
        if (pool[i].p == p) pool[i].busy = 0;
    pthread_mutex_unlock(&pool_lock);
}

/* ---- blocking ---- */

int dcomm_all_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op) {
    switch (transport()) {
    case DCOMM_NCCL: return dnccl_run(dnccl_all_reduce(c, send, recv, count, dt, op));
    case DCOMM_MPI_DIRECT: DIRECT(comm_all_reduce(c, send, recv, count, dt, op));
    default: break;
    }
    size_t bytes = count * comm_dtype_size(dt);
    void *h = stage_get(bytes);
    dev_to_host(h, send, bytes);
    int rc = comm_all_reduce(c, h, h, count, dt, op);
    if (!rc) host_to_dev(recv, h, bytes);
    stage_put(h);
    return rc;
}

int dcomm_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op) {
    switch (transport()) {
    case DCOMM_NCCL: return dnccl_run(dnccl_reduce_scatter(c, send, recv, recvcount, dt, op));
    case DCOMM_MPI_DIRECT: DIRECT(comm_reduce_scatter(c, send, recv, recvcount, dt, op));
    default: break;
    }
    size_t piece = recvcount * comm_dtype_size(dt), bytes = piece * (size_t)comm_size(c);
    char *h = stage_get(bytes);
    dev_to_host(h, send, bytes);
    char *mine = h + (size_t)comm_rank(c) * piece;
    int rc = comm_reduce_scatter(c, h, mine, recvcount, dt, op);
    if (!rc) host_to_dev(recv, mine, piece);
    stage_put(h);
    return rc;
}

int dcomm_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt) {
    switch (transport()) {
    case DCOMM_NCCL: return dnccl_run(dnccl_all_gather(c, send, recv, sendcount, dt));
    case DCOMM_MPI_DIRECT: DIRECT(comm_all_gather(c, send, recv, sendcount, dt));
    default: break;
    }
    size_t piece = sendcount * comm_dtype_size(dt), bytes = piece * (size_t)comm_size(c);
    char *h = stage_get(bytes), *mine = h + (size_t)comm_rank(c) * piece;
    dev_to_host(mine, send, piece);
    int rc = comm_all_gather(c, mine, h, sendcount, dt);
    if (!rc) host_to_dev(recv, h, bytes);
    stage_put(h);
    return rc;
}

int dcomm_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                       const size_t *recvcounts, const size_t *rdispls, CommDtype dt) {
    switch (transport()) {
    case DCOMM_NCCL: return dnccl_run(dnccl_all_to_all_v(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt));
    case DCOMM_MPI_DIRECT: DIRECT(comm_all_to_all_v(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt));
    default: break;
    }
    int P = comm_size(c);
    size_t es = comm_dtype_size(dt), sn = 0, rn = 0;
    for (int r = 0; r < P; r++) {
        if (sdispls[r] + sendcounts[r] > sn) sn = sdispls[r] + sendcounts[r];
        if (rdispls[r] + recvcounts[r] > rn) rn = rdispls[r] + recvcounts[r];
    }
    char *hs = stage_get(sn * es), *hr = stage_get(rn * es);
    dev_to_host(hs, send, sn * es);
    int rc = comm_all_to_all_v(c, hs, sendcounts, sdispls, hr, recvcounts, rdispls, dt);
    if (!rc) host_to_dev(recv, hr, rn * es);
    stage_put(hs);
    stage_put(hr);
    return rc;
}

int dcomm_all_to_all(Comm *c, const void *send, void *recv, size_t count, CommDtype dt) {
    int P = comm_size(c);
    size_t *counts = malloc(2 * (size_t)P * sizeof *counts), *displs = counts + P;
    for (int r = 0; r < P; r++) counts[r] = count, displs[r] = (size_t)r * count;
    int rc;
    if (transport() == DCOMM_MPI_DIRECT) { /* MPI's own all-to-all */
        const CommDeviceOps *prev = direct_begin();
        rc = comm_all_to_all(c, send, recv, count, dt);
        comm_device_buffers(prev);
    } else {
        rc = dcomm_all_to_all_v(c, send, counts, displs, recv, counts, displs, dt);
    }
    free(counts);
    return rc;
}

int dcomm_broadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root) {
    switch (transport()) {
    case DCOMM_NCCL: return dnccl_run(dnccl_broadcast(c, send, recv, count, dt, root));
    case DCOMM_MPI_DIRECT: DIRECT(comm_broadcast(c, send, recv, count, dt, root));
    default: break;
    }
    size_t bytes = count * comm_dtype_size(dt);
    void *h = stage_get(bytes);
    if (comm_rank(c) == root) dev_to_host(h, send ? send : recv, bytes);
    int rc = comm_broadcast(c, h, h, count, dt, root);
    if (!rc) host_to_dev(recv, h, bytes);
    stage_put(h);
    return rc;
}

/* ---- nonblocking ---- */

struct DevRequest {
    CommRequest *req;   /* MPI */
    DncclOp *op;        /* NCCL */
    void *dev, *host;   /* staged: the device buffer and its host copy (NULL when direct) */
    size_t off, bytes;  /* what comes back to the device on completion */
};

static int start(DevRequest **out, CommRequest *req, DncclOp *op, void *dev, void *host, size_t off, size_t bytes) {
    DevRequest *r = malloc(sizeof *r);
    *r = (DevRequest){req, op, dev, host, off, bytes};
    *out = r;
    return 0;
}

static int nccl_start(DevRequest **out, DncclOp *op) {
    *out = NULL;
    if (!op) return -1;
    return start(out, NULL, op, NULL, NULL, 0, 0);
}

/* The host copy of buf's `bytes` (staged), or buf itself (direct). */
static void *stage_in(void *buf, size_t bytes) {
    if (transport() == DCOMM_MPI_DIRECT) return buf;
    void *h = stage_get(bytes);
    dev_to_host(h, buf, bytes);
    return h;
}

static int failed(void *host) {
    if (host && transport() == DCOMM_MPI_STAGED) stage_put(host);
    return -1;
}

/* Start an MPI request on direct or staged buffers (the direct ones through device_ops). */
#define MPI_START(call)                                                                 \
    const CommDeviceOps *prev_ = transport() == DCOMM_MPI_DIRECT ? direct_begin() : NULL; \
    int rc_ = (call);                                                                   \
    if (transport() == DCOMM_MPI_DIRECT) comm_device_buffers(prev_)

int dcomm_iall_reduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, DevRequest **out) {
    if (transport() == DCOMM_NCCL) return nccl_start(out, dnccl_all_reduce(c, buf, buf, count, dt, op));
    size_t bytes = count * comm_dtype_size(dt);
    void *h = stage_in(buf, bytes);
    CommRequest *req;
    MPI_START(comm_iall_reduce(c, h, h, count, dt, op, &req));
    if (rc_) return failed(h);
    return start(out, req, NULL, buf, h == buf ? NULL : h, 0, bytes);
}

int dcomm_ireduce_scatter(Comm *c, void *buf, size_t recvcount, CommDtype dt, CommOp op, DevRequest **out) {
    size_t piece = recvcount * comm_dtype_size(dt), off = (size_t)comm_rank(c) * piece;
    if (transport() == DCOMM_NCCL)
        return nccl_start(out, dnccl_reduce_scatter(c, buf, (char *)buf + off, recvcount, dt, op));
    char *h = stage_in(buf, piece * (size_t)comm_size(c));
    CommRequest *req;
    MPI_START(comm_ireduce_scatter(c, h, h + off, recvcount, dt, op, &req));
    if (rc_) return failed(h);
    return start(out, req, NULL, buf, (void *)h == buf ? NULL : h, off, piece);
}

int dcomm_iall_gather(Comm *c, void *buf, size_t sendcount, CommDtype dt, DevRequest **out) {
    size_t piece = sendcount * comm_dtype_size(dt), off = (size_t)comm_rank(c) * piece;
    size_t bytes = piece * (size_t)comm_size(c);
    if (transport() == DCOMM_NCCL) return nccl_start(out, dnccl_all_gather(c, (char *)buf + off, buf, sendcount, dt));
    char *h = buf;
    if (transport() == DCOMM_MPI_STAGED) { /* only the own piece needs to go to the host */
        h = stage_get(bytes);
        dev_to_host(h + off, (char *)buf + off, piece);
    }
    CommRequest *req;
    MPI_START(comm_iall_gather(c, h + off, h, sendcount, dt, &req));
    if (rc_) return failed(h);
    return start(out, req, NULL, buf, (void *)h == buf ? NULL : h, 0, bytes);
}

int dcomm_isend(Comm *c, const void *buf, size_t count, CommDtype dt, int peer, DevRequest **out) {
    if (transport() == DCOMM_NCCL) return nccl_start(out, dnccl_send(c, buf, count, dt, peer));
    size_t bytes = count * comm_dtype_size(dt);
    void *h = stage_in((void *)buf, bytes);
    CommRequest *req;
    MPI_START(comm_isend(c, h, count, dt, peer, &req));
    if (rc_) return failed(h);
    return start(out, req, NULL, NULL, h == buf ? NULL : h, 0, 0); /* nothing comes back */
}

int dcomm_irecv(Comm *c, void *buf, size_t count, CommDtype dt, int peer, DevRequest **out) {
    if (transport() == DCOMM_NCCL) return nccl_start(out, dnccl_recv(c, buf, count, dt, peer));
    size_t bytes = count * comm_dtype_size(dt);
    void *h = transport() == DCOMM_MPI_DIRECT ? buf : stage_get(bytes);
    CommRequest *req;
    MPI_START(comm_irecv(c, h, count, dt, peer, &req));
    if (rc_) return failed(h);
    return start(out, req, NULL, buf, h == buf ? NULL : h, 0, bytes);
}

int dcomm_group_start(void) { return transport() == DCOMM_NCCL ? dnccl_group_start() : 0; }
int dcomm_group_end(void) { return transport() == DCOMM_NCCL ? dnccl_group_end() : 0; }

/* The request has completed: its result back to the device, the staging buffer to the pool. */
static void complete(DevRequest **req) {
    DevRequest *r = *req;
    if (r->host) {
        if (r->bytes) host_to_dev((char *)r->dev + r->off, (char *)r->host + r->off, r->bytes);
        stage_put(r->host);
    }
    free(r);
    *req = NULL;
}

int dcomm_wait(DevRequest **req) {
    if (!*req) return 0;
    DevRequest *r = *req;
    int rc = r->op ? dnccl_wait(r->op) : comm_wait(&r->req);
    if (rc) {
        failed(r->host);
        free(r);
        *req = NULL;
        return -1;
    }
    complete(req);
    return 0;
}

int dcomm_test(DevRequest **req, int *done) {
    *done = 0;
    if (!*req) {
        *done = 1;
        return 0;
    }
    DevRequest *r = *req;
    if (r->op) {
        int rc = dnccl_test(r->op, done);
        if (rc || *done) free(r), *req = NULL;
        if (rc) *done = 1;
        return rc;
    }
    if (comm_test(&r->req, done)) return -1;
    if (*done) complete(req);
    return 0;
}
