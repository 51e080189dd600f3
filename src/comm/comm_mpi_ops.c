/* comm_mpi_ops.c: the MPI backend's operations and the request engine that drives them.
 *
 * Every operation is a CommRequest state machine over MPI's nonblocking calls (see
 * comm_mpi.h), so blocking calls are "start + comm_wait" and obey the timeout. Algorithms:
 *  - fp32 reductions: MPI's own (MPI_Iallreduce, MPI_Ireduce_scatter[_block]);
 *  - bf16 reductions: bf16 on the wire, fp32 accumulation: an all-to-all(v) hands each rank
 *    every rank's copy of its chunk, the rank sums them in fp32 and rounds once, and an
 *    all-gather(v) distributes the chunks (reduce-scatter stops after the sum). MPI's own
 *    reduction would instead round the partial sum to bf16 at every hop;
 *  - hierarchical all-reduce: reduce-scatter inside the node, all-reduce of my chunk across
 *    nodes (one rank per node and chunk), all-gather inside the node.
 * Requests advance only when polled: comm_wait/comm_test/comm_progress poll every request in
 * flight (Open MPI's nonblocking collectives do not progress on their own). */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/bf16.h"
#include "comm/comm_mpi.h"
#include "util/clock.h"
#include "util/error.h"

static CommRequest *active_head;
static int active_count;
static const CommDeviceOps *device_ops; /* comm_device_buffers: buffers of new requests */

const CommDeviceOps *comm_device_buffers(const CommDeviceOps *ops) {
    const CommDeviceOps *prev = device_ops;
    device_ops = ops;
    return prev;
}

int comm_pending(void) { return active_count; }

size_t comm_dtype_size(CommDtype dt) { return dt == COMM_BF16 ? 2 : 4; }

/* ---------------------------------------------------------------- engine */

static CommRequest *req_new(MPI_Comm mc, int (*advance)(CommRequest *)) {
    CommRequest *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->mc = mc;
    MPI_Comm_size(mc, &r->n);
    MPI_Comm_rank(mc, &r->me);
    r->peer = -1;
    r->divisor = 1;
    r->advance = advance;
    r->dev = device_ops;
    return r;
}

/* ---- the request's buffers: host memory, or device memory that only r->dev touches ---- */

static void *buf_alloc(CommRequest *r, size_t bytes) { return r->dev ? r->dev->alloc(bytes) : malloc(bytes); }
static void buf_free(CommRequest *r, void *p) {
    if (!p) return;
    if (r->dev) r->dev->free(p);
    else free(p);
}
static void buf_copy(CommRequest *r, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    if (r->dev) r->dev->copy(dst, src, bytes);
    else memmove(dst, src, bytes);
}
/* What MPI is given for a buffer of r (MPI_IN_PLACE and NULL stay as they are). */
static void *MA(const CommRequest *r, const void *p) {
    if (!r->dev || !p || p == MPI_IN_PLACE) return (void *)p;
    return (void *)r->dev->mpi_address(p);
}

static void req_free(CommRequest *r) {
    if (!r) return;
    req_free(r->child);
    free(r->counts);
    buf_free(r, r->tmp);
    buf_free(r, r->shard);
    free(r);
}

/* Record an MPI failure of the current stage. Returns -1. */
static int stage_fail(CommRequest *r, int rc, const char *what) {
    char eb[MPI_MAX_ERROR_STRING];
    snprintf(r->err, sizeof r->err, "%s failed: %s", what, comm_mpi_errstr(rc, eb, sizeof eb));
    r->failed = 1;
    return -1;
}

static int stage_oom(CommRequest *r) {
    snprintf(r->err, sizeof r->err, "out of memory for scratch buffers");
    r->failed = 1;
    return -1;
}

