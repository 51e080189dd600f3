/* pipeline.c: runs the schedule's forwards/backwards on the model chunks (see the header). */
#include "parallel/pipeline.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "parallel/device_comm.h"
#include "parallel/schedule_run.h"
#include "util/error.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double group_sum_exact(Comm *g, double x) {
    int n = comm_size(g);
    double *all = malloc((size_t)n * sizeof(double));
    if (comm_all_gather(g, &x, all, 2, COMM_F32)) myr_die_last();
    double s = 0;
    for (int r = 0; r < n; r++) s += all[r];
    free(all);
    return s;
}

static int virtual_stage(const Pipeline *pl, int chunk) { return chunk * pl->pp + pl->pp_rank; }
static float **slot(float **bufs, const Pipeline *pl, int chunk, int mb) { return &bufs[chunk * pl->micro + mb]; }

static int hook_forward(void *ctx, int mb, int chunk) {
    Pipeline *pl = ctx;
    Model *m = &pl->chunk[chunk];
    double t0 = now_s();
    model_select_slot(m, mb);
    size_t off = (size_t)mb * pl->micro_rows * pl->T;
    const real *input = m->stage.first ? NULL : *slot(pl->act_in, pl, chunk, mb);
    double loss = model_forward_stage(m, pl->x + off, input, m->stage.last ? pl->y + off : NULL, pl->micro_rows, pl->T,
                                      1.0 / pl->micro);
    pl->loss_sum += loss; /* other stages: their MoE layers' load-balancing term */
    if (!m->stage.last) model_stage_output_to_host(m, *slot(pl->act_out, pl, chunk, mb));
    pl->compute_s += now_s() - t0;
    return 0;
}

static int hook_backward(void *ctx, int mb, int chunk) {
    Pipeline *pl = ctx;
    Model *m = &pl->chunk[chunk];
    double t0 = now_s();
    model_select_slot(m, mb);
    dp_set_last_micro(&pl->dp[chunk], mb == pl->last_bwd_mb[chunk]);
    model_backward_stage(m, m->stage.last ? NULL : *slot(pl->grad_in, pl, chunk, mb));
    if (!m->stage.first) model_stage_input_grad_to_host(m, *slot(pl->grad_out, pl, chunk, mb));
    model_release_slot(m);
    pl->compute_s += now_s() - t0;
    return 0;
}

static float *hook_buffer(void *ctx, const ScheduleOp *op, size_t *count) {
    Pipeline *pl = ctx;
    *count = pl->act_elems;
    switch (op->kind) {
    case OP_SEND_ACT: return *slot(pl->act_out, pl, op->chunk, op->mb);
    case OP_RECV_ACT: return *slot(pl->act_in, pl, op->chunk, op->mb);
    case OP_SEND_GRAD: return *slot(pl->grad_out, pl, op->chunk, op->mb);
    case OP_RECV_GRAD: return *slot(pl->grad_in, pl, op->chunk, op->mb);
    default: return NULL;
    }
}

int pipeline_create(Pipeline *pl, Model *chunks, DataParallel *dps, int vpp, int pp, int pp_rank, Comm *pp_group,
                    Comm *embed_group, ScheduleKind kind, int micro, int micro_rows, int T) {
    memset(pl, 0, sizeof *pl);
    pl->pp = pp;
    pl->pp_rank = pp_rank;
    pl->vpp = vpp;
    pl->micro = micro;
    pl->micro_rows = micro_rows;
    pl->T = T;
    pl->pp_group = pp_group;
    pl->embed_group = embed_group;
    pl->chunk = chunks;
    pl->dp = dps;
    if (schedule_validate(kind, pp, vpp, micro) || schedule_build(&pl->sched, kind, pp, vpp, micro)) return -1;
    pl->blocking_sends = 0; /* nonblocking sends are valid for every schedule (docs/PIPELINE.md) */
    pl->last_bwd_mb = calloc((size_t)vpp, sizeof(int));
    for (int i = 0; i < pl->sched.nops[pp_rank]; i++) {
        const ScheduleOp *op = &pl->sched.ops[pp_rank][i];
        if (op->kind == OP_BACKWARD) pl->last_bwd_mb[op->chunk] = op->mb;
    }
    pl->act_elems = model_local_rows(&chunks[0], (size_t)micro_rows * T) * (size_t)chunks[0].cfg.hidden;
    size_t n = (size_t)vpp * micro;
    float ***sets[] = {&pl->act_in, &pl->act_out, &pl->grad_in, &pl->grad_out};
    for (int k = 0; k < 4; k++) {
        *sets[k] = calloc(n, sizeof(float *));
        for (size_t i = 0; i < n; i++) (*sets[k])[i] = host_alloc_pinned(pl->act_elems * sizeof(real));
    }
    /* a tied embedding lives on the first and the last stage: their gradients are summed after
     * the schedule, before the data-parallel reduction of those units */
    for (int c = 0; c < vpp; c++) {
        Model *m = &chunks[c];
        if (!m->cfg.tied_embeddings || (m->stage.first && m->stage.last)) continue;
        if (m->stage.first) dp_defer_unit(&dps[c], 0);
        if (m->stage.last) dp_defer_unit(&dps[c], m->table.units - 1);
    }
    (void)virtual_stage;
    return 0;
}

