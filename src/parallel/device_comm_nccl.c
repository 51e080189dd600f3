/* device_comm_nccl.c: the NCCL transport of device_comm.h.
 *
 * Communicators: one per comm group, made at the group's first NCCL operation (collective over
 * the group, as every operation is): rank 0 of the group calls ncclGetUniqueId, the id goes to the
 * others by an MPI broadcast over the group, and every member calls ncclCommInitRank. The
 * communicator is the group's attachment (comm_set_attachment), destroyed with the group.
 *
 * Ordering: an operation records `ready` on the compute stream and makes the communication stream
 * wait for it (so NCCL reads what the kernels queued before it wrote), queues NCCL's calls on the
 * communication stream, and records its own `done` event after them. The blocking form makes the
 * compute stream wait for `done` (no host synchronisation: later kernels simply queue behind it);
 * the nonblocking form leaves the compute stream free, so a gradient bucket's reduction overlaps
 * the rest of the backward, until dcomm_wait/dcomm_test find `done` complete and order the compute
 * stream after it.
 *
 * Failures: a failing NCCL call is reported at once (its error string and NCCL's last error).
 * A host wait watches the clock like the MPI requests do: collectives count on the group's
 * sequence (comm_count_collective), the rank answers arrival queries while it waits, and at the
 * deadline it asks the others where they are (comm_report_missing), so the report names the
 * ranks that have not arrived; then the communicator is aborted (ncclCommAbort: kernels stuck
 * waiting for a peer exit) and the call fails with comm.h's one line, which the CLI turns into
 * exit 1. A watchdog thread covers what a host wait cannot: a blocking operation (the host never
 * waits for it) or a host stuck in a device synchronisation behind a hung collective. Every 50 ms
 * it polls NCCL's asynchronous error of each communicator in use and the `done` event of each
 * operation in flight; on an asynchronous error, or an operation still pending two grace periods
 * after its timeout (after the host's own report would have come), it aborts the communicator,
 * prints the one line and ends the process with exit 1, as PyTorch's NCCL watchdog does. */
#define _GNU_SOURCE
#include "parallel/device_comm_nccl.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/nccl_lib.h"
#include "kernels/kernels.h"
#include "util/clock.h"
#include "util/error.h"

typedef struct NcclGroup {
    NcclComm comm;
    Comm *group;
    int aborted;
    struct NcclGroup *next; /* every communicator made, for the watchdog */
} NcclGroup;

