/* comm_mpi_watch.c: who has not arrived? The side channel behind --comm-timeout.
 *
 * Every group has a `monitor` communicator (a duplicate, so these messages never match user
 * traffic) and a counter `seq` of the collectives started on it. When a request passes its
 * deadline (the timeout minus a short grace period), its rank sends a query to every other
 * member (or to the peer, for send/recv) and waits out the grace period for the answers: each
 * member's `seq`. If the operation completes meanwhile, nothing is reported. A member that answers with
 * a smaller number than the stuck collective's has not arrived at it; one that does not answer
 * at all is stopped, dead, or busy outside any comm call for the whole grace period. Ranks answer
 * queries whenever they are inside the comm layer (comm_wait/comm_test/comm_progress), so the
 * fast path costs nothing but an MPI_Iprobe per group every 64 polls. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_mpi.h"

#define TAG_QUERY 901
#define TAG_REPLY0 1000 /* replies use TAG_REPLY0 + round % 1000, so a late answer to an
                           earlier query can never be taken for an answer to this one */
#define MAX_LISTED 16 /* ranks named in one report; the rest are counted */

typedef struct Reply {
    MPI_Request req;
    int64_t seq;
    struct Reply *next;
} Reply;
static Reply *replies; /* answers still being sent */

static void reap_replies(int force) {
    for (Reply **p = &replies; *p;) {
        int done = 0;
        if (force) MPI_Request_free(&(*p)->req), done = 1;
        else MPI_Test(&(*p)->req, &done, MPI_STATUS_IGNORE);
        if (done) {
            Reply *d = *p;
            *p = d->next;
            free(d);
        } else {
            p = &(*p)->next;
        }
    }
}

void comm_watch_serve(void) {
    reap_replies(0);
    for (Comm *c = comm_groups; c; c = c->next) {
        for (;;) {
            int flag = 0;
            MPI_Status st;
            if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, c->monitor, &flag, &st) != MPI_SUCCESS || !flag) break;
            int64_t query[2]; /* the collective asked about, the reply tag */
            MPI_Recv(query, 2, MPI_INT64_T, st.MPI_SOURCE, TAG_QUERY, c->monitor, MPI_STATUS_IGNORE);
            Reply *rp = malloc(sizeof *rp);
            if (!rp) break;
            rp->seq = c->seq;
            if (MPI_Isend(&rp->seq, 1, MPI_INT64_T, st.MPI_SOURCE, (int)query[1], c->monitor, &rp->req) != MPI_SUCCESS) {
                free(rp);
                break;
            }
            rp->next = replies;
            replies = rp;
        }
    }
}

void comm_watch_cleanup(void) { reap_replies(1); }
void comm_serve_queries(void) { comm_watch_serve(); }

static size_t append(char *out, size_t cap, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *out, size_t cap, size_t len, const char *fmt, ...) {
    if (len >= cap) return len;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + len, cap - len, fmt, ap);
    va_end(ap);
    return k < 0 ? len : len + (size_t)k;
}

double comm_query_grace(double timeout) { return comm_watch_grace(timeout); }

double comm_watch_grace(double timeout) {
    double grace = timeout * 0.25;
    if (grace > 3.0) grace = 3.0;
    if (grace < 0.5) grace = timeout < 1.0 ? timeout * 0.5 : 0.5;
    return grace;
}

/* comm_watch_report's pending function through comm_report_missing's (void *) one */
typedef struct {
    CommRequest *r;
    int (*fn)(CommRequest *);
} PendingReq;
static int req_pending(void *arg) {
    PendingReq *p = arg;
    return p->fn(p->r);
}

int comm_watch_report(CommRequest *r, int (*pending_fn)(CommRequest *), char *out, size_t cap) {
    PendingReq p = {r, pending_fn};
    return comm_report_missing(r->comm, r->opname, r->seq, r->peer, req_pending, &p, out, cap);
}