/* Advance r as far as possible without blocking. 1: done, 0: pending, -1: failed (r->err). */
static int req_poll(CommRequest *r) {
    while (!r->done) {
        if (r->failed) return -1;
        if (r->child) {
            int s = req_poll(r->child);
            if (s < 0) {
                snprintf(r->err, sizeof r->err, "%s", r->child->err);
                r->failed = 1;
                return -1;
            }
            if (s == 0) return 0;
            req_free(r->child);
            r->child = NULL;
        } else if (r->nmreq) {
            int flag = 0;
            int rc = MPI_Testall(r->nmreq, r->mreq, &flag, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Testall");
            if (!flag) return 0;
            r->nmreq = 0;
        }
        if (r->advance(r) < 0) {
            r->failed = 1;
            return -1;
        }
    }
    return 1;
}

/* Split `count` into n chunks as evenly as possible (the first count % n get one more). */
static int *chunk_layout(size_t count, int n) {
    int *a = malloc(sizeof(int) * 4 * n); /* counts, displs, and two spare arrays */
    if (!a) return NULL;
    size_t base = count / n, extra = count % n, off = 0;
    for (int i = 0; i < n; i++) {
        size_t k = base + ((size_t)i < extra);
        a[i] = (int)k;
        a[n + i] = (int)off;
        off += k;
    }
    return a;
}

static MPI_Op mpi_op(CommOp op) { return op == COMM_MAX ? MPI_MAX : MPI_SUM; }

static void scale_f32(CommRequest *r, float *x, size_t n, int divisor) {
    if (divisor <= 1 || !n) return;
    float inv = 1.0f / (float)divisor;
    if (r->dev) r->dev->scale_f32(x, n, inv);
    else
        for (size_t i = 0; i < n; i++) x[i] *= inv;
}

/* out[k] = reduce over s of src[s*cnt + k], in fp32, rounded once to bf16. Works in blocks so
 * the fp32 accumulator stays in cache and the inner loops run over contiguous memory. */
static void reduce_bf16(CommRequest *r, const uint16_t *src, int nsrc, size_t cnt, CommOp op, int divisor,
                        uint16_t *out) {
    enum { BLOCK = 1024 };
    if (r->dev) { /* the same sum on the device (kernels.h dev_reduce_bf16) */
        if (cnt) r->dev->reduce_bf16(out, src, nsrc, cnt, op, divisor);
        return;
    }
    float acc[BLOCK];
    for (size_t k0 = 0; k0 < cnt; k0 += BLOCK) {
        size_t m = cnt - k0 < BLOCK ? cnt - k0 : BLOCK;
        for (size_t k = 0; k < m; k++) acc[k] = bf16_to_f32(src[k0 + k]);
        for (int s = 1; s < nsrc; s++) {
            const uint16_t *p = src + (size_t)s * cnt + k0;
            if (op == COMM_MAX)
                for (size_t k = 0; k < m; k++) {
                    float v = bf16_to_f32(p[k]);
                    acc[k] = v > acc[k] ? v : acc[k];
                }
            else
                for (size_t k = 0; k < m; k++) acc[k] += bf16_to_f32(p[k]);
        }
        if (op == COMM_AVG && divisor > 1)
            for (size_t k = 0; k < m; k++) acc[k] /= (float)divisor;
        for (size_t k = 0; k < m; k++) out[k0 + k] = f32_to_bf16(acc[k]);
    }
}

/* ------------------------------------------------ bf16 all-to-all + fp32 sum ("chunk sum") */

/* Stage shared by bf16 all-reduce and reduce-scatter: send chunk i (counts/displs) to rank i,
 * receive everyone's copy of my chunk into r->tmp. */
static int post_chunk_exchange(CommRequest *r) {
    int n = r->n, *counts = r->counts, *displs = counts + n, *rcounts = counts + 2 * n, *rdispls = counts + 3 * n;
    int mine = counts[r->me];
    for (int i = 0; i < n; i++) rcounts[i] = mine, rdispls[i] = i * mine;
    r->tmp = buf_alloc(r, (size_t)n * mine * 2 + 2);
    if (!r->tmp) return stage_oom(r);
    int equal = 1, rc;
    for (int i = 1; i < n; i++) equal &= counts[i] == counts[0];
    if (equal) /* the plain form has better algorithms in Open MPI than the v form */
        rc = MPI_Ialltoall(MA(r, r->send), mine, MPI_UINT16_T, MA(r, r->tmp), mine, MPI_UINT16_T, r->mc, &r->mreq[0]);
    else
        rc = MPI_Ialltoallv(MA(r, r->send), counts, displs, MPI_UINT16_T, MA(r, r->tmp), rcounts, rdispls, MPI_UINT16_T, r->mc,
                            &r->mreq[0]);
    if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Ialltoallv");
    r->nmreq = 1;
    return 0;
}

/* ------------------------------------------------------------ flat all-reduce */

static int advance_allreduce_f32(CommRequest *r) {
    switch (r->stage++) {
    case 0: {
        r->final_posted = 1;
        int rc = MPI_Iallreduce(r->send == r->recv ? MPI_IN_PLACE : MA(r, r->send), MA(r, r->recv), (int)r->count, MPI_FLOAT,
                                mpi_op(r->op), r->mc, &r->mreq[0]);
        if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Iallreduce");
        r->nmreq = 1;
        return 0;
    }
    default:
        if (r->op == COMM_AVG) scale_f32(r, r->recv, r->count, r->divisor);
        r->done = 1;
        return 0;
    }
}

static int advance_allreduce_bf16(CommRequest *r) {
    switch (r->stage++) {
    case 0:
        if (!(r->counts = chunk_layout(r->count, r->n))) return stage_oom(r);
        return post_chunk_exchange(r);
    case 1: {
        int *counts = r->counts, *displs = counts + r->n;
        /* the send buffer is no longer read, so writing my chunk of recv is safe even in place */
        reduce_bf16(r, r->tmp, r->n, counts[r->me], r->op, r->divisor, (uint16_t *)r->recv + displs[r->me]);
        r->final_posted = 1;
        int equal = 1, rc;
        for (int i = 1; i < r->n; i++) equal &= counts[i] == counts[0];
        if (equal)
            rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, MA(r, r->recv), counts[0], MPI_UINT16_T, r->mc,
                                &r->mreq[0]);
        else
            rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, MA(r, r->recv), counts, displs, MPI_UINT16_T, r->mc,
                                 &r->mreq[0]);
        if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Iallgatherv");
        r->nmreq = 1;
        return 0;
    }
    default:
        r->done = 1;
        return 0;
    }
}

