/* trainer.c: the single-process training step. */
#include "train/trainer.h"

#include <math.h>

#include "kernels/kernels.h"
#include "optim/clip.h"

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

void trainer_create(Trainer *t, Model *m, const OptimOptions *o) {
    t->model = m;
    t->o = *o;
    t->step = 0;
    adamw_create(&t->opt, 0, m->table.total);
}

void trainer_destroy(Trainer *t) { adamw_destroy(&t->opt); }

StepResult trainer_step(Trainer *t, const int32_t *x, const int32_t *y, int B, int T) {
    Model *m = t->model;
    StepResult r;
    model_zero_grad(m);
    r.loss = model_forward(m, x, y, B, T, 1.0);
    model_backward(m);
    size_t n = m->table.total;
    r.grad_norm = sqrt(grad_sum_squares(m->grads, n));
    double coef = clip_coefficient(r.grad_norm, t->o.clip);
    if (coef < 1.0) scale_inplace(m->grads, (real)coef, n);
    r.lr = lr_at(&t->o.schedule, t->step);
    adamw_step(&t->opt, &t->o.adam, r.lr, m->params, m->grads, &m->table);
    t->step++;
    return r;
}
