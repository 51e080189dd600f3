/* schedule_run.h: executes one stage's pipeline schedule (schedule.h) over the comm layer:
 * computes through caller hooks, transfers with send/recv on the pipeline group (group rank =
 * pipeline stage), and optionally records every op into a trace (trace.h). The reference driver
 * for pipeline training and the multi-rank check of the schedules' send/recv order. */
#ifndef MYRIAD_PARALLEL_SCHEDULE_RUN_H
#define MYRIAD_PARALLEL_SCHEDULE_RUN_H

#include <stddef.h>

#include "comm/comm.h"
#include "parallel/schedule.h"
#include "trace/trace.h"

typedef struct {
    int (*forward)(void *ctx, int mb, int chunk);  /* 0 or -1 (with myr_error) */
    int (*backward)(void *ctx, int mb, int chunk);
    /* The fp32 buffer a transfer reads (sends) or fills (receives), and its length. A send's
     * buffer must stay untouched until schedule_run_stage returns when sends are nonblocking. */
    float *(*buffer)(void *ctx, const ScheduleOp *op, size_t *count);
} ScheduleHooks;

/* Run stage `stage`'s list in order. blocking_sends = 1: comm_send / comm_recv (only for lists
 * that are safe with blocking transfers, sc->blocking_safe: GPipe, 1F1B, schedule_build_blocking); 0: sends are comm_isend, waited for at
 * the end, receives block (valid for every schedule). trace may be NULL; otherwise computes go
 * to lane 0 ("compute", categories forward/backward) and transfers to lane 1 ("comm"). */
int schedule_run_stage(const Schedule *sc, int stage, Comm *pp, const ScheduleHooks *hooks, void *ctx,
                       int blocking_sends, TraceBuffer *trace);

#endif