struct DncclOp {
    NcclGroup *g;
    const char *opname;
    int64_t seq;        /* collective number on the group; 0 for point-to-point */
    int peer;           /* point-to-point peer, else -1 */
    DevEvent *done;     /* recorded after the NCCL calls (at the group's end inside a group) */
    double start;       /* wall clock */
    void *scratch;      /* device memory the operation owns (an in-place all-to-all's copy) */
    int released;       /* the caller let go (blocking form): freed once done */
    int finished;       /* done seen by the watchdog */
    DncclOp *next, *group_next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* ops, groups: shared with the watchdog */
static DncclOp *ops;          /* every operation not yet freed */
static NcclGroup *groups;
static DncclOp *in_group;     /* operations of the open dnccl_group_start, awaiting their `done` */
static int group_depth;
static DevEvent *ready;       /* reused: a stream wait takes the event's state when it is called */
static DevEvent **event_pool;
static size_t nevent_pool, event_pool_cap;
static pthread_t watchdog_thread;
static int watchdog_started;

static double now_s(void) { return clock_wall_s(); }

int dnccl_setup(char *why, size_t why_size) {
    if (nccl_load()) return snprintf(why, why_size, "%s", myr_last_error()), -1;
    int cuda = !strcmp(kernels_device(), "cuda");
    if (cuda && nccl_is_emulation())
        return snprintf(why, why_size, "%s is myriad's NCCL emulation, which moves CPU memory; unset MYRIAD_NCCL_LIB "
                        "on a GPU", nccl_library()), -1;
    if (!cuda && !nccl_is_emulation())
        return snprintf(why, why_size, "NCCL moves GPU memory and this run's device is the CPU: use --device cuda, or "
                        "--comm mpi (tests: MYRIAD_NCCL_LIB=build/tests/libnccl-emu.so)"), -1;
    if (!dev_transport_capable())
        return snprintf(why, why_size, "MYRIAD_DEVICE_GUARD=1 closes device memory between kernel calls, so NCCL cannot "
                        "be handed it; rehearse NCCL under MYRIAD_DEVICE_GUARD=strict"), -1;
    if (cuda && comm_is_initialized()) { /* kernels_select put rank r on GPU local_rank % visible */
        DeviceInfo d;
        int local = comm_local_size(comm_world());
        if (kernels_device_info(&d) == 0 && local > d.count)
            return snprintf(why, why_size, "%d ranks on this node share %d GPU%s, and NCCL needs a GPU of its own for "
                            "each rank of a communicator: launch at most %d ranks per node, or use --comm mpi", local,
                            d.count, d.count == 1 ? "" : "s", d.count), -1;
    }
    if (nccl_version() < 21000)
        return snprintf(why, why_size, "%s is NCCL %d; myriad needs 2.10 or newer (ncclAvg)", nccl_library(),
                        nccl_version()), -1;
    return 0;
}

/* ---- events ---- */

static DevEvent *event_get(void) {
    if (nevent_pool) return event_pool[--nevent_pool];
    return dev_event_create();
}

static void event_put(DevEvent *e) {
    if (!e) return;
    if (nevent_pool == event_pool_cap) {
        event_pool_cap = event_pool_cap ? 2 * event_pool_cap : 16;
        event_pool = realloc(event_pool, event_pool_cap * sizeof *event_pool);
    }
    event_pool[nevent_pool++] = e;
}

/* ---- failures ---- */

static const char *nccl_says(NcclGroup *g, NcclResult r, char *buf, size_t cap) {
    const char *last = g && nccl.GetLastError ? nccl.GetLastError(g->comm) : NULL;
    snprintf(buf, cap, "%s%s%s", nccl.GetErrorString(r), last && *last ? ": " : "", last && *last ? last : "");
    return buf;
}

static void label(const DncclOp *op, char *buf, size_t cap) {
    if (op->seq) snprintf(buf, cap, "%s #%lld", op->opname, (long long)op->seq);
    else snprintf(buf, cap, "%s (peer rank %d)", op->opname, op->peer);
}

static void abort_group(NcclGroup *g) {
    if (g->aborted) return;
    g->aborted = 1;
    nccl.CommAbort(g->comm);
}

/* ---- the watchdog ---- */

static void fire(DncclOp *op, const char *what) {
    char l[96];
    label(op, l, sizeof l);
    Comm *c = op->g->group;
    abort_group(op->g);
    fprintf(stderr, "myriad: comm: %s on group '%s' (rank %d of %d, world rank %d): %s; the NCCL communicator was "
            "aborted (watchdog)\n", l, comm_name(c), comm_rank(c), comm_size(c), comm_world_rank_of(c, comm_rank(c)),
            what);
    fflush(stderr);
    _exit(1); /* the main thread may be blocked behind the hung operation: exit from here */
}

static void *watchdog(void *arg) {
    (void)arg;
    struct timespec tick = {0, 50 * 1000 * 1000};
    for (;;) {
        nanosleep(&tick, NULL);
        pthread_mutex_lock(&lock);
        double timeout = comm_timeout_seconds(), now = now_s(), grace = comm_query_grace(timeout);
        for (NcclGroup *g = groups; g; g = g->next) {
            NcclResult r = NCCL_SUCCESS;
            if (g->aborted || nccl.CommGetAsyncError(g->comm, &r) != NCCL_SUCCESS) continue;
            if (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS) continue;
            for (DncclOp *op = ops; op; op = op->next)
                if (op->g == g && !op->finished) {
                    char what[512], b[300];
                    snprintf(what, sizeof what, "NCCL reported an asynchronous error: %s", nccl_says(g, r, b, sizeof b));
                    fire(op, what);
                }
        }
        for (DncclOp *op = ops; op; op = op->next) {
            if (op->finished || !op->done || op->g->aborted) continue;
            if (dev_event_query(op->done)) {
                op->finished = 1;
                continue;
            }
            if (timeout > 0 && now > op->start + timeout + 2 * grace) {
                char what[256];
                snprintf(what, sizeof what, "did not complete within %g s (the host was not waiting for it, or was "
                         "blocked behind it)", timeout);
                fire(op, what);
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

/* ---- operations ---- */

static void op_free(DncclOp *op) {
    pthread_mutex_lock(&lock);
    for (DncclOp **p = &ops; *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    event_put(op->done);
    dev_free(op->scratch);
    free(op);
}

/* Free the blocking operations that have completed (their events polled here, on the main thread). */
static void sweep(void) {
    for (;;) {
        DncclOp *found = NULL;
        pthread_mutex_lock(&lock);
        for (DncclOp *op = ops; op && !found; op = op->next)
            if (op->released && op->done && (op->finished || dev_event_query(op->done))) found = op;
        pthread_mutex_unlock(&lock);
        if (!found) return;
        op_free(found);
    }
}

static void destroy_group(void *p) {
    NcclGroup *g = p;
    for (;;) { /* its blocking operations not yet swept: done by now unless it was aborted */
        DncclOp *found = NULL;
        pthread_mutex_lock(&lock);
        for (DncclOp *op = ops; op && !found; op = op->next)
            if (op->g == g) found = op;
        pthread_mutex_unlock(&lock);
        if (!found) break;
        if (found->done && !g->aborted) dev_event_sync(found->done);
        op_free(found);
    }
    pthread_mutex_lock(&lock);
    for (NcclGroup **q = &groups; *q; q = &(*q)->next)
        if (*q == g) {
            *q = g->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (!g->aborted) nccl.CommDestroy(g->comm);
    free(g);
}

/* The group's communicator, made now if this is its first operation (collective over it). */
static NcclGroup *group_of(Comm *c, const char *opname) {
    NcclGroup *g = comm_attachment(c);
    if (g) {
        if (g->aborted) return comm_error(c, opname, "the NCCL communicator was aborted after an earlier failure"), NULL;
        return g;
    }
    struct {
        int32_t ok;
        NcclUniqueId id;
    } boot;
    memset(&boot, 0, sizeof boot);
    char b[300];
    if (comm_rank(c) == 0) {
        NcclResult r = nccl.GetUniqueId(&boot.id);
        boot.ok = r == NCCL_SUCCESS;
        if (!boot.ok) comm_error(c, "nccl setup", "ncclGetUniqueId failed: %s", nccl_says(NULL, r, b, sizeof b));
    }
    /* the id travels as 16-bit words (bit patterns, never arithmetic) */
    if (comm_broadcast(c, &boot, &boot, sizeof boot / 2, COMM_BF16, 0)) return NULL;
    if (!boot.ok) {
        if (comm_rank(c) != 0) comm_error(c, "nccl setup", "rank 0 of the group could not make an NCCL id");
        return NULL;
    }
    g = calloc(1, sizeof *g);
    g->group = c;
    NcclResult r = nccl.CommInitRank(&g->comm, comm_size(c), boot.id, comm_rank(c));
    if (r != NCCL_SUCCESS) {
        free(g);
        return comm_error(c, "nccl setup", "ncclCommInitRank failed: %s", nccl_says(NULL, r, b, sizeof b)), NULL;
    }
    pthread_mutex_lock(&lock);
    g->next = groups;
    groups = g;
    pthread_mutex_unlock(&lock);
    comm_set_attachment(c, g, destroy_group);
    if (!watchdog_started) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&watchdog_thread, &at, watchdog, NULL) == 0) watchdog_started = 1;
        pthread_attr_destroy(&at);
    }
    return g;
}

/* Start an operation: its communicator, its identity, and the communication stream ordered after
 * the compute stream's work so far. */
static DncclOp *op_begin(Comm *c, const char *opname, int collective, int peer) {
    sweep();
    NcclGroup *g = group_of(c, opname);
    if (!g) return NULL;
    DncclOp *op = calloc(1, sizeof *op);
    op->g = g;
    op->opname = opname;
    op->seq = collective ? comm_count_collective(c) : 0;
    op->peer = peer;
    op->start = now_s();
    if (!ready) ready = dev_event_create();
    dev_event_record(ready, STREAM_COMPUTE);
    dev_stream_wait_event(STREAM_COMM, ready);
    return op;
}

/* The NCCL calls are queued: record `done` (at the group's end when a group is open). */
static DncclOp *op_end(DncclOp *op, NcclResult r, const char *call) {
    if (r != NCCL_SUCCESS) {
        char l[96], b[300];
        label(op, l, sizeof l);
        comm_error(op->g->group, l, "%s failed: %s", call, nccl_says(op->g, r, b, sizeof b));
        abort_group(op->g);
        dev_free(op->scratch);
        free(op);
        return NULL;
    }
    if (group_depth) {
        op->group_next = in_group;
        in_group = op;
    } else {
        op->done = event_get();
        dev_event_record(op->done, STREAM_COMM);
    }
    pthread_mutex_lock(&lock);
    op->next = ops;
    ops = op;
    pthread_mutex_unlock(&lock);
    return op;
}

static NcclDataType nccl_type(CommDtype dt) { return dt == COMM_BF16 ? NCCL_BFLOAT16 : NCCL_FLOAT32; }
static NcclRedOp nccl_op(CommOp op) { return op == COMM_AVG ? NCCL_AVG : op == COMM_MAX ? NCCL_MAX : NCCL_SUM; }
static void *A(const void *p) { return dev_transport_address(p); }
static void *S(void) { return dev_stream_handle(STREAM_COMM); }

DncclOp *dnccl_all_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op) {
    DncclOp *o = op_begin(c, "all_reduce", 1, -1);
    if (!o) return NULL;
    return op_end(o, nccl.AllReduce(A(send), A(recv), count, nccl_type(dt), nccl_op(op), o->g->comm, S()),
                  "ncclAllReduce");
}

DncclOp *dnccl_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op) {
    DncclOp *o = op_begin(c, "reduce_scatter", 1, -1);
    if (!o) return NULL;
    return op_end(o, nccl.ReduceScatter(A(send), A(recv), recvcount, nccl_type(dt), nccl_op(op), o->g->comm, S()),
                  "ncclReduceScatter");
}

DncclOp *dnccl_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt) {
    DncclOp *o = op_begin(c, "all_gather", 1, -1);
    if (!o) return NULL;
    return op_end(o, nccl.AllGather(A(send), A(recv), sendcount, nccl_type(dt), o->g->comm, S()), "ncclAllGather");
}

DncclOp *dnccl_broadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root) {
    if (root < 0 || root >= comm_size(c))
        return comm_error(c, "broadcast", "root %d is outside 0..%d", root, comm_size(c) - 1), NULL;
    DncclOp *o = op_begin(c, "broadcast", 1, -1);
    if (!o) return NULL;
    return op_end(o, nccl.Broadcast(A(send ? send : recv), A(recv), count, nccl_type(dt), root, o->g->comm, S()),
                  "ncclBroadcast");
}