static CommRequest *allreduce_flat(MPI_Comm mc, const void *send, void *recv, size_t count, CommDtype dt,
                                   CommOp op, int divisor) {
    CommRequest *r = req_new(mc, dt == COMM_BF16 ? advance_allreduce_bf16 : advance_allreduce_f32);
    if (!r) return NULL;
    r->send = send, r->recv = recv, r->count = count, r->dt = dt, r->op = op, r->divisor = divisor;
    return r;
}

/* --------------------------------------------------------- reduce-scatter(v) */

/* A large fp32 reduce-scatter goes to MPI in pieces. Open MPI's nonblocking reduce-scatter
 * (libnbc) reduces the whole message towards rank 0 over a binomial tree before scattering it, so
 * rank 0 writes two temporaries of the whole message and every inner rank of the tree one: at dp 4
 * a 245 MiB bucket cost rank 0 ~460 MiB more peak RSS than a leaf rank. Piece k packs the k-th
 * RS_PIECE_BYTES / n of every rank's chunk back to back in r->tmp and reduce-scatters that, one
 * piece after the other within this request (the group's later requests post after the last), so
 * the temporaries stay near RS_PIECE_BYTES (32 MiB: at dp 4 on gpt2-774m, 64 MiB left rank 0 at 0.354x the
 * one-process peak, 32 MiB within 0.35x). Every element meets the same reduction tree as in one
 * call. r->counts[2n]: the next piece; r->counts[2n + 1]: elements per rank in a piece
 * (MYRIAD_RS_PIECE_FLOATS sets it, for the tests). */
#define RS_PIECE_BYTES (32u << 20)

static int post_rs_piece(CommRequest *r) {
    int n = r->n, *next = &r->counts[2 * n], sub = r->counts[2 * n + 1];
    size_t mine = (size_t)r->counts[0], off = (size_t)*next * (size_t)sub;
    size_t len = mine - off < (size_t)sub ? mine - off : (size_t)sub;
    if (!r->tmp && !(r->tmp = buf_alloc(r, (size_t)n * (size_t)sub * sizeof(float)))) return stage_oom(r);
    for (int i = 0; i < n; i++)
        buf_copy(r, (float *)r->tmp + (size_t)i * len, (const float *)r->send + (size_t)i * mine + off, len * sizeof(float));
    (*next)++;
    r->final_posted = off + len >= mine;
    int rc = MPI_Ireduce_scatter_block(MA(r, r->tmp), MA(r, (float *)r->recv + off), (int)len, MPI_FLOAT, mpi_op(r->op),
                                       r->mc, &r->mreq[0]);
    if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Ireduce_scatter_block");
    r->nmreq = 1;
    return 0;
}

static int rs_pieces_left(const CommRequest *r) {
    int n = r->n, sub = r->counts[2 * n + 1];
    return sub > 0 && (size_t)r->counts[2 * n] * (size_t)sub < (size_t)r->counts[0];
}

/* send holds every rank's chunk back to back (r->counts); my reduced chunk goes to recv.
 * When recv lies inside send (NCCL's in-place form) the result is staged in r->shard. */
