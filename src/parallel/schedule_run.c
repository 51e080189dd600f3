/* schedule_run.c: one stage's pipeline schedule over the comm layer: hooks compute, transfers go
 * over the pipeline group, every op can be traced. See schedule_run.h. */
#include "parallel/schedule_run.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"

static const char *op_label(ScheduleOpKind k) {
    static const char *const labels[] = {"forward", "backward", "send act", "recv act", "send grad", "recv grad"};
    return labels[k];
}

int schedule_run_stage(const Schedule *sc, int stage, Comm *pp, const ScheduleHooks *hooks, void *ctx,
                       int blocking_sends, TraceBuffer *trace) {
    if (stage < 0 || stage >= sc->pp) return myr_error("schedule: stage %d is outside 0..%d", stage, sc->pp - 1);
    if (comm_size(pp) != sc->pp)
        return myr_error("schedule: the pipeline group has %d ranks but the schedule %d stages", comm_size(pp), sc->pp);
    if (blocking_sends && !sc->blocking_safe) /* e.g. interleaved: its ring deadlocks (PIPELINE.md) */
        return myr_error("schedule: these %s lists need nonblocking sends (blocking_sends = 0), or build them "
                         "with schedule_build_blocking", schedule_name(sc->kind));
    if (trace) trace_lane_name(trace, 0, "compute"), trace_lane_name(trace, 1, "comm");
    int n = sc->nops[stage], nreq = 0, rc = 0;
    CommRequest **reqs = calloc((size_t)n + 1, sizeof *reqs);
    if (!reqs) return myr_error("schedule: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        const ScheduleOp *op = &sc->ops[stage][i];
        double t0 = trace ? trace_now_us() : 0;
        size_t count = 0;
        switch (op->kind) {
        case OP_FORWARD: rc = hooks->forward(ctx, op->mb, op->chunk); break;
        case OP_BACKWARD: rc = hooks->backward(ctx, op->mb, op->chunk); break;
        case OP_SEND_ACT:
        case OP_SEND_GRAD: {
            float *buf = hooks->buffer(ctx, op, &count);
            if (!buf) rc = -1;
            else if (blocking_sends) rc = comm_send(pp, buf, count, COMM_F32, op->peer);
            else rc = comm_isend(pp, buf, count, COMM_F32, op->peer, &reqs[nreq++]);
            break;
        }
        case OP_RECV_ACT:
        case OP_RECV_GRAD: {
            float *buf = hooks->buffer(ctx, op, &count);
            rc = buf ? comm_recv(pp, buf, count, COMM_F32, op->peer) : -1;
            break;
        }
        }
        if (rc == 0 && trace) {
            char name[48];
            schedule_op_str(op, sc->vpp, name, sizeof name);
            int compute = op->kind == OP_FORWARD || op->kind == OP_BACKWARD;
            TraceEvent *e = trace_end(trace, name, compute ? op_label(op->kind) : "comm", compute ? 0 : 1, t0);
            if (e) {
                trace_arg(e, "mb", op->mb), trace_arg(e, "chunk", op->chunk);
                if (!compute) trace_arg(e, "peer", op->peer), trace_arg(e, "bytes", (int64_t)(count * sizeof(float)));
            }
        }
        if (rc == 0 && nreq) rc = comm_progress();
    }
    for (int i = 0; i < nreq; i++)
        if (reqs[i] && comm_wait(&reqs[i]) < 0 && rc == 0) rc = -1;
    free(reqs);
    return rc;
}
