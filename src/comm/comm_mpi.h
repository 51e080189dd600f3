/* comm_mpi.h: internals shared by the MPI backend files (comm_mpi.c: groups and setup;
 * comm_mpi_ops.c: the request engine and the collectives; comm_mpi_watch.c: timeouts and the
 * arrival side channel). Nothing outside src/comm/comm_mpi*.c includes this. */
#ifndef MYRIAD_COMM_COMM_MPI_H
#define MYRIAD_COMM_COMM_MPI_H

#include <mpi.h>

#include "comm/comm.h"

struct Comm {
    MPI_Comm mpi;     /* the group's communicator: user operations */
    MPI_Comm monitor; /* duplicate used only for arrival queries (never blocks user traffic) */
    MPI_Comm node;    /* members on my node (real or emulated) */
    MPI_Comm cross;   /* members with my node-local index, one per node */
    int rank, size;
    int *world_ranks; /* world rank of each member */
    int nnodes;       /* nodes spanned by the group */
    int local_size;   /* members per node when every node has the same count, else 0 */
    int local_rank;
    char name[32];
    int64_t seq;      /* collectives started on this group (the id of the latest) */
    /* MPI requires every rank to post the collectives of a communicator in the same order.
     * Multi-stage requests (bf16, hierarchical) post later stages only when polled, so each
     * group lets one request post at a time, in creation order: the head of this queue. */
    CommRequest *post_head, *post_tail;
    void *attach;     /* another transport's data for this group (comm_set_attachment) */
    void (*attach_destroy)(void *);
    Comm *next;       /* all live groups, for answering arrival queries */
};

/* One operation in flight. A request is a small state machine: it waits on up to two MPI
 * requests or on one child request, then `advance` runs the next stage (posting more work or
 * setting done). Top-level requests (made by the public API) carry the group, sequence number
 * and deadline used for timeout reports; children (stages of the hierarchical and bf16
 * algorithms) run on raw sub-communicators. */
struct CommRequest {
    /* identity, for error reports (top level only) */
    Comm *comm;
    const char *opname;
    int64_t seq;      /* collective id on comm->mpi; 0 for point-to-point */
    int peer;         /* point-to-point peer, -1 for collectives */
    double deadline;  /* MPI_Wtime() after which the request has timed out; 0 = never */
    /* engine state */
    const CommDeviceOps *dev; /* buffers are device memory handled by these (NULL: host) */
    int (*advance)(CommRequest *r);
    int stage, done, failed;
    int final_posted; /* the last stage has been posted: later requests of the group may post */
    int queued;       /* in its group's posting queue */
    CommRequest *next_post;
    MPI_Request mreq[2];
    int nmreq;
    CommRequest *child;
    char err[512];
    /* operation parameters */
    MPI_Comm mc;      /* communicator this (sub)operation runs on */
    int n, me;        /* its size and my rank in it */
    const void *send;
    void *recv;
    size_t count;
    CommDtype dt;
    CommOp op;
    int divisor;      /* AVG: divide the sum by this (the top-level group size) */
    int root;         /* broadcast root */
    int *counts, *displs; /* per-rank element counts and offsets (v-variants, chunked algorithms) */
    void *tmp;        /* scratch owned by the request */
    void *shard;      /* hierarchical: my reduced chunk */
    void *final_dst;  /* in-place reduce-scatter: where the shard goes at the end */
    CommRequest *prev_active, *next_active; /* top-level requests in flight */
};

/* comm_mpi_state.c */
extern CommOptions comm_opts;
extern Comm *comm_groups;          /* list of live groups */
MPI_Datatype comm_mpi_type(CommDtype dt);
/* Record "comm: <op> on group '<name>' (rank r of n, world rank w): <reason>". */
int comm_fail(const Comm *c, const char *opname, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Describe an MPI error code. */
const char *comm_mpi_errstr(int rc, char *buf, int cap);

/* comm_mpi_watch.c */
/* Answer pending arrival queries from other ranks (cheap; called from every progress loop). */
void comm_watch_serve(void);
/* Seconds before the timeout at which a pending request starts asking who is missing. */
double comm_watch_grace(double timeout);
/* `r` has reached its deadline: ask the other ranks where they are, polling `r` meanwhile with
 * pending_fn (1 while pending). Returns 0 if r finished after all, else 1 with the one-line
 * report naming the ranks that have not arrived in `out`. (comm_report_missing in general.) */
int comm_watch_report(CommRequest *r, int (*pending_fn)(CommRequest *), char *out, size_t cap);
/* Release the reply buffers of answered queries; called at finalize. */
void comm_watch_cleanup(void);

#endif