static int advance_reduce_scatter(CommRequest *r) {
    int n = r->n, *counts = r->counts;
    size_t mine = counts[r->me], esz = comm_dtype_size(r->dt);
    switch (r->stage++) {
    case 0: {
        size_t total = 0;
        r->final_posted = 1;
        for (int i = 0; i < n; i++) total += counts[i];
        const char *s = r->send, *d = r->recv;
        if (d + mine * esz > s && d < s + total * esz) {
            r->final_dst = r->recv;
            if (!(r->shard = buf_alloc(r, mine * esz + 4))) return stage_oom(r);
            r->recv = r->shard;
        }
        if (r->dt == COMM_BF16) return post_chunk_exchange(r);
        int equal = 1, rc;
        for (int i = 1; i < n; i++) equal &= counts[i] == counts[0];
        size_t sub = RS_PIECE_BYTES / sizeof(float) / (size_t)n;
        if (sub < 65536) sub = 65536;
        const char *e = getenv("MYRIAD_RS_PIECE_FLOATS"); /* tests: pieces of a few elements */
        if (e && atol(e) > 0) sub = (size_t)atol(e);
        counts[2 * n] = 0, counts[2 * n + 1] = 0;
        if (equal && n > 1 && (size_t)counts[0] > sub) {
            counts[2 * n + 1] = (int)sub;
            return post_rs_piece(r);
        }
        if (equal)
            rc = MPI_Ireduce_scatter_block(MA(r, r->send), MA(r, r->recv), counts[0], MPI_FLOAT, mpi_op(r->op), r->mc,
                                           &r->mreq[0]);
        else
            rc = MPI_Ireduce_scatter(MA(r, r->send), MA(r, r->recv), counts, MPI_FLOAT, mpi_op(r->op), r->mc, &r->mreq[0]);
        if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Ireduce_scatter");
        r->nmreq = 1;
        return 0;
    }
    default:
        if (r->dt != COMM_BF16 && rs_pieces_left(r)) return post_rs_piece(r);
        if (r->dt == COMM_BF16) reduce_bf16(r, r->tmp, n, mine, r->op, r->divisor, r->recv);
        else if (r->op == COMM_AVG) scale_f32(r, r->recv, mine, r->divisor);
        if (r->final_dst) buf_copy(r, r->final_dst, r->recv, mine * esz);
        r->done = 1;
        return 0;
    }
}

/* counts: n ints (copied). */
static CommRequest *reduce_scatter_v(MPI_Comm mc, const void *send, void *recv, const int *counts, CommDtype dt,
                                     CommOp op, int divisor) {
    CommRequest *r = req_new(mc, advance_reduce_scatter);
    if (!r) return NULL;
    if (!(r->counts = malloc(sizeof(int) * 4 * r->n))) {
        free(r);
        return NULL;
    }
    size_t off = 0;
    for (int i = 0; i < r->n; i++) r->counts[i] = counts[i], r->counts[r->n + i] = (int)off, off += counts[i];
    r->send = send, r->recv = recv, r->dt = dt, r->op = op, r->divisor = divisor;
    return r;
}

/* ------------------------------------------------------------ all-gather(v) */

static int advance_allgather(CommRequest *r) {
    if (r->stage++ > 0) {
        r->done = 1;
        return 0;
    }
    int n = r->n, *counts = r->counts, *displs = counts + n, equal = 1, rc;
    r->final_posted = 1;
    for (int i = 1; i < n; i++) equal &= counts[i] == counts[0];
    MPI_Datatype t = comm_mpi_type(r->dt);
    const char *mine = (const char *)r->recv + (size_t)displs[r->me] * comm_dtype_size(r->dt);
    const void *src = r->send == mine ? MPI_IN_PLACE : MA(r, r->send);
    if (equal)
        rc = MPI_Iallgather(src, counts[0], t, MA(r, r->recv), counts[0], t, r->mc, &r->mreq[0]);
    else
        rc = MPI_Iallgatherv(src, counts[r->me], t, MA(r, r->recv), counts, displs, t, r->mc, &r->mreq[0]);
    if (rc != MPI_SUCCESS) return stage_fail(r, rc, "MPI_Iallgather");
    r->nmreq = 1;
    return 0;
}

static CommRequest *allgather_v(MPI_Comm mc, const void *send, void *recv, const int *counts, CommDtype dt) {
    CommRequest *r = req_new(mc, advance_allgather);
    if (!r) return NULL;
    if (!(r->counts = malloc(sizeof(int) * 2 * r->n))) {
        free(r);
        return NULL;
    }
    size_t off = 0;
    for (int i = 0; i < r->n; i++) r->counts[i] = counts[i], r->counts[r->n + i] = (int)off, off += counts[i];
    r->send = send, r->recv = recv, r->dt = dt;
    return r;
}

/* --------------------------------------------------- hierarchical all-reduce */

/* A stage's child request handles the parent's kind of buffers, whatever is set now. */
static int adopt_child(CommRequest *r) {
    if (!r->child) return stage_oom(r);
    r->child->dev = r->dev;
    return 0;
}

static int advance_hier(CommRequest *r) {
    Comm *c = r->comm;
    int L;
    MPI_Comm_size(c->node, &L);
    int lr;
    MPI_Comm_rank(c->node, &lr);
    size_t esz = comm_dtype_size(r->dt);
    CommOp inner = r->op == COMM_MAX ? COMM_MAX : COMM_SUM;
    switch (r->stage++) {
    case 0: /* reduce-scatter inside the node: I own chunk lr of the node's partial sum */
        if (!(r->counts = chunk_layout(r->count, L))) return stage_oom(r);
        if (!(r->shard = buf_alloc(r, (size_t)r->counts[lr] * esz + 4))) return stage_oom(r);
        r->child = reduce_scatter_v(c->node, r->send, r->shard, r->counts, r->dt, inner, 1);
        return adopt_child(r);
    case 1: /* all-reduce my chunk across nodes (AVG divides by the whole group) */
        r->child = allreduce_flat(c->cross, r->shard, r->shard, r->counts[lr], r->dt, r->op, c->size);
        return adopt_child(r);
    case 2: /* all-gather the chunks inside the node (the child posts it right away) */
        r->final_posted = 1;
        r->child = allgather_v(c->node, r->shard, r->recv, r->counts, r->dt);
        return adopt_child(r);
    default:
        r->done = 1;
        return 0;
    }
}