/* NCCL has no all-to-all-v: grouped sends and receives, one pair per peer (blocks of zero skipped). */
DncclOp *dnccl_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                            const size_t *recvcounts, const size_t *rdispls, CommDtype dt) {
    int P = comm_size(c);
    size_t es = comm_dtype_size(dt), extent = 0;
    for (int p = 0; p < P; p++)
        if (sdispls[p] + sendcounts[p] > extent) extent = sdispls[p] + sendcounts[p];
    void *scratch = NULL;
    if (send == recv && extent) { /* in place: the sends read a copy */
        scratch = dev_alloc_bytes(extent * es);
        dev_to_dev(scratch, send, extent * es);
        send = scratch;
    }
    DncclOp *o = op_begin(c, "all_to_all_v", 1, -1);
    if (!o) return dev_free(scratch), NULL;
    o->scratch = scratch;
    NcclResult r = nccl.GroupStart();
    const char *call = "ncclGroupStart";
    for (int p = 0; p < P && r == NCCL_SUCCESS; p++) {
        if (sendcounts[p])
            r = nccl.Send(A((const char *)send + sdispls[p] * es), sendcounts[p], nccl_type(dt), p, o->g->comm, S()),
            call = "ncclSend";
        if (r == NCCL_SUCCESS && recvcounts[p])
            r = nccl.Recv(A((char *)recv + rdispls[p] * es), recvcounts[p], nccl_type(dt), p, o->g->comm, S()),
            call = "ncclRecv";
    }
    NcclResult e = nccl.GroupEnd();
    if (r == NCCL_SUCCESS) r = e, call = "ncclGroupEnd";
    return op_end(o, r, call);
}