void pipeline_destroy(Pipeline *pl) {
    size_t n = (size_t)pl->vpp * pl->micro;
    float **sets[] = {pl->act_in, pl->act_out, pl->grad_in, pl->grad_out};
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; sets[k] && i < n; i++) host_free_pinned(sets[k][i]);
        free(sets[k]);
    }
    free(pl->last_bwd_mb);
    schedule_free(&pl->sched);
}

/* The embedding's gradient on the first stage and its copy's on the last stage: sum them. */
static void sum_tied_embedding(Pipeline *pl) {
    if (!pl->embed_group) return;
    for (int c = 0; c < pl->vpp; c++) {
        Model *m = &pl->chunk[c];
        if (!m->cfg.tied_embeddings || (m->stage.first && m->stage.last)) continue;
        const ParamInfo *p = param_table_find(&m->table, m->stage.first ? "tok_emb" : "lm_head");
        if (!p || (!m->stage.first && !m->stage.last)) continue;
        real *g = model_tensors_get(&m->g, p);
        if (dcomm_all_reduce(pl->embed_group, g, p->numel, COMM_F32, COMM_SUM)) myr_die_last();
    }
}

/* Training: the loss is the last stage's cross-entropy plus every stage's load-balancing term (MoE;
 * zero for dense stages); evaluation: the cross-entropy. Sum the stages' parts (exact doubles),
 * the same on every stage. */
static double share_loss(Pipeline *pl, double loss) { return group_sum_exact(pl->pp_group, loss); }

double pipeline_forward_backward(Pipeline *pl, const int32_t *x, const int32_t *y) {
    pl->x = x;
    pl->y = y;
    pl->loss_sum = 0;
    pl->compute_s = 0;
    for (int c = 0; c < pl->vpp; c++) dp_begin_step(&pl->dp[c]);
    ScheduleHooks hooks = {hook_forward, hook_backward, hook_buffer};
    double t0 = now_s();
    if (schedule_run_stage(&pl->sched, pl->pp_rank, pl->pp_group, &hooks, pl, pl->blocking_sends, pl->trace))
        myr_die_last();
    pl->run_s = now_s() - t0;
    sum_tied_embedding(pl);
    for (int c = 0; c < pl->vpp; c++) dp_finish_backward(&pl->dp[c]);
    return share_loss(pl, pl->loss_sum / pl->micro);
}

double pipeline_forward(Pipeline *pl, const int32_t *x, const int32_t *y, int rows) {
    return pipeline_forward_visit(pl, x, y, rows, NULL, NULL);
}

double pipeline_forward_visit(Pipeline *pl, const int32_t *x, const int32_t *y, int rows,
                              void (*last)(void *ctx, Model *m), void *ctx) {
    /* virtual stages in order; each hands its output to the owner of the next one */
    int V = pl->pp * pl->vpp, T = pl->T, C = pl->chunk[0].cfg.hidden;
    size_t elems = model_local_rows(&pl->chunk[0], (size_t)rows * T) * (size_t)C;
    real *buf = host_alloc_pinned(elems * sizeof(real));
    double loss = 0;
    for (int vs = 0; vs < V; vs++) {
        int owner = vs % pl->pp, chunk = vs / pl->pp;
        if (owner != pl->pp_rank) continue;
        Model *m = &pl->chunk[chunk];
        model_select_slot(m, pl->micro); /* a slot of its own, past the training ones */
        if (!m->stage.first && comm_recv(pl->pp_group, buf, elems, COMM_F32, (vs - 1) % pl->pp)) myr_die_last();
        double l = model_forward_stage(m, x, m->stage.first ? NULL : buf, m->stage.last ? y : NULL, rows, T, 0);
        if (m->stage.last) {
            loss += l - m->cfg.aux_loss_coef * m->moe_aux; /* cross-entropy only */
            if (last) last(ctx, m);
        } else {
            model_stage_output_to_host(m, buf);
            if (comm_send(pl->pp_group, buf, elems, COMM_F32, (vs + 1) % pl->pp)) myr_die_last();
        }
        model_release_slot(m);
    }
    host_free_pinned(buf);
    return share_loss(pl, loss);
}