/* -------------------------------------------------------- simple one-stage ops */

static int advance_single(CommRequest *r) {
    if (r->stage++ > 0) {
        r->done = 1;
        return 0;
    }
    MPI_Datatype t = comm_mpi_type(r->dt);
    int rc;
    const char *what = r->opname;
    r->final_posted = 1;
    if (!strcmp(what, "all_to_all")) {
        rc = MPI_Ialltoall(MA(r, r->tmp ? r->tmp : r->send), (int)r->count, t, MA(r, r->recv), (int)r->count, t, r->mc,
                           &r->mreq[0]);
    } else if (!strcmp(what, "all_to_all_v")) {
        int n = r->n;
        rc = MPI_Ialltoallv(MA(r, r->tmp ? r->tmp : r->send), r->counts, r->counts + n, t, MA(r, r->recv), r->counts + 2 * n,
                            r->counts + 3 * n, t, r->mc, &r->mreq[0]);
    } else if (!strcmp(what, "broadcast")) {
        rc = MPI_Ibcast(MA(r, r->recv), (int)r->count, t, r->root, r->mc, &r->mreq[0]);
    } else if (!strcmp(what, "send")) {
        rc = MPI_Isend(MA(r, r->send), (int)r->count, t, r->peer, 11, r->mc, &r->mreq[0]);
    } else if (!strcmp(what, "recv")) {
        rc = MPI_Irecv(MA(r, r->recv), (int)r->count, t, r->peer, 11, r->mc, &r->mreq[0]);
    } else {
        rc = MPI_Ibarrier(r->mc, &r->mreq[0]);
    }
    if (rc != MPI_SUCCESS) return stage_fail(r, rc, what);
    r->nmreq = 1;
    return 0;
}

/* ----------------------------------------------------- top-level bookkeeping */

static CommRequest *active_tail;

/* In flight, oldest first: progress loops poll in creation order, so a request leaving the
 * head of its group's posting queue lets the next one post in the same pass. */
static void active_link(CommRequest *r) {
    r->prev_active = active_tail;
    r->next_active = NULL;
    if (active_tail) active_tail->next_active = r;
    else active_head = r;
    active_tail = r;
    active_count++;
}

static void queue_remove(CommRequest *r) {
    if (!r->queued) return;
    Comm *c = r->comm;
    CommRequest **p = &c->post_head, *prev = NULL;
    while (*p && *p != r) prev = *p, p = &(*p)->next_post;
    if (*p) *p = r->next_post;
    if (c->post_tail == r) c->post_tail = prev;
    r->queued = 0;
}

/* Poll a top-level request, respecting its group's posting order. */
static int top_poll(CommRequest *r) {
    if (r->queued && r->comm->post_head != r) return 0; /* an older request is still posting */
    int s = req_poll(r);
    if (r->queued && (r->final_posted || s != 0)) queue_remove(r);
    return s;
}

static void active_unlink(CommRequest *r) {
    queue_remove(r);
    if (r->prev_active) r->prev_active->next_active = r->next_active;
    else if (active_head == r) active_head = r->next_active;
    if (r->next_active) r->next_active->prev_active = r->prev_active;
    else if (active_tail == r) active_tail = r->prev_active;
    r->prev_active = r->next_active = NULL;
    active_count--;
}

/* Report r's failure as the current error, naming op, sequence number, group and rank. */
static int req_report(CommRequest *r) {
    char label[64];
    if (r->seq) snprintf(label, sizeof label, "%s #%lld", r->opname, (long long)r->seq);
    else snprintf(label, sizeof label, "%s (peer rank %d)", r->opname, r->peer);
    return comm_fail(r->comm, label, "%s", r->err);
}

static int check_comm(Comm *c, const char *opname) {
    if (!c) return comm_fail(NULL, opname, "no group (call comm_init first)");
    return 0;
}

static int check_count(Comm *c, const char *opname, size_t count, size_t factor) {
    if (count > INT_MAX || (factor > 1 && count > (size_t)INT_MAX / factor))
        return comm_fail(c, opname, "count %zu is too large for one message (max %d elements); split it", count,
                         INT_MAX / (int)(factor ? factor : 1));
    return 0;
}

static int check_dt_op(Comm *c, const char *opname, CommDtype dt, int op) {
    if (dt != COMM_F32 && dt != COMM_BF16) return comm_fail(c, opname, "unknown dtype %d", (int)dt);
    if (op < 0 || op > COMM_MAX) return comm_fail(c, opname, "unknown reduction %d", op);
    return 0;
}

