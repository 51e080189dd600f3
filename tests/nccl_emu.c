/* nccl_emu.c: libnccl-emu.so, an emulation of the NCCL C API that myriad loads (src/comm/nccl_lib.h)
 * so that the NCCL code path (src/parallel/device_comm_nccl.c) runs in every CI run without a GPU:
 *     MYRIAD_NCCL_LIB=build/tests/libnccl-emu.so mpirun -np 4 bin/myriad train --comm nccl ...
 * It moves the CPU backend's "device" memory (under MYRIAD_DEVICE_GUARD=strict: through the
 * addresses dev_transport_address hands it; other host code still faults) over MPI point-to-point
 * messages on MPI_COMM_WORLD (myriad's own traffic runs on duplicates, so the two never match),
 * and it behaves like NCCL on a GPU where that matters to the caller:
 *  - asynchronous: a call posts its messages and queues its completion on the stream it was given
 *    (the CPU backend's communication stream, kernels/cpu/cpu_stream.h); the results land in the
 *    receive buffer only when an event recorded after it is queried, waited for or synchronized, so
 *    a caller that reads before ordering itself after the stream reads stale bytes;
 *  - ordered: a call on a stream that has not waited for an event recorded after the compute
 *    stream's latest work fails (ncclInvalidUsage, naming the call), because on a GPU it would read
 *    the buffer while kernels are still writing it;
 *  - NCCL's arithmetic: sums in rank order, bf16 rounded after every addition (a ring's per-hop
 *    rounding), ncclAvg as the sum divided by the rank count; every rank gets the same bits;
 *  - bootstrap: ncclGetUniqueId on one rank, ncclCommInitRank collective over the members (the id
 *    names its creator, who collects the members' world ranks);
 *  - groups: calls between ncclGroupStart/End are posted at once (MPI's messages are nonblocking,
 *    so a send and a receive of one exchange never wait for each other, as NCCL's group promises);
 *  - failure: a peer that never posts leaves the operation pending forever (the caller's timeout and
 *    watchdog must notice); ncclCommAbort makes pending work give up.
 * It exports myriadNcclEmulation, so myriad knows it moves CPU memory and refuses it on a GPU.
 * MYRIAD_NCCL_EMU_LOG=FILE: each process appends one line at exit, the calls it served by kind
 * ("rank 0 AllReduce 12 ReduceScatter 0 ..."), so a test can tell that NCCL carried the traffic.
 * MYRIAD_NCCL_EMU_ASYNC_ERROR_AT=K: the K-th call of the process never completes and its
 * communicator reports ncclRemoteError through ncclCommGetAsyncError, as NCCL does when a peer's
 * connection breaks (the caller must notice without waiting for its timeout). */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nccl_lib.h"
#include "kernels/cpu/cpu_stream.h"
#include "util/bf16.h"

int myriadNcclEmulation = 1;

#define EMU_MAGIC 0x4e43454du /* "NCEM" */
#define TAG_BASE 0x10000

struct NcclCommOpaque {
    uint32_t magic;
    int n, rank, tag;
    int *world; /* world rank of each member */
    int aborted;
    NcclResult async; /* what ncclCommGetAsyncError reports */
};

typedef struct {
    uint32_t magic;
    int root_world, serial, tag;
} EmuId;

typedef struct EmuOp {
    CpuWork work;
    NcclComm comm;
    MPI_Request *req;
    int nreq;
    void (*land)(struct EmuOp *);
    int stuck; /* never completes (MYRIAD_NCCL_EMU_ASYNC_ERROR_AT) */
    /* parameters and staging (host memory owned by the operation) */
    char *mine;     /* my input, copied at the call */
    char *gathered; /* what arrived */
    void *recv;
    size_t count, esize;
    NcclDataType dt;
    NcclRedOp op;
} EmuOp;

static char last_error[512];
static int group_depth;

enum { C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST, C_SEND, C_RECV, C_KINDS };
static const char *const kind_names[C_KINDS] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Send", "Recv"};
static long calls[C_KINDS];
static int log_rank = -1;

