/* trainer.h: one optimizer step of a model (single process): forward, backward, global-norm
 * clipping, learning-rate schedule and AdamW. The CLI (train_cmd.c) drives it with batches
 * from the data loader; tests drive it directly with fixture batches. */
#ifndef MYRIAD_TRAIN_TRAINER_H
#define MYRIAD_TRAIN_TRAINER_H

#include <stdint.h>

#include "model/model.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline.h"
#include "optim/lr_schedule.h"

typedef struct {
    AdamWConfig adam;
    LrSchedule schedule;
    double clip; /* max global grad norm; <= 0 disables */
} OptimOptions;

typedef struct {
    Model *model;
    AdamW opt;            /* single process: the whole model's state */
    DataParallel *dp;     /* or data parallelism (owns the optimizer state); NULL if single process */
    int micro_rows;       /* gradient accumulation: sequences per micro-batch (0 = whole slice) */
    Pipeline *pipeline;   /* pipeline parallelism: the step runs its schedule over the chunks */
    OptimOptions o;
    long step;            /* steps completed */
    double last_exposed_comm_s;
    /* where the last step's time went (seconds): the sections are this thread's CPU time without
     * its communication waits; comm is the wall time blocked in communication; checkpoint = the
     * before_update hook. With pipeline parallelism forward and backward interleave: both are
     * counted as backward. */
    struct { double forward, backward, optimizer, checkpoint, comm; } sections;
    double slow_factor;   /* > 1: every compute section is stretched by it (fault injection) */
    /* called after forward and backward, before the optimizer changes any state (an in-memory
     * checkpoint copying the previous step's state meanwhile finishes there); may be NULL */
    void (*before_update)(void *ctx);
    void *before_update_ctx;
    /* non-finite steps (docs/TRAINING.md): the loss and gradient norm are checked before the
     * update; over `agree` (every rank of the job; NULL in a single process) all ranks take the
     * same decision. A non-finite step makes no update: parameters and AdamW moments stay as
     * they were, while the step number (the LR schedule's position and AdamW's bias-correction
     * count, which resumes also derive from it) moves on. */
    Comm *agree;
    long poison_step; /* testing (--inject-nan): at this step (0-based) this rank turns one gradient to NaN; -1 none */
} Trainer;

typedef struct {
    double loss, lr, grad_norm;
    int nonfinite; /* the loss or the gradient norm was NaN or infinite on some rank: no update was made */
} StepResult;

/* Defaults: AdamW(0.9, 0.95, 1e-8, wd 0.1), constant 3e-4 lr, clip 1.0. */
void optim_options_default(OptimOptions *o);
/* dp may be NULL (single process); micro_rows 0 = no accumulation. */
void trainer_create(Trainer *t, Model *m, const OptimOptions *o, DataParallel *dp, int micro_rows);
void trainer_destroy(Trainer *t);
/* One step on this rank's rows of the global batch, x/y [rows*T] (all of it in a single
 * process): the slice is split into micro-batches of micro_rows sequences whose gradients
 * accumulate; with dp they are averaged over the group. Returns the global mean loss (before
 * the update), the lr used and the global pre-clip gradient norm; nonfinite (same on every rank)
 * when either was not finite, in which case nothing was updated. */
StepResult trainer_step(Trainer *t, const int32_t *x, const int32_t *y, int rows, int T);

#endif