/* Give r its identity, start it (post the first stage) and track it. */
static int launch(Comm *c, const char *opname, int collective, CommRequest *r, CommRequest **out) {
    *out = NULL;
    if (!r) return comm_fail(c, opname, "out of memory");
    r->comm = c;
    r->opname = opname;
    if (collective) r->seq = ++c->seq;
    /* the deadline is when to start asking who is missing, so the report lands at the timeout */
    double t = comm_opts.timeout_s;
    r->deadline = t > 0 ? MPI_Wtime() + t - comm_watch_grace(t) : 0;
    if (collective) { /* join the group's posting queue */
        r->queued = 1;
        if (c->post_tail) c->post_tail->next_post = r;
        else c->post_head = r;
        c->post_tail = r;
    }
    if (top_poll(r) < 0) {
        req_report(r);
        queue_remove(r);
        req_free(r);
        return -1;
    }
    active_link(r);
    *out = r;
    return 0;
}

/* ------------------------------------------------------------ progress */

/* Fail r with a timeout report if it is past its deadline. */
static int still_pending(CommRequest *r) { return !r->failed && top_poll(r) == 0; }

static int check_deadline(CommRequest *r, double now) {
    if (r->done || r->failed || !r->deadline || now < r->deadline) return 0;
    char report[sizeof r->err];
    if (!comm_watch_report(r, still_pending, report, sizeof report)) return r->failed ? -1 : 0;
    if (r->failed) return -1; /* failed otherwise while we asked: report that instead */
    memcpy(r->err, report, sizeof report);
    r->failed = 2; /* timed out: MPI may still write its buffers, so they are never freed */
    return -1;
}

/* The CPU (and wall) time of a poll, counted as waiting: a poll advances the collectives in
 * flight, and their stages do the reductions and copies of the algorithm (a tree's inner ranks
 * sum more than its leaves), which is communication work, not the caller's computing; counted as
 * the caller's, it made ranks 0 and 2 of a 4-rank job 1.2x slower in backward than ranks 1 and 3
 * (bench/straggler_results.md). No clock is read when nothing is in flight. */
typedef struct {
    double wall, cpu;
} PollMark;

static PollMark poll_begin(void) { return active_head ? (PollMark){clock_wall_s(), clock_thread_cpu_s()} : (PollMark){0, 0}; }

static void poll_end(PollMark m) {
    if (m.wall > 0) comm_count_wait(clock_wall_s() - m.wall, clock_thread_cpu_s() - m.cpu);
}

static int progress_all(void) {
    int rc = 0;
    double now = MPI_Wtime();
    for (CommRequest *r = active_head; r; r = r->next_active) {
        if (r->failed) continue;
        if (top_poll(r) < 0 || check_deadline(r, now) < 0) {
            if (rc == 0) req_report(r);
            rc = -1;
        }
    }
    comm_watch_serve();
    return rc;
}

int comm_progress(void) {
    PollMark m = poll_begin();
    int rc = progress_all();
    poll_end(m);
    return rc;
}

static int finish(CommRequest **rp) {
    CommRequest *r = *rp;
    *rp = NULL;
    active_unlink(r);
    int rc = 0;
    if (r->failed) rc = req_report(r);
    if (r->failed != 2) req_free(r);
    return rc;
}

static int test_one(CommRequest **rp, int *done) {
    *done = 0;
    CommRequest *r = *rp;
    if (!r) {
        *done = 1;
        return 0;
    }
    /* older requests first: r may be waiting for one of them to finish posting */
    for (CommRequest *q = active_head; q && q != r; q = q->next_active)
        if (!q->failed) top_poll(q);
    int s = r->failed ? -1 : top_poll(r);
    comm_watch_serve();
    if (s == 0 && check_deadline(r, MPI_Wtime()) == 0) return 0;
    *done = 1;
    return finish(rp);
}

int comm_test(CommRequest **rp, int *done) {
    PollMark m = poll_begin();
    int rc = test_one(rp, done);
    poll_end(m);
    return rc;
}

/* wall and CPU seconds this thread has spent waiting in comm_wait: the exposed communication of
 * step timings (a request already complete at its first poll costs no clock reads) */
static _Thread_local double waited_s, waited_cpu_s;

double comm_wait_seconds(void) { return waited_s; }
double comm_wait_cpu_seconds(void) { return waited_cpu_s; }
void comm_count_wait(double wall_s, double cpu_s) { waited_s += wall_s, waited_cpu_s += cpu_s; }

