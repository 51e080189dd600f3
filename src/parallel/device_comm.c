/* device_comm.c: collectives over device buffers, direct or staged (see the header). Staging
 * buffers come from a small pool of pinned host memory kept for the process (allocating pinned
 * memory is slow on CUDA, and the same sizes recur every step). */
#include "parallel/device_comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

int dcomm_direct(void) {
    static int direct = -1;
    if (direct < 0) direct = dev_host_accessible() || (!strcmp(kernels_device(), "cuda") && comm_cuda_aware());
    return direct;
}

/* Direct use of device buffers by MPI: MPI does not order itself after the queued kernels that
 * produce them, so wait for those first (nothing to wait for on the CPU). */
static int direct_ready(void) {
    if (!dcomm_direct()) return 0;
    if (!dev_host_accessible()) dev_sync();
    return 1;
}

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

int dcomm_all_reduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op) {
    if (direct_ready()) return comm_all_reduce(c, buf, buf, count, dt, op);
    size_t bytes = count * comm_dtype_size(dt);
    void *h = stage_get(bytes);
    dev_to_host(h, buf, bytes);
    int rc = comm_all_reduce(c, h, h, count, dt, op);
    if (!rc) host_to_dev(buf, h, bytes);
    stage_put(h);
    return rc;
}

int dcomm_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op) {
    if (direct_ready()) return comm_reduce_scatter(c, send, recv, recvcount, dt, op);
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
    if (direct_ready()) return comm_all_gather(c, send, recv, sendcount, dt);
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
    if (direct_ready()) return comm_all_to_all_v(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt);
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

/* ---- nonblocking ---- */

struct DevRequest {
    CommRequest *req;
    void *dev, *host;   /* staged: the device buffer and its host copy (NULL when direct) */
    size_t off, bytes;  /* what comes back to the device on completion */
};

static int start(DevRequest **out, CommRequest *req, void *dev, void *host, size_t off, size_t bytes) {
    DevRequest *r = malloc(sizeof *r);
    *r = (DevRequest){req, dev, host, off, bytes};
    *out = r;
    return 0;
}

/* The host copy of buf's `bytes` (staged), or buf itself (direct). */
static void *stage_in(void *buf, size_t bytes) {
    if (direct_ready()) return buf;
    void *h = stage_get(bytes);
    dev_to_host(h, buf, bytes);
    return h;
}

static int failed(void *host) {
    if (host && !dcomm_direct()) stage_put(host);
    return -1;
}

int dcomm_iall_reduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, DevRequest **out) {
    size_t bytes = count * comm_dtype_size(dt);
    void *h = stage_in(buf, bytes);
    CommRequest *req;
    if (comm_iall_reduce(c, h, h, count, dt, op, &req)) return failed(h);
    return start(out, req, buf, h == buf ? NULL : h, 0, bytes);
}

int dcomm_ireduce_scatter(Comm *c, void *buf, size_t recvcount, CommDtype dt, CommOp op, DevRequest **out) {
    size_t piece = recvcount * comm_dtype_size(dt), off = (size_t)comm_rank(c) * piece;
    char *h = stage_in(buf, piece * (size_t)comm_size(c));
    CommRequest *req;
    if (comm_ireduce_scatter(c, h, h + off, recvcount, dt, op, &req)) return failed(h);
    return start(out, req, buf, (void *)h == buf ? NULL : h, off, piece);
}

int dcomm_iall_gather(Comm *c, void *buf, size_t sendcount, CommDtype dt, DevRequest **out) {
    size_t piece = sendcount * comm_dtype_size(dt), off = (size_t)comm_rank(c) * piece;
    size_t bytes = piece * (size_t)comm_size(c);
    char *h = buf;
    if (!direct_ready()) { /* only the own piece needs to go to the host */
        h = stage_get(bytes);
        dev_to_host(h + off, (char *)buf + off, piece);
    }
    CommRequest *req;
    if (comm_iall_gather(c, h + off, h, sendcount, dt, &req)) return failed(h);
    return start(out, req, buf, (void *)h == buf ? NULL : h, 0, bytes);
}

/* The request has completed: its result back to the device, the staging buffer to the pool. */
static void complete(DevRequest **req) {
    DevRequest *r = *req;
    if (r->host) {
        host_to_dev((char *)r->dev + r->off, (char *)r->host + r->off, r->bytes);
        stage_put(r->host);
    }
    free(r);
    *req = NULL;
}

int dcomm_wait(DevRequest **req) {
    if (!*req) return 0;
    int rc = comm_wait(&(*req)->req);
    if (rc) {
        failed((*req)->host);
        free(*req);
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
    if (comm_test(&(*req)->req, done)) return -1;
    if (*done) complete(req);
    return 0;
}
