/* expert_parallel.c: ExpertParallel callbacks over a comm group (see expert_parallel.h). */
#include "parallel/expert_parallel.h"

#include <stdlib.h>

#include "parallel/device_comm.h"
#include "util/error.h"

/* Words travel as fp32 elements: the all-to-all only moves them (no arithmetic), so token rows
 * (device memory, staged when MPI cannot read it) and the int32 counts ahead of them (host)
 * arrive bit-exact. */
static void all_to_all_v(void *ctx, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                         int device) {
    Comm *g = ctx;
    int P = comm_size(g);
    size_t *sd = malloc((size_t)P * sizeof(size_t)), *rd = malloc((size_t)P * sizeof(size_t));
    size_t s = 0, r = 0;
    for (int i = 0; i < P; i++) {
        sd[i] = s, rd[i] = r;
        s += send_counts[i], r += recv_counts[i];
    }
    int rc = device ? dcomm_all_to_all_v(g, send, send_counts, sd, recv, recv_counts, rd, COMM_F32)
                    : comm_all_to_all_v(g, send, send_counts, sd, recv, recv_counts, rd, COMM_F32);
    if (rc) myr_die_last();
    free(sd);
    free(rd);
}

static void barrier(void *ctx) {
    if (comm_barrier((Comm *)ctx)) myr_die_last();
}

void ep_attach(Model *m, Comm *ep, int timing_barrier) {
    m->ep.all_to_all_v = all_to_all_v;
    m->ep.barrier = timing_barrier ? barrier : NULL;
    m->ep.ctx = ep;
}