int comm_wait(CommRequest **rp) {
    CommRequest *r = *rp;
    if (!r) return 0;
    double t0 = 0, c0 = 0;
    for (unsigned spins = 1;; spins++) {
        /* poll everything in flight, oldest first: other requests' next stages are posted only
         * when polled, and an older request of the group may be holding r's turn to post */
        for (CommRequest *q = active_head; q; q = q->next_active)
            if (q != r && !q->failed) top_poll(q);
        int s = r->failed ? -1 : top_poll(r);
        if (s != 0) break;
        if (spins == 1) t0 = clock_wall_s(), c0 = clock_thread_cpu_s(); /* it has to wait */
        if ((spins & 63) == 0) {
            comm_watch_serve();
            if (check_deadline(r, MPI_Wtime()) < 0) break;
        }
        /* ranks often outnumber cores (tests, oversubscribed nodes): let the others run */
        if (spins > 32) sched_yield();
    }
    if (t0 > 0) waited_s += clock_wall_s() - t0, waited_cpu_s += clock_thread_cpu_s() - c0;
    return finish(rp);
}

/* ------------------------------------------------------------ algorithm choice */

static CommAlgo forced_algo = COMM_ALGO_AUTO;
static int forced_set;

void comm_set_algo(CommAlgo algo) {
    forced_algo = algo;
    forced_set = 1;
}

/* Smallest all-reduce for which auto picks the hierarchical algorithm: below it the three
 * extra latency-bound steps cost more than the cross-node bytes they save. */
#define HIER_MIN_BYTES (256 * 1024)

CommAlgo comm_allreduce_algo(const Comm *c, size_t count, CommDtype dt) {
    CommAlgo a = forced_set ? forced_algo : comm_opts.algo;
    if (a != COMM_ALGO_AUTO) return a;
    if (c->nnodes > 1 && c->local_size > 1 && count * comm_dtype_size(dt) >= HIER_MIN_BYTES) return COMM_ALGO_HIER;
    return COMM_ALGO_MPI;
}

/* ------------------------------------------------------------ public ops */

int comm_iall_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op,
                     CommRequest **req) {
    const char *name = "all_reduce";
    if (check_comm(c, name) || check_dt_op(c, name, dt, op) || check_count(c, name, count, 1)) return -1;
    CommRequest *r;
    if (comm_allreduce_algo(c, count, dt) == COMM_ALGO_HIER) {
        if (c->local_size == 0)
            return comm_fail(c, name, "the hierarchical algorithm needs the same number of group members on every "
                                      "node; use --comm-algo mpi or auto");
        r = req_new(c->mpi, advance_hier);
        if (r) r->comm = c, r->send = send, r->recv = recv, r->count = count, r->dt = dt, r->op = op;
    } else {
        r = allreduce_flat(c->mpi, send, recv, count, dt, op, c->size);
    }
    return launch(c, name, 1, r, req);
}

int comm_ireduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op,
                         CommRequest **req) {
    const char *name = "reduce_scatter";
    if (check_comm(c, name) || check_dt_op(c, name, dt, op) || check_count(c, name, recvcount, c->size)) return -1;
    int *counts = malloc(sizeof(int) * c->size);
    if (!counts) return comm_fail(c, name, "out of memory");
    for (int i = 0; i < c->size; i++) counts[i] = (int)recvcount;
    CommRequest *r = reduce_scatter_v(c->mpi, send, recv, counts, dt, op, c->size);
    free(counts);
    return launch(c, name, 1, r, req);
}

int comm_iall_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt, CommRequest **req) {
    const char *name = "all_gather";
    if (check_comm(c, name) || check_dt_op(c, name, dt, 0) || check_count(c, name, sendcount, c->size)) return -1;
    int *counts = malloc(sizeof(int) * c->size);
    if (!counts) return comm_fail(c, name, "out of memory");
    for (int i = 0; i < c->size; i++) counts[i] = (int)sendcount;
    CommRequest *r = allgather_v(c->mpi, send, recv, counts, dt);
    free(counts);
    return launch(c, name, 1, r, req);
}

int comm_iall_to_all(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommRequest **req) {
    const char *name = "all_to_all";
    if (check_comm(c, name) || check_dt_op(c, name, dt, 0) || check_count(c, name, count, c->size)) return -1;
    CommRequest *r = req_new(c->mpi, advance_single);
    if (!r) return comm_fail(c, name, "out of memory");
    r->opname = name, r->send = send, r->recv = recv, r->count = count, r->dt = dt;
    if (send == recv) { /* MPI's in-place all-to-all is not nonblocking everywhere: stage a copy */
        size_t bytes = count * c->size * comm_dtype_size(dt);
        if (!(r->tmp = buf_alloc(r, bytes + 1))) {
            free(r);
            return comm_fail(c, name, "out of memory");
        }
        buf_copy(r, r->tmp, send, bytes);
    }
    return launch(c, name, 1, r, req);
}

