/* trainer.h: one optimizer step of a model (single process): forward, backward, global-norm
 * clipping, learning-rate schedule and AdamW. The CLI (train_cmd.c) drives it with batches
 * from the data loader; tests drive it directly with fixture batches. */
#ifndef MYRIAD_TRAIN_TRAINER_H
#define MYRIAD_TRAIN_TRAINER_H

#include <stdint.h>

#include "model/model.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

typedef struct {
    AdamWConfig adam;
    LrSchedule schedule;
    double clip; /* max global grad norm; <= 0 disables */
} OptimOptions;

typedef struct {
    Model *model;
    AdamW opt;
    OptimOptions o;
    long step; /* steps completed */
} Trainer;

typedef struct {
    double loss, lr, grad_norm;
} StepResult;

/* Defaults: AdamW(0.9, 0.95, 1e-8, wd 0.1), constant 3e-4 lr, clip 1.0. */
void optim_options_default(OptimOptions *o);
void trainer_create(Trainer *t, Model *m, const OptimOptions *o);
void trainer_destroy(Trainer *t);
/* One step on x/y [B*T]: returns loss (before the update), the lr used and the pre-clip norm. */
StepResult trainer_step(Trainer *t, const int32_t *x, const int32_t *y, int B, int T);

#endif
