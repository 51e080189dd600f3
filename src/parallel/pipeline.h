/* pipeline.h: pipeline-parallel training step. This rank holds vpp model chunks (virtual
 * stages chunk*pp + pp_rank, each a Model object over its layers); the schedule (schedule.h)
 * orders their forwards and backwards per micro-batch and the activations and gradients
 * exchanged with the neighbouring stages (schedule_run.h). Each in-flight micro-batch keeps
 * its activations in its own slot of the chunk's model (model_select_slot), freed after its
 * backward, so the allocator's count of live slots is the schedule's memory footprint. */
#ifndef MYRIAD_PARALLEL_PIPELINE_H
#define MYRIAD_PARALLEL_PIPELINE_H

#include "comm/comm.h"
#include "model/model.h"
#include "parallel/data_parallel.h"
#include "parallel/schedule.h"
#include "trace/trace.h"

typedef struct {
    int pp, pp_rank, vpp, micro, micro_rows, T;
    Comm *pp_group, *embed_group;
    Schedule sched;
    int blocking_sends;
    Model *chunk;      /* [vpp] */
    DataParallel *dp;  /* [vpp] one data-parallel engine per chunk */
    int *last_bwd_mb;  /* [vpp] micro-batch of the chunk's last backward in the schedule */
    float **act_in, **act_out, **grad_in, **grad_out; /* [vpp * micro] transfer buffers (pinned host memory) */
    size_t act_elems;  /* rows x hidden of one micro-batch's activation on this rank */
    const int32_t *x, *y; /* this step's token rows of this rank's slice */
    double loss_sum;
    double compute_s, run_s; /* last step: time in forward/backward, and the whole schedule */
    TraceBuffer *trace;      /* record the next step when set */
} Pipeline;

/* chunks/dps: vpp models and their data-parallel engines, already created. */
int pipeline_create(Pipeline *pl, Model *chunks, DataParallel *dps, int vpp, int pp, int pp_rank, Comm *pp_group,
                    Comm *embed_group, ScheduleKind kind, int micro, int micro_rows, int T);
void pipeline_destroy(Pipeline *pl);
/* Forwards and backwards of every micro-batch of x/y (micro * micro_rows rows of T tokens);
 * returns the mean loss (the same on every pipeline stage). Gradients accumulate in the chunks;
 * a tied embedding's two halves are summed and every chunk's reductions finished. */
double pipeline_forward_backward(Pipeline *pl, const int32_t *x, const int32_t *y);
/* Forward only (evaluation): mean cross-entropy over rows of x/y (no load-balancing term), the same
 * on every stage. */
double pipeline_forward(Pipeline *pl, const int32_t *x, const int32_t *y, int rows);
/* The same, calling last(ctx, m) on the last stage's chunk right after its forward, while its
 * activations (the logits) are still there (sampling reads them). */
double pipeline_forward_visit(Pipeline *pl, const int32_t *x, const int32_t *y, int rows,
                              void (*last)(void *ctx, Model *m), void *ctx);
/* Exact sum of one double over a group (rank order). */
double group_sum_exact(Comm *g, double x);

#endif