static DncclOp *p2p(Comm *c, const char *name, const void *send, void *recv, size_t count, CommDtype dt, int peer) {
    if (peer < 0 || peer >= comm_size(c))
        return comm_error(c, name, "peer %d is outside 0..%d", peer, comm_size(c) - 1), NULL;
    DncclOp *o = op_begin(c, name, 0, peer);
    if (!o) return NULL;
    if (send) return op_end(o, nccl.Send(A(send), count, nccl_type(dt), peer, o->g->comm, S()), "ncclSend");
    return op_end(o, nccl.Recv(A(recv), count, nccl_type(dt), peer, o->g->comm, S()), "ncclRecv");
}

DncclOp *dnccl_send(Comm *c, const void *buf, size_t count, CommDtype dt, int peer) {
    return p2p(c, "send", buf, NULL, count, dt, peer);
}
DncclOp *dnccl_recv(Comm *c, void *buf, size_t count, CommDtype dt, int peer) {
    return p2p(c, "recv", NULL, buf, count, dt, peer);
}

int dnccl_group_start(void) {
    NcclResult r = nccl.GroupStart();
    if (r != NCCL_SUCCESS) {
        char b[300];
        return myr_error("comm: ncclGroupStart failed: %s", nccl_says(NULL, r, b, sizeof b));
    }
    group_depth++;
    return 0;
}

