/* context_parallel.c: the ring exchange of context-parallel attention over comm.h's
 * point-to-point calls: on each channel an irecv from the previous rank of the cp group and an
 * isend to the next, started together (no ordering deadlock) and waited for together. MPI reads
 * device buffers directly when it can (dcomm_direct: the CPU backend, a CUDA-aware MPI);
 * otherwise each channel stages through pinned host memory (device -> host before the send, host
 * -> device after the receive), which moves the same bytes. Also the host all-gather over the
 * group with which the MoE router forms whole-sequence statistics. */
#include "parallel/context_parallel.h"

#include <stdlib.h>

#include "kernels/kernels.h"
#include "parallel/device_comm.h"
#include "util/error.h"

typedef struct {
    Comm *group;
    CommRequest *send[2], *recv[2];
    void *dev_recv[2];          /* staged: where the received bytes go */
    void *host[2][2];           /* staged: [channel][send, recv] pinned buffers */
    size_t host_bytes[2], bytes[2];
} Ring;

static void *pinned(Ring *r, int ch, int which, size_t bytes) {
    if (r->host_bytes[ch] < bytes) {
        for (int i = 0; i < 2; i++) host_free_pinned(r->host[ch][i]), r->host[ch][i] = host_alloc_pinned(bytes);
        if (!r->host[ch][0] || !r->host[ch][1]) myr_die("context parallelism: out of pinned memory (%zu bytes)", bytes);
        r->host_bytes[ch] = bytes;
    }
    return r->host[ch][which];
}

/* bytes travel as 16-bit words (never converted): every block is a whole number of them */
static void ring_start(void *ctx, int ch, const void *send, void *recv, size_t bytes) {
    Ring *r = ctx;
    int n = comm_size(r->group), me = comm_rank(r->group);
    int next = (me + 1) % n, prev = (me - 1 + n) % n;
    if (bytes % 2) myr_die("internal: ring exchange of %zu bytes (odd)", bytes);
    r->bytes[ch] = bytes;
    r->dev_recv[ch] = NULL;
    if (!dcomm_direct()) {
        void *hs = pinned(r, ch, 0, bytes);
        dev_to_host(hs, send, bytes);
        r->dev_recv[ch] = recv;
        send = hs;
        recv = pinned(r, ch, 1, bytes);
    } else if (!dev_host_accessible()) {
        dev_sync(); /* a CUDA-aware MPI reads the buffer: the kernels writing it must be done */
    }
    if (comm_irecv(r->group, recv, bytes / 2, COMM_BF16, prev, &r->recv[ch]) ||
        comm_isend(r->group, send, bytes / 2, COMM_BF16, next, &r->send[ch]))
        myr_die("context parallelism: ring exchange: %s", myr_last_error());
}

static void ring_wait(void *ctx, int ch) {
    Ring *r = ctx;
    if (comm_wait(&r->recv[ch]) || comm_wait(&r->send[ch]))
        myr_die("context parallelism: ring exchange: %s", myr_last_error());
    if (r->dev_recv[ch]) host_to_dev(r->dev_recv[ch], r->host[ch][1], r->bytes[ch]);
}

/* host buffers: the router statistics (a few words per sequence and expert), moved as 32-bit words */
static void all_gather(void *ctx, const void *local, void *all, size_t bytes) {
    Ring *r = ctx;
    if (bytes % 4) myr_die("internal: cp all-gather of %zu bytes (not whole words)", bytes);
    if (comm_all_gather(r->group, local, all, bytes / 4, COMM_F32))
        myr_die("context parallelism: all-gather: %s", myr_last_error());
}

void cp_attach(Model *m, Comm *group) {
    Ring *r = calloc(1, sizeof *r);
    if (!r) myr_die("out of memory");
    r->group = group;
    m->cp.size = comm_size(group);
    m->cp.rank = comm_rank(group);
    m->cp.ring_start = ring_start;
    m->cp.ring_wait = ring_wait;
    m->cp.all_gather = all_gather;
    m->cp.ctx = r;
}

void cp_detach(Model *m) {
    Ring *r = m->cp.ctx;
    if (!r) return;
    for (int ch = 0; ch < 2; ch++)
        for (int i = 0; i < 2; i++) host_free_pinned(r->host[ch][i]);
    free(r);
    m->cp.ctx = NULL;
}
