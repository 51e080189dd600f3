/* comm.h: myriad's device-neutral communication API (process groups, collectives,
 * point-to-point, nonblocking requests, progress, timeouts).
 *
 * No backend types appear here: the MPI backend lives in comm_mpi*.c. These functions take host
 * buffers; device buffers go through src/parallel/device_comm.h (NCCL on GPUs, or MPI), which
 * uses the hooks at the end of this file. Style is libuv-like: opaque handles, every call returns
 * 0 or -1, and on -1 a one-line reason naming the operation, group and ranks is recorded with
 * myr_error() (read it with myr_last_error()).
 *
 * Semantics follow NCCL where MPI and NCCL differ:
 *  - counts are in elements of `dtype`;
 *  - in-place all-reduce: send == recv; in-place all-gather: send == recv + rank*count;
 *    in-place reduce-scatter: recv == send + rank*count (the rest of send is clobbered);
 *    in-place all-to-all: send == recv; broadcast: send == recv (out-of-place allowed at root).
 *  - COMM_BF16 buffers hold bfloat16 values (uint16_t). Reductions on bf16 send bf16 on the
 *    wire but accumulate in fp32: each element is rounded once on input and once on output
 *    (plus once per node level for the hierarchical algorithm), never once per hop.
 *
 * Every collective is nonblocking inside (the blocking call is start + comm_wait), so every
 * collective obeys the timeout; see comm_progress() and docs/COMM.md for progression. */
#ifndef MYRIAD_COMM_COMM_H
#define MYRIAD_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct Comm Comm;               /* a process group */
typedef struct CommRequest CommRequest; /* an operation in flight */

typedef enum { COMM_F32 = 0, COMM_BF16 = 1 } CommDtype;
typedef enum { COMM_SUM = 0, COMM_AVG = 1, COMM_MAX = 2 } CommOp;
typedef enum { COMM_ALGO_AUTO = 0, COMM_ALGO_MPI = 1, COMM_ALGO_HIER = 2 } CommAlgo;
/* What moves device buffers (src/parallel/device_comm.h): auto = NCCL on GPUs when libnccl
 * loads, else MPI; MPI always carries host buffers and bootstraps NCCL. */
typedef enum { COMM_TRANSPORT_AUTO = 0, COMM_TRANSPORT_MPI = 1, COMM_TRANSPORT_NCCL = 2 } CommTransport;

typedef struct {
    double timeout_s;    /* a collective not done after this long fails, naming missing ranks; 0 = never */
    int ranks_per_node;  /* >0: emulate nodes of this many consecutive world ranks; 0: real shared-memory nodes */
    CommAlgo algo;       /* all-reduce algorithm: auto picks hierarchical when it applies (see COMM.md) */
    CommTransport transport; /* --comm: device buffers over nccl or mpi */
} CommOptions;

#define COMM_DEFAULT_TIMEOUT_S 300.0

/* Default options: timeout COMM_DEFAULT_TIMEOUT_S, real nodes, auto algorithm, auto transport. */
CommOptions comm_default_options(void);
/* The options comm_init was given (the defaults before it). */
const CommOptions *comm_options(void);
/* Parse one comm flag at argv[*i] (--comm nccl|mpi, --comm-timeout S, --ranks-per-node N, --comm-algo mpi|hier|auto),
 * the rows of COMM_OPTS (comm_opts.h), which commands put in their option tables.
 * Returns 1 and advances *i if it was one, 0 if not; dies with a one-line message on a bad value. */
int comm_parse_flag(CommOptions *opt, int argc, char **argv, int *i);

/* Bring up the backend (MPI_Init when not already initialised) and the world group.
 * Collective over all processes. Works without a launcher (a world of one). */
int comm_init(int *argc, char ***argv, const CommOptions *opt);
/* Tear down every group and the backend. Collective. */
int comm_finalize(void);
/* Whether comm_init has run (and comm_finalize not yet). */
int comm_is_initialized(void);

Comm *comm_world(void);
int comm_rank(const Comm *c);
int comm_size(const Comm *c);
const char *comm_name(const Comm *c);
int comm_world_rank_of(const Comm *c, int rank); /* world rank of group rank `rank` */
int comm_node_count(const Comm *c);              /* nodes this group spans */
int comm_local_size(const Comm *c);              /* members on my node (0 if nodes differ in size) */

/* A group of `n` ranks of `parent` (listed in the new group's rank order). Collective over the
 * members only: each member calls it with the same list; non-members must not call it. */
int comm_group_from_ranks(Comm *parent, const int *ranks, int n, const char *name, Comm **out);
/* Free a group (collective over its members). */
int comm_group_free(Comm *c);

