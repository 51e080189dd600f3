/* trainer.c: the single-process training step. */
#include "train/trainer.h"

#include <math.h>
#include <string.h>

#include "comm/comm.h"
#include "kernels/kernels.h"
#include "optim/clip.h"
#include "util/clock.h"

/* A point in the step: this thread's CPU time and the part of it spent waiting for communication.
 * A section is the CPU time since its mark less the waits (those are the comm section's): the
 * computing the rank did, which the OS giving the core to other processes does not inflate. */
typedef struct {
    double cpu, comm_cpu;
} Mark;

static Mark mark(void) { return (Mark){clock_thread_cpu_s(), comm_wait_cpu_seconds()}; }

static double compute_since(Mark m) { return clock_thread_cpu_s() - m.cpu - (comm_wait_cpu_seconds() - m.comm_cpu); }

/* The compute since m, added to *section; with an injected slow factor first stretched to factor
 * times itself by computing more (a slower device does the same work in more time: spinning, not
 * sleeping, so CPU-time timings see it as they would a slow chip). */
static void section_end(const Trainer *t, Mark m, double *section) {
    double compute = compute_since(m);
    if (t->slow_factor > 1 && compute > 0) {
        double until = clock_thread_cpu_s() + (t->slow_factor - 1) * compute;
        volatile double x = 1;
        while (clock_thread_cpu_s() < until)
            for (int i = 0; i < 2000; i++) x = x * 1.0000001 + 1e-9;
        compute = compute_since(m);
    }
    *section += compute;
}

void optim_options_default(OptimOptions *o) {
    o->adam.beta1 = 0.9;
    o->adam.beta2 = 0.95;
    o->adam.eps = 1e-8;
    o->adam.weight_decay = 0.1;
    o->schedule.kind = LR_CONSTANT;
    o->schedule.lr = 3e-4;
    o->schedule.min_lr = 0;
    o->schedule.warmup = 0;
    o->schedule.steps = 1;
    o->clip = 1.0;
}

void trainer_create(Trainer *t, Model *m, const OptimOptions *o, DataParallel *dp, int micro_rows) {
    memset(t, 0, sizeof *t);
    t->poison_step = -1;
    t->model = m;
    t->o = *o;
    t->dp = dp;
    t->micro_rows = micro_rows;
    if (!dp) adamw_create(&t->opt, 0, m->table.total);
}

void trainer_destroy(Trainer *t) {
    if (!t->dp) adamw_destroy(&t->opt);
}

/* A non-finite loss or gradient norm anywhere is a non-finite step everywhere: one all-reduce of
 * a flag, so that no rank updates (or stops) while another goes on. */
static int step_nonfinite(const Trainer *t, double loss, double norm) {
    float bad = !isfinite(loss) || !isfinite(norm);
    if (t->agree && comm_all_reduce(t->agree, &bad, &bad, 1, COMM_F32, COMM_MAX)) return 1;
    return bad != 0;
}

/* --inject-nan: one gradient element this rank's norm counts becomes NaN (after the reduction:
 * as a corrupted reduced gradient would). */
static void poison_gradient(Trainer *t, DataParallel *dp, Model *m) {
    if (t->step != t->poison_step) return;
    if (dp) dp_poison_grad(dp);
    else if (m->table.count) {
        real nan = (real)NAN; /* the gradients may live in device memory */
        host_to_dev(m->grads + m->table.info[0].offset, &nan, sizeof nan);
    }
}

/* A skipped update still counts as a step for AdamW's bias correction (as a resume at this step
 * would set it): the step number alone says where the optimizer is. */
static void skip_update(Trainer *t, DataParallel *dps, int n) {
    if (!dps) t->opt.step++;
    for (int c = 0; dps && c < n; c++)
        for (int i = 0; i < dps[c].nopt; i++) dps[c].opt[i].step++;
    t->step++;
}

/* Pipeline parallelism: the schedule runs every micro-batch on this rank's chunks; the norm
 * is summed over data-parallel pieces, tensor-parallel slices and pipeline stages. */