static void write_log(void) {
    const char *path = getenv("MYRIAD_NCCL_EMU_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    char line[256];
    int k = snprintf(line, sizeof line, "rank %d", log_rank);
    for (int i = 0; i < C_KINDS; i++) k += snprintf(line + k, sizeof line - k, " %s %ld", kind_names[i], calls[i]);
    fprintf(f, "%s\n", line); /* one write per line: lines of several processes do not mix */
    fclose(f);
}

static NcclResult fail(NcclResult r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    fprintf(stderr, "nccl emulation: %s\n", last_error);
    return r;
}

NcclResult ncclGetVersion(int *version) {
    *version = 21800; /* the API it emulates: NCCL 2.18 */
    return NCCL_SUCCESS;
}

const char *ncclGetErrorString(NcclResult r) {
    switch (r) {
    case NCCL_SUCCESS: return "no error";
    case NCCL_SYSTEM_ERROR: return "unhandled system error (emulation: an MPI call failed)";
    case NCCL_INTERNAL_ERROR: return "internal error (emulation)";
    case NCCL_INVALID_ARGUMENT: return "invalid argument";
    case NCCL_INVALID_USAGE: return "invalid usage";
    case NCCL_REMOTE_ERROR: return "remote process exited or there was a network error";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(NcclComm comm) {
    (void)comm;
    return last_error;
}

static int world_rank(void) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

NcclResult ncclGetUniqueId(NcclUniqueId *id) {
    static int serial;
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return fail(NCCL_INVALID_USAGE, "ncclGetUniqueId: MPI is not initialised (the emulation runs over MPI)");
    EmuId e = {EMU_MAGIC, world_rank(), serial++, 0};
    int ub = 0, flag = 0, *ubp;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ubp, &flag);
    if (flag) ub = *ubp;
    e.tag = TAG_BASE + (e.root_world * 256 + e.serial % 256) * 4;
    if (e.tag + 4 > ub) return fail(NCCL_SYSTEM_ERROR, "ncclGetUniqueId: MPI_TAG_UB %d is too small for world rank %d", ub, e.root_world);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &e, sizeof e);
    return NCCL_SUCCESS;
}

NcclResult ncclCommInitRank(NcclComm *out, int nranks, NcclUniqueId id, int rank) {
    EmuId e;
    memcpy(&e, id.internal, sizeof e);
    if (e.magic != EMU_MAGIC) return fail(NCCL_INVALID_ARGUMENT, "ncclCommInitRank: not an id of this emulation");
    if (rank < 0 || rank >= nranks) return fail(NCCL_INVALID_ARGUMENT, "ncclCommInitRank: rank %d of %d", rank, nranks);
    int me = world_rank();
    if ((rank == 0) != (me == e.root_world))
        return fail(NCCL_INVALID_USAGE, "ncclCommInitRank: the emulation needs the id made by the communicator's rank 0");
    if (log_rank < 0) log_rank = me, atexit(write_log);
    NcclComm c = calloc(1, sizeof *c);
    c->magic = EMU_MAGIC, c->n = nranks, c->rank = rank, c->tag = e.tag;
    c->world = calloc((size_t)nranks, sizeof *c->world);
    c->world[rank] = me;
    int rc = MPI_SUCCESS;
    if (rank == 0) { /* collect (rank, world rank) from every member, then tell each the whole list */
        for (int i = 1; i < nranks && rc == MPI_SUCCESS; i++) {
            int m[2];
            rc = MPI_Recv(m, 2, MPI_INT, MPI_ANY_SOURCE, c->tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && m[0] > 0 && m[0] < nranks) c->world[m[0]] = m[1];
        }
        for (int i = 1; i < nranks && rc == MPI_SUCCESS; i++)
            rc = MPI_Send(c->world, nranks, MPI_INT, c->world[i], c->tag, MPI_COMM_WORLD);
    } else {
        int m[2] = {rank, me};
        rc = MPI_Send(m, 2, MPI_INT, e.root_world, c->tag, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) rc = MPI_Recv(c->world, nranks, MPI_INT, e.root_world, c->tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
        free(c->world), free(c);
        return fail(NCCL_SYSTEM_ERROR, "ncclCommInitRank: MPI bootstrap failed");
    }
    *out = c;
    return NCCL_SUCCESS;
}

NcclResult ncclCommDestroy(NcclComm c) {
    if (!c || c->magic != EMU_MAGIC) return fail(NCCL_INVALID_ARGUMENT, "ncclCommDestroy: not a communicator");
    c->magic = 0;
    free(c->world);
    free(c);
    return NCCL_SUCCESS;
}

NcclResult ncclCommAbort(NcclComm c) {
    if (!c || c->magic != EMU_MAGIC) return fail(NCCL_INVALID_ARGUMENT, "ncclCommAbort: not a communicator");
    c->aborted = 1; /* pending work gives up; its messages stay posted (the process is about to exit) */
    return NCCL_SUCCESS;
}

NcclResult ncclCommGetAsyncError(NcclComm c, NcclResult *err) {
    if (!c || c->magic != EMU_MAGIC) return fail(NCCL_INVALID_ARGUMENT, "ncclCommGetAsyncError: not a communicator");
    *err = c->async;
    return NCCL_SUCCESS;
}

NcclResult ncclGroupStart(void) {
    group_depth++;
    return NCCL_SUCCESS;
}

NcclResult ncclGroupEnd(void) {
    if (group_depth <= 0) return fail(NCCL_INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
    group_depth--;
    return NCCL_SUCCESS;
}

/* ---- operations ---- */

static size_t esize_of(NcclDataType dt) { return dt == NCCL_BFLOAT16 ? 2 : 4; }
static MPI_Datatype mpi_bytes(void) { return MPI_BYTE; }

static int op_poll(void *arg) {
    EmuOp *o = arg;
    if (o->comm->aborted) return 1; /* given up: nothing lands */
    if (o->stuck) return 0;
    int flag = 1;
    if (o->nreq && MPI_Testall(o->nreq, o->req, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) flag = 1;
    if (!flag) return 0;
    o->nreq = 0;
    if (o->land) o->land(o);
    o->land = NULL;
    return 1;
}

static void op_finish(void *arg) {
    while (!op_poll(arg)) sched_yield();
}

static void op_release(void *arg) {
    EmuOp *o = arg;
    free(o->req), free(o->mine), free(o->gathered), free(o);
}

/* A new operation on `stream`, or NULL with *err (and last_error) when it may not start there. */
static EmuOp *op_new(const char *call, NcclComm c, void *stream, size_t nreq, NcclResult *err) {
    CpuStream *s = stream;
    if (!c || c->magic != EMU_MAGIC) return *err = fail(NCCL_INVALID_ARGUMENT, "%s: not a communicator", call), NULL;
    if (c->aborted) return *err = fail(NCCL_INVALID_USAGE, "%s: the communicator was aborted", call), NULL;
    if (!s || s->magic != CPU_STREAM_MAGIC)
        return *err = fail(NCCL_INVALID_ARGUMENT, "%s: the stream is not the CPU backend's (cpu_stream.h)", call), NULL;
    if (!cpu_stream_after_compute(s))
        return *err = fail(NCCL_INVALID_USAGE, "%s queued on a stream that has not waited for an event recorded after "
                           "the compute stream's latest work: on a GPU it would read buffers the kernels are still "
                           "writing", call), NULL;
    EmuOp *o = calloc(1, sizeof *o);
    o->comm = c;
    static long ncalls;
    const char *at = getenv("MYRIAD_NCCL_EMU_ASYNC_ERROR_AT");
    if (at && ++ncalls == atol(at)) {
        o->stuck = 1;
        c->async = NCCL_REMOTE_ERROR;
        snprintf(last_error, sizeof last_error, "%s: the connection to a peer broke (emulated)", call);
    }
    o->req = calloc(nreq + 1, sizeof *o->req);
    o->work.poll = op_poll, o->work.finish = op_finish, o->work.release = op_release, o->work.arg = o;
    return o;
}

static void op_queue(EmuOp *o, void *stream) { cpu_stream_enqueue(stream, &o->work); }

static int post_send(EmuOp *o, const void *buf, size_t bytes, int peer, int kind) {
    return MPI_Isend(buf, (int)bytes, mpi_bytes(), o->comm->world[peer], o->comm->tag + kind, MPI_COMM_WORLD,
                     &o->req[o->nreq++]);
}
static int post_recv(EmuOp *o, void *buf, size_t bytes, int peer, int kind) {
    return MPI_Irecv(buf, (int)bytes, mpi_bytes(), o->comm->world[peer], o->comm->tag + kind, MPI_COMM_WORLD,
                     &o->req[o->nreq++]);
}
enum { KIND_P2P = 1, KIND_COLL = 2 };

static float get(const char *p, NcclDataType dt, size_t k) {
    return dt == NCCL_BFLOAT16 ? bf16_to_f32(((const uint16_t *)p)[k]) : ((const float *)p)[k];
}
static void put(char *p, NcclDataType dt, size_t k, float v) {
    if (dt == NCCL_BFLOAT16) ((uint16_t *)p)[k] = f32_to_bf16(v);
    else ((float *)p)[k] = v;
}
/* bf16 arithmetic rounds after every operation, as NCCL's bf16 kernels do */
static float round_to(NcclDataType dt, float v) { return dt == NCCL_BFLOAT16 ? bf16_to_f32(f32_to_bf16(v)) : v; }

/* out[k] = reduction over the n blocks of `count` at src (rank order) */
static void reduce_blocks(const char *src, int n, size_t count, NcclDataType dt, NcclRedOp op, char *out) {
    size_t bs = count * esize_of(dt);
    for (size_t k = 0; k < count; k++) {
        float acc = get(src, dt, k);
        for (int r = 1; r < n; r++) {
            float v = get(src + (size_t)r * bs, dt, k);
            acc = op == NCCL_MAX ? (v > acc ? v : acc) : op == NCCL_MIN ? (v < acc ? v : acc)
                : op == NCCL_PROD ? round_to(dt, acc * v) : round_to(dt, acc + v);
        }
        if (op == NCCL_AVG) acc = acc / (float)n;
        put(out, dt, k, acc);
    }
}

/* Every member's block of `bytes` into o->gathered (rank order); mine is at o->mine. */
static int exchange_all(EmuOp *o, size_t bytes, const char *send_base, size_t send_stride) {
    NcclComm c = o->comm;
    o->gathered = malloc((size_t)c->n * bytes + 1);
    int rc = MPI_SUCCESS;
    for (int r = 0; r < c->n && rc == MPI_SUCCESS; r++) {
        if (r == c->rank) {
            memcpy(o->gathered + (size_t)r * bytes, send_base + (size_t)r * send_stride, bytes);
            continue;
        }
        rc = post_recv(o, o->gathered + (size_t)r * bytes, bytes, r, KIND_COLL);
        if (rc == MPI_SUCCESS) rc = post_send(o, send_base + (size_t)r * send_stride, bytes, r, KIND_COLL);
    }
    return rc;
}

static void land_reduce(EmuOp *o) { reduce_blocks(o->gathered, o->comm->n, o->count, o->dt, o->op, o->recv); }
static void land_copy(EmuOp *o) { memcpy(o->recv, o->gathered, o->count * o->esize); }

static NcclResult start_reduce(const char *call, const void *send, void *recv, size_t count, size_t send_count,
                               int scatter, NcclDataType dt, NcclRedOp op, NcclComm c, void *stream) {
    NcclResult err;
    EmuOp *o = op_new(call, c, stream, c ? 2 * (size_t)c->n : 0, &err);
    if (!o) return err;
    size_t es = esize_of(dt), bytes = count * es;
    o->recv = recv, o->count = count, o->esize = es, o->dt = dt, o->op = op, o->land = land_reduce;
    o->mine = malloc(send_count * es + 1);
    memcpy(o->mine, send, send_count * es); /* read now: the stream has waited for the compute stream */
    /* all-reduce: everyone's whole buffer; reduce-scatter: block r of everyone's buffer to rank r */
    if (exchange_all(o, bytes, o->mine, scatter ? bytes : 0) != MPI_SUCCESS) {
        op_release(o);
        return fail(NCCL_SYSTEM_ERROR, "%s: MPI failed", call);
    }
    op_queue(o, stream);
    return NCCL_SUCCESS;
}

NcclResult ncclAllReduce(const void *send, void *recv, size_t count, NcclDataType dt, NcclRedOp op, NcclComm c,
                         void *stream) {
    calls[C_ALLREDUCE]++;
    return start_reduce("ncclAllReduce", send, recv, count, count, 0, dt, op, c, stream);
}

NcclResult ncclReduceScatter(const void *send, void *recv, size_t recvcount, NcclDataType dt, NcclRedOp op,
                             NcclComm c, void *stream) {
    calls[C_REDUCESCATTER]++;
    return start_reduce("ncclReduceScatter", send, recv, recvcount, c && c->magic == EMU_MAGIC ? recvcount * c->n : 0,
                        1, dt, op, c, stream);
}

NcclResult ncclAllGather(const void *send, void *recv, size_t sendcount, NcclDataType dt, NcclComm c, void *stream) {
    NcclResult err;
    calls[C_ALLGATHER]++;
    EmuOp *o = op_new("ncclAllGather", c, stream, c ? 2 * (size_t)c->n : 0, &err);
    if (!o) return err;
    size_t es = esize_of(dt), bytes = sendcount * es;
    o->recv = recv, o->count = sendcount * c->n, o->esize = es, o->land = land_copy;
    o->mine = malloc(bytes + 1);
    memcpy(o->mine, send, bytes);
    if (exchange_all(o, bytes, o->mine, 0) != MPI_SUCCESS) {
        op_release(o);
        return fail(NCCL_SYSTEM_ERROR, "ncclAllGather: MPI failed");
    }
    op_queue(o, stream);
    return NCCL_SUCCESS;
}

NcclResult ncclBroadcast(const void *send, void *recv, size_t count, NcclDataType dt, int root, NcclComm c,
                         void *stream) {
    NcclResult err;
    calls[C_BROADCAST]++;
    EmuOp *o = op_new("ncclBroadcast", c, stream, c ? (size_t)c->n : 0, &err);
    if (!o) return err;
    if (root < 0 || root >= c->n) {
        op_release(o);
        return fail(NCCL_INVALID_ARGUMENT, "ncclBroadcast: root %d of %d", root, c->n);
    }
    size_t bytes = count * esize_of(dt);
    o->recv = recv, o->count = count, o->esize = esize_of(dt), o->land = land_copy;
    o->gathered = malloc(bytes + 1);
    int rc = MPI_SUCCESS;
    if (c->rank == root) {
        memcpy(o->gathered, send, bytes);
        o->mine = malloc(bytes + 1);
        memcpy(o->mine, send, bytes);
        for (int r = 0; r < c->n && rc == MPI_SUCCESS; r++)
            if (r != root) rc = post_send(o, o->mine, bytes, r, KIND_COLL);
    } else {
        rc = post_recv(o, o->gathered, bytes, root, KIND_COLL);
    }
    if (rc != MPI_SUCCESS) {
        op_release(o);
        return fail(NCCL_SYSTEM_ERROR, "ncclBroadcast: MPI failed");
    }
    op_queue(o, stream);
    return NCCL_SUCCESS;
}

NcclResult ncclSend(const void *send, size_t count, NcclDataType dt, int peer, NcclComm c, void *stream) {
    NcclResult err;
    calls[C_SEND]++;
    EmuOp *o = op_new("ncclSend", c, stream, 1, &err);
    if (!o) return err;
    if (peer < 0 || peer >= c->n) {
        op_release(o);
        return fail(NCCL_INVALID_ARGUMENT, "ncclSend: peer %d of %d", peer, c->n);
    }
    size_t bytes = count * esize_of(dt);
    o->mine = malloc(bytes + 1);
    memcpy(o->mine, send, bytes);
    if (post_send(o, o->mine, bytes, peer, KIND_P2P) != MPI_SUCCESS) {
        op_release(o);
        return fail(NCCL_SYSTEM_ERROR, "ncclSend: MPI failed");
    }
    op_queue(o, stream);
    return NCCL_SUCCESS;
}

NcclResult ncclRecv(void *recv, size_t count, NcclDataType dt, int peer, NcclComm c, void *stream) {
    NcclResult err;
    calls[C_RECV]++;
    EmuOp *o = op_new("ncclRecv", c, stream, 1, &err);
    if (!o) return err;
    if (peer < 0 || peer >= c->n) {
        op_release(o);
        return fail(NCCL_INVALID_ARGUMENT, "ncclRecv: peer %d of %d", peer, c->n);
    }
    size_t bytes = count * esize_of(dt);
    o->recv = recv, o->count = count, o->esize = esize_of(dt), o->land = land_copy;
    o->gathered = malloc(bytes + 1);
    if (post_recv(o, o->gathered, bytes, peer, KIND_P2P) != MPI_SUCCESS) {
        op_release(o);
        return fail(NCCL_SYSTEM_ERROR, "ncclRecv: MPI failed");
    }
    op_queue(o, stream);
    return NCCL_SUCCESS;
}