int comm_report_missing(Comm *c, const char *opname, int64_t seq, int peer, int (*pending_fn)(void *), void *arg,
                        char *out, size_t cap) {
    static int round;
    int n = c->size;
    double timeout = comm_opts.timeout_s;
    double grace = comm_watch_grace(timeout);
    int64_t query[2] = {seq, TAG_REPLY0 + round++ % 1000};
    int64_t *answer = calloc(n, sizeof *answer);
    MPI_Request *sreq = malloc(sizeof *sreq * n), *rreq = malloc(sizeof *rreq * n);
    int *asked = calloc(n, sizeof *asked), *got = calloc(n, sizeof *got);
    if (!answer || !sreq || !rreq || !asked || !got) {
        snprintf(out, cap, "did not complete within %g s (out of memory while asking which ranks are missing)", timeout);
        return 1;
    }
    int pending = 0;
    for (int i = 0; i < n; i++) {
        if (i == c->rank || (peer >= 0 && i != peer)) continue;
        asked[i] = 1;
        MPI_Isend(query, 2, MPI_INT64_T, i, TAG_QUERY, c->monitor, &sreq[i]);
        MPI_Irecv(&answer[i], 1, MPI_INT64_T, i, (int)query[1], c->monitor, &rreq[i]);
        pending++;
    }
    /* the query starts `grace` before the timeout; the operation may still finish meanwhile */
    double until = MPI_Wtime() + grace;
    int finished = 0;
    while (MPI_Wtime() < until && !(finished = !pending_fn(arg))) {
        for (int i = 0; i < n; i++) {
            if (!asked[i] || got[i]) continue;
            int f = 0;
            MPI_Test(&rreq[i], &f, MPI_STATUS_IGNORE);
            if (f) got[i] = 1, pending--;
        }
        comm_watch_serve(); /* the others are asking us too */
        sched_yield();
    }
    for (int i = 0; i < n; i++) {
        if (!asked[i]) continue;
        if (!got[i]) {
            MPI_Cancel(&rreq[i]);
            MPI_Request_free(&rreq[i]);
        }
        int sent = 0; /* `query` is on this stack frame: the send must be done before returning */
        MPI_Test(&sreq[i], &sent, MPI_STATUS_IGNORE);
        if (!sent) MPI_Cancel(&sreq[i]), MPI_Wait(&sreq[i], MPI_STATUS_IGNORE);
    }
    if (finished) {
        free(answer), free(sreq), free(rreq), free(asked), free(got);
        return 0;
    }

    size_t len = append(out, cap, 0, "did not complete within %g s; ", timeout);
    if (peer >= 0) {
        int p = peer;
        if (!got[p])
            len = append(out, cap, len, "peer rank %d (world rank %d) did not answer within %g s: stopped, dead, or busy "
                         "outside comm calls", p, c->world_ranks[p], grace);
        else
            len = append(out, cap, len, "peer rank %d (world rank %d) is alive (at collective #%lld of this group) but "
                         "has not posted the matching %s", p, c->world_ranks[p], (long long)answer[p],
                         strcmp(opname, "send") ? "send" : "recv");
    } else {
        int missing = 0;
        for (int i = 0; i < n; i++) {
            if (!asked[i] || (got[i] && answer[i] >= seq)) continue;
            if (missing == 0) len = append(out, cap, len, "ranks not arrived:");
            if (missing < MAX_LISTED) {
                if (got[i])
                    len = append(out, cap, len, " %d (world %d, still at #%lld)", i, c->world_ranks[i],
                                 (long long)answer[i]);
                else
                    len = append(out, cap, len, " %d (world %d, no answer: stopped, dead, or busy outside comm)", i,
                                 c->world_ranks[i]);
            }
            missing++;
        }
        if (missing > MAX_LISTED) len = append(out, cap, len, " and %d more", missing - MAX_LISTED);
        if (missing == 0)
            len = append(out, cap, len, "every rank has started it, so the operation itself is stuck or slower than "
                         "the timeout (raise --comm-timeout)");
    }
    (void)len;
    free(answer), free(sreq), free(rreq), free(asked), free(got);
    return 1;
}