/* ---- device mesh: world = product of axis sizes; the helper works for any axes (tp, cp, ep, dp, pp) */
#define COMM_MESH_MAX_AXES 8
typedef struct {
    int naxes;
    char name[COMM_MESH_MAX_AXES][16];
    int size[COMM_MESH_MAX_AXES];
    int stride[COMM_MESH_MAX_AXES];
    int world; /* product of sizes */
} CommMesh;

/* Axes listed fastest-varying first, strides from the sizes: myriad's order is tp, dp, pp
 * (room for cp, ep in between). */
int comm_mesh_init(CommMesh *m, int naxes, const char *const *names, const int *sizes);
/* Explicit strides; fails unless rank -> coordinates is a bijection onto [0, world). */
int comm_mesh_init_strided(CommMesh *m, int naxes, const char *const *names, const int *sizes,
                           const int *strides);
int comm_mesh_axis(const CommMesh *m, const char *name); /* index, or -1 */
int comm_mesh_coord(const CommMesh *m, int rank, int axis);
/* World ranks sharing `rank`'s coordinates on every axis not in `axes_mask` (bit i = axis i),
 * ordered with the lowest masked axis fastest. `ranks` must hold the group size; returns it. */
int comm_mesh_group_ranks(const CommMesh *m, int rank, unsigned axes_mask, int *ranks);
/* My group along the axes in `axes_mask` (e.g. 1u << comm_mesh_axis(m, "dp")). Collective
 * over `world` (every rank gets its own group). The group is named after the axes ("dp", "tp+dp"). */
int comm_group_by_axes(Comm *world, const CommMesh *m, unsigned axes_mask, Comm **out);

/* ---- collectives. Blocking forms return when the result is in place. */
int comm_all_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op);
int comm_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op);
int comm_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt);
int comm_all_to_all(Comm *c, const void *send, void *recv, size_t count_per_rank, CommDtype dt);
/* counts/displacements in elements, one per rank */
int comm_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                      void *recv, const size_t *recvcounts, const size_t *rdispls, CommDtype dt);
int comm_broadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root);
int comm_send(Comm *c, const void *buf, size_t count, CommDtype dt, int peer);
int comm_recv(Comm *c, void *buf, size_t count, CommDtype dt, int peer);
int comm_barrier(Comm *c);

/* Nonblocking forms: same arguments, plus the request. Buffers must stay valid and untouched
 * until the request completes. Requests advance only inside comm_* calls (comm_progress,
 * comm_test, comm_wait, or any other operation): call comm_progress() between layers. */
int comm_iall_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op,
                     CommRequest **req);
int comm_ireduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt,
                         CommOp op, CommRequest **req);
int comm_iall_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt,
                     CommRequest **req);
int comm_iall_to_all(Comm *c, const void *send, void *recv, size_t count_per_rank, CommDtype dt,
                     CommRequest **req);
int comm_iall_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls,
                       void *recv, const size_t *recvcounts, const size_t *rdispls, CommDtype dt,
                       CommRequest **req);
int comm_ibroadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root,
                    CommRequest **req);
int comm_isend(Comm *c, const void *buf, size_t count, CommDtype dt, int peer, CommRequest **req);
int comm_irecv(Comm *c, void *buf, size_t count, CommDtype dt, int peer, CommRequest **req);
int comm_ibarrier(Comm *c, CommRequest **req);

/* Wait for *req, free it and set *req = NULL. -1 on failure or timeout (request freed too). */
int comm_wait(CommRequest **req);
/* Advance *req; *done = 1 when complete (then it is freed and *req = NULL, as in comm_wait). */
int comm_test(CommRequest **req, int *done);
/* Advance every request in flight and answer other ranks' arrival queries. Cheap (microseconds);
 * call it often while computing (e.g. after each layer of backward). Returns -1 if a request
 * failed or exceeded the timeout (the request stays owned by the caller; comm_wait reports it). */
int comm_progress(void);
/* Number of requests in flight (started, not yet waited for). */
int comm_pending(void);
/* Seconds the calling thread has spent blocked in comm_wait, i.e. in every blocking operation
 * and every wait for a nonblocking one: the exposed (not overlapped) communication. Differences
 * of it split a step's wall time into compute and communication wait (heartbeat sections). */
double comm_wait_seconds(void);
/* The calling thread's CPU time spent in those waits (spinning on progress): subtracted from a
 * section's CPU time so that waiting is never counted as computing. */
double comm_wait_cpu_seconds(void);
/* A device transport's host waits count there too (wall and CPU seconds of this thread). */
void comm_count_wait(double wall_s, double cpu_s);