int dnccl_group_end(void) {
    if (group_depth <= 0) return myr_error("comm: dcomm_group_end without dcomm_group_start");
    NcclResult r = nccl.GroupEnd();
    if (--group_depth > 0) return r == NCCL_SUCCESS ? 0 : myr_error("comm: ncclGroupEnd failed");
    DncclOp *list = in_group;
    in_group = NULL;
    for (DncclOp *op = list; op; op = op->group_next) { /* the group's work is queued now */
        DevEvent *e = event_get();
        dev_event_record(e, STREAM_COMM);
        pthread_mutex_lock(&lock);
        op->done = e;
        pthread_mutex_unlock(&lock);
    }
    if (r != NCCL_SUCCESS) {
        char b[300];
        for (DncclOp *op = list; op; op = op->group_next) abort_group(op->g);
        return myr_error("comm: ncclGroupEnd failed: %s", nccl_says(list ? list->g : NULL, r, b, sizeof b));
    }
    return 0;
}

/* An asynchronous error on op's communicator, reported as op's failure (-1), else 0. */
static int check_async(DncclOp *op) {
    NcclResult r = NCCL_SUCCESS;
    if (nccl.CommGetAsyncError(op->g->comm, &r) != NCCL_SUCCESS || r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS)
        return 0;
    char l[96], b[300];
    label(op, l, sizeof l);
    comm_error(op->g->group, l, "NCCL reported an asynchronous error: %s", nccl_says(op->g, r, b, sizeof b));
    abort_group(op->g);
    return -1;
}

int dnccl_run(DncclOp *op) {
    if (!op) return -1;
    if (!op->done) {
        op_free(op);
        return myr_error("internal: a blocking NCCL operation inside dcomm_group_start/dcomm_group_end");
    }
    dev_stream_wait_event(STREAM_COMPUTE, op->done);
    pthread_mutex_lock(&lock);
    op->released = 1; /* freed by a later sweep, once done; the watchdog watches it meanwhile */
    pthread_mutex_unlock(&lock);
    return 0;
}

static int still_pending(void *arg) { return !dev_event_query(((DncclOp *)arg)->done); }

int dnccl_wait(DncclOp *op) {
    if (!op->done) {
        op_free(op);
        return myr_error("internal: dcomm_wait on an NCCL operation before dcomm_group_end");
    }
    double timeout = comm_timeout_seconds(), t0 = 0, c0 = 0;
    double deadline = timeout > 0 ? op->start + timeout - comm_query_grace(timeout) : 0;
    int rc = 0;
    for (unsigned spins = 1; !dev_event_query(op->done); spins++) {
        if (spins == 1) t0 = clock_wall_s(), c0 = clock_thread_cpu_s();
        if ((spins & 63) == 0) {
            comm_serve_queries();
            if ((rc = check_async(op))) break;
            char report[512];
            if (deadline && now_s() > deadline &&
                comm_report_missing(op->g->group, op->opname, op->seq, op->peer, still_pending, op, report,
                                    sizeof report)) {
                char l[96];
                label(op, l, sizeof l);
                comm_error(op->g->group, l, "%s (NCCL; the communicator was aborted)", report);
                abort_group(op->g);
                rc = -1;
                break;
            }
        }
        if (spins > 32) sched_yield();
    }
    if (t0 > 0) comm_count_wait(clock_wall_s() - t0, clock_thread_cpu_s() - c0);
    if (rc == 0) dev_stream_wait_event(STREAM_COMPUTE, op->done);
    if (rc == 0 || !op->g->aborted) op_free(op); /* an aborted one may still be written: kept */
    return rc;
}

int dnccl_test(DncclOp *op, int *done) {
    *done = 0;
    if (!op->done) return 0; /* its group has not ended yet */
    if (check_async(op)) return -1;
    if (!dev_event_query(op->done)) return 0;
    dev_stream_wait_event(STREAM_COMPUTE, op->done);
    op_free(op);
    *done = 1;
    return 0;
}