int comm_iall_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                       const size_t *recvcounts, const size_t *rdispls, CommDtype dt, CommRequest **req) {
    const char *name = "all_to_all_v";
    if (check_comm(c, name) || check_dt_op(c, name, dt, 0)) return -1;
    int n = c->size;
    size_t send_extent = 0;
    for (int i = 0; i < n; i++) {
        if (check_count(c, name, sendcounts[i] + sdispls[i], 1) || check_count(c, name, recvcounts[i] + rdispls[i], 1))
            return -1;
        if (sendcounts[i] + sdispls[i] > send_extent) send_extent = sendcounts[i] + sdispls[i];
    }
    CommRequest *r = req_new(c->mpi, advance_single);
    if (!r || !(r->counts = malloc(sizeof(int) * 4 * n))) {
        free(r);
        return comm_fail(c, name, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        r->counts[i] = (int)sendcounts[i], r->counts[n + i] = (int)sdispls[i];
        r->counts[2 * n + i] = (int)recvcounts[i], r->counts[3 * n + i] = (int)rdispls[i];
    }
    r->opname = name, r->send = send, r->recv = recv, r->dt = dt;
    if (send == recv) {
        size_t bytes = send_extent * comm_dtype_size(dt);
        if (!(r->tmp = buf_alloc(r, bytes + 1))) {
            req_free(r);
            return comm_fail(c, name, "out of memory");
        }
        buf_copy(r, r->tmp, send, bytes);
    }
    return launch(c, name, 1, r, req);
}

int comm_ibroadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root, CommRequest **req) {
    const char *name = "broadcast";
    if (check_comm(c, name) || check_dt_op(c, name, dt, 0) || check_count(c, name, count, 1)) return -1;
    if (root < 0 || root >= c->size) return comm_fail(c, name, "root %d is outside 0..%d", root, c->size - 1);
    CommRequest *r = req_new(c->mpi, advance_single);
    if (!r) return comm_fail(c, name, "out of memory");
    r->opname = name, r->recv = recv, r->count = count, r->dt = dt, r->root = root;
    if (c->rank == root && send && send != recv) buf_copy(r, recv, send, count * comm_dtype_size(dt));
    return launch(c, name, 1, r, req);
}

static int p2p(Comm *c, const char *name, const void *send, void *recv, size_t count, CommDtype dt, int peer,
               CommRequest **req) {
    if (check_comm(c, name) || check_dt_op(c, name, dt, 0) || check_count(c, name, count, 1)) return -1;
    if (peer < 0 || peer >= c->size) return comm_fail(c, name, "peer %d is outside 0..%d", peer, c->size - 1);
    CommRequest *r = req_new(c->mpi, advance_single);
    if (!r) return comm_fail(c, name, "out of memory");
    r->opname = name, r->send = send, r->recv = recv, r->count = count, r->dt = dt, r->peer = peer;
    return launch(c, name, 0, r, req);
}

int comm_isend(Comm *c, const void *buf, size_t count, CommDtype dt, int peer, CommRequest **req) {
    return p2p(c, "send", buf, NULL, count, dt, peer, req);
}

int comm_irecv(Comm *c, void *buf, size_t count, CommDtype dt, int peer, CommRequest **req) {
    return p2p(c, "recv", NULL, buf, count, dt, peer, req);
}

int comm_ibarrier(Comm *c, CommRequest **req) {
    const char *name = "barrier";
    if (check_comm(c, name)) return -1;
    CommRequest *r = req_new(c->mpi, advance_single);
    if (!r) return comm_fail(c, name, "out of memory");
    r->opname = name;
    return launch(c, name, 1, r, req);
}

/* ------------------------------------------------------------ blocking forms */

#define BLOCKING(call)                 \
    do {                               \
        CommRequest *req_;             \
        if ((call) < 0) return -1;     \
        return comm_wait(&req_);       \
    } while (0)

int comm_all_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op) {
    BLOCKING(comm_iall_reduce(c, send, recv, count, dt, op, &req_));
}
int comm_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op) {
    BLOCKING(comm_ireduce_scatter(c, send, recv, recvcount, dt, op, &req_));
}
int comm_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt) {
    BLOCKING(comm_iall_gather(c, send, recv, sendcount, dt, &req_));
}
int comm_all_to_all(Comm *c, const void *send, void *recv, size_t count, CommDtype dt) {
    BLOCKING(comm_iall_to_all(c, send, recv, count, dt, &req_));
}
int comm_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                      const size_t *recvcounts, const size_t *rdispls, CommDtype dt) {
    BLOCKING(comm_iall_to_all_v(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt, &req_));
}
int comm_broadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root) {
    BLOCKING(comm_ibroadcast(c, send, recv, count, dt, root, &req_));
}
int comm_send(Comm *c, const void *buf, size_t count, CommDtype dt, int peer) {
    BLOCKING(comm_isend(c, buf, count, dt, peer, &req_));
}
int comm_recv(Comm *c, void *buf, size_t count, CommDtype dt, int peer) {
    BLOCKING(comm_irecv(c, buf, count, dt, peer, &req_));
}
int comm_barrier(Comm *c) { BLOCKING(comm_ibarrier(c, &req_)); }