/* Algorithm all-reduce would use for this size on this group (resolves COMM_ALGO_AUTO). */
CommAlgo comm_allreduce_algo(const Comm *c, size_t count, CommDtype dt);
/* Override the all-reduce algorithm (tests, benchmarks). */
void comm_set_algo(CommAlgo algo);

const char *comm_dtype_name(CommDtype dt); /* "float", "bfloat16" (nccl-tests names) */
const char *comm_op_name(CommOp op);       /* "sum", "avg", "max" */
const char *comm_algo_name(CommAlgo a);    /* "auto", "mpi", "hier" */
const char *comm_transport_name(CommTransport t); /* "auto", "mpi", "nccl" */
size_t comm_dtype_size(CommDtype dt);

/* bfloat16 <-> fp32 (round to nearest even; NaN stays NaN). */
uint16_t comm_f32_to_bf16(float x);
float comm_bf16_to_f32(uint16_t b);
void comm_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);
void comm_bf16_to_f32_array(const uint16_t *src, float *dst, size_t n);

/* Whether MPI can read and write CUDA device buffers itself (Open MPI built CUDA-aware:
 * MPIX_Query_cuda_support() at run time); 0 without MPI or without the extension.
 * MYRIAD_MPI_CUDA_AWARE=0 forces staging through host memory; =1 claims it (the CPU rehearsal
 * under MYRIAD_DEVICE_GUARD=strict, where the emulated device's memory is MPI-readable). */
int comm_cuda_aware(void);

/* ---- device buffers handed to MPI itself (a CUDA-aware MPI) ----
 * The comm layer then never dereferences them: what it computes on them (AVG's division, the
 * fp32 sum of bf16 chunks), the copies and the scratch it needs go through these functions, and
 * MPI is given mpi_address(p) for each device pointer p. Each function completes before it
 * returns (the result is in device memory, visible to MPI). src/parallel/device_comm.c fills
 * them from kernels.h. */
typedef struct {
    void *(*alloc)(size_t bytes);                               /* device scratch (never NULL) */
    void (*free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes);     /* device to device */
    void (*scale_f32)(float *x, size_t n, float s);             /* x[i] *= s */
    /* out[k] = bf16(op over s < nsrc of src[s*n + k]) accumulated in fp32 (AVG: sum / divisor) */
    void (*reduce_bf16)(uint16_t *out, const uint16_t *src, int nsrc, size_t n, CommOp op, int divisor);
    const void *(*mpi_address)(const void *p);                  /* what MPI is given for p */
} CommDeviceOps;
/* Operations started from now on (until the next call) take their buffers as device memory
 * handled by `ops`; NULL (the default) is host memory. Returns the previous setting. The
 * operation keeps its setting to the end, whatever is set while it is in flight. */
const CommDeviceOps *comm_device_buffers(const CommDeviceOps *ops);

/* ---- for a device transport beside MPI (NCCL, src/parallel/device_comm_nccl.c) ----
 * Its collectives count on the group's sequence like MPI's, so arrival queries (--comm-timeout)
 * see them; while it waits it answers other ranks' queries; at its deadline it asks which ranks
 * have not arrived, exactly as the MPI requests do (docs/COMM.md, "Timeouts"). */
int64_t comm_count_collective(Comm *c);  /* the new collective's number on c */
void comm_serve_queries(void);           /* answer pending arrival queries (cheap) */
double comm_timeout_seconds(void);       /* --comm-timeout (0: never) */
double comm_query_grace(double timeout); /* how long before the timeout the query starts */
/* At the deadline of operation `opname` #seq on c (peer: point-to-point peer, else -1): ask the
 * others where they are, calling still_pending(arg) meanwhile (it returns 1 while pending). 0 if
 * it completed after all, else 1 with "did not complete within S s; ranks not arrived: ..." in out. */
int comm_report_missing(Comm *c, const char *opname, int64_t seq, int peer, int (*still_pending)(void *), void *arg,
                        char *out, size_t cap);
/* Record the failure of operation `opname` on c as the current error (comm_fail's format:
 * "comm: <op> on group '<name>' (rank r of n, world rank w): <reason>"). Returns -1. */
int comm_error(const Comm *c, const char *opname, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Per-group data of another transport, destroyed (destroy(p)) when the group is freed or at
 * comm_finalize, before MPI goes away. One slot per group. */
void comm_set_attachment(Comm *c, void *p, void (*destroy)(void *p));
void *comm_attachment(const Comm *c);

/* Abort the whole job now (all ranks) with `code`, e.g. after a fatal comm error in a library
 * context where returning is not possible. The CLI normally just exits non-zero: the launcher
 * then tears the job down. */
void comm_abort(int code);

#endif