static StepResult pipeline_step(Trainer *t, const int32_t *x, const int32_t *y) {
    Pipeline *pl = t->pipeline;
    StepResult r;
    Mark m = mark();
    double loss = pipeline_forward_backward(pl, x, y);
    section_end(t, m, &t->sections.backward);
    m = mark();
    poison_gradient(t, &pl->dp[0], &pl->chunk[0]); /* the gradients are reduced by now */
    r.loss = dp_mean(&pl->dp[0], loss);
    double sum_sq = 0, exposed = 0;
    for (int c = 0; c < pl->vpp; c++) {
        sum_sq += dp_grad_sum_squares(&pl->dp[c]);
        exposed += pl->dp[c].exposed_comm_s;
    }
    t->last_exposed_comm_s = exposed;
    Model *m0 = &pl->chunk[0];
    if (m0->tp.size > 1) m0->tp.sum_exact(m0->tp.ctx, &sum_sq, 1, 0);
    sum_sq = group_sum_exact(pl->pp_group, sum_sq);
    r.grad_norm = sqrt(sum_sq);
    r.lr = lr_at(&t->o.schedule, t->step);
    r.nonfinite = step_nonfinite(t, r.loss, r.grad_norm);
    section_end(t, m, &t->sections.optimizer);
    m = mark();
    if (t->before_update) t->before_update(t->before_update_ctx);
    section_end(t, m, &t->sections.checkpoint);
    m = mark();
    if (r.nonfinite) {
        skip_update(t, pl->dp, pl->vpp);
        return r;
    }
    double coef = clip_coefficient(r.grad_norm, t->o.clip);
    for (int c = 0; c < pl->vpp; c++) {
        if (coef < 1.0) dp_scale_grads(&pl->dp[c], (real)coef);
        dp_optimizer_step(&pl->dp[c], &t->o.adam, r.lr);
    }
    section_end(t, m, &t->sections.optimizer);
    t->step++;
    return r;
}

static StepResult step(Trainer *t, const int32_t *x, const int32_t *y, int rows, int T);

StepResult trainer_step(Trainer *t, const int32_t *x, const int32_t *y, int rows, int T) {
    memset(&t->sections, 0, sizeof t->sections);
    double comm0 = comm_wait_seconds();
    StepResult r = t->pipeline ? pipeline_step(t, x, y) : step(t, x, y, rows, T);
    t->sections.comm = comm_wait_seconds() - comm0;
    return r;
}

static StepResult step(Trainer *t, const int32_t *x, const int32_t *y, int rows, int T) {
    Model *m = t->model;
    DataParallel *dp = t->dp;
    StepResult r;
    int micro = t->micro_rows > 0 && t->micro_rows < rows ? t->micro_rows : rows;
    int chunks = rows / micro;
    Mark mk = mark();
    if (dp) dp_begin_step(dp);
    else model_zero_grad(m);
    double loss = 0;
    for (int c = 0; c < chunks; c++) {
        if (dp) dp_set_last_micro(dp, c == chunks - 1);
        size_t off = (size_t)c * micro * T;
        loss += model_forward(m, x + off, y + off, micro, T, 1.0 / chunks);
        section_end(t, mk, &t->sections.forward);
        mk = mark();
        model_backward(m);
        section_end(t, mk, &t->sections.backward);
        mk = mark();
    }
    loss /= chunks;
    double sum_sq;
    if (dp) {
        dp_finish_backward(dp);
        poison_gradient(t, dp, m); /* after the reduction, before the norm */
        t->last_exposed_comm_s = dp->exposed_comm_s;
        r.loss = dp_mean(dp, loss);
        sum_sq = dp_grad_sum_squares(dp);
        if (m->tp.size > 1) m->tp.sum_exact(m->tp.ctx, &sum_sq, 1, 0); /* and over the tensor-parallel slices */
    } else {
        r.loss = loss;
        poison_gradient(t, NULL, m);
        sum_sq = grad_sum_squares(m->grads, m->table.total);
    }
    r.grad_norm = sqrt(sum_sq);
    r.lr = lr_at(&t->o.schedule, t->step);
    r.nonfinite = step_nonfinite(t, r.loss, r.grad_norm);
    section_end(t, mk, &t->sections.optimizer);
    mk = mark();
    if (t->before_update) t->before_update(t->before_update_ctx);
    section_end(t, mk, &t->sections.checkpoint);
    mk = mark();
    if (r.nonfinite) {
        skip_update(t, dp, 1);
        return r;
    }
    double coef = clip_coefficient(r.grad_norm, t->o.clip);
    if (dp) {
        if (coef < 1.0) dp_scale_grads(dp, (real)coef);
        dp_optimizer_step(dp, &t->o.adam, r.lr);
    } else {
        if (coef < 1.0) scale_inplace(m->grads, (real)coef, m->table.total);
        adamw_step(&t->opt, &t->o.adam, r.lr, m->params, m->grads, &m->table);
    }
    section_end(t, mk, &t->sections.optimizer);
    t->step++;
    return r;
}
