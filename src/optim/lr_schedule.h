/* lr_schedule.h: learning rate at a step (0-based).
 *   constant: lr (after linear warmup if warmup > 0).
 *   cosine:   linear warmup lr*(s+1)/warmup for s < warmup, then
 *             min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (s - warmup) / (steps - warmup))). */
#ifndef MYRIAD_OPTIM_LR_SCHEDULE_H
#define MYRIAD_OPTIM_LR_SCHEDULE_H

typedef enum { LR_CONSTANT = 0, LR_COSINE = 1 } LrScheduleKind;

typedef struct {
    LrScheduleKind kind;
    double lr, min_lr;
    long warmup, steps;
} LrSchedule;

double lr_at(const LrSchedule *s, long step);
int lr_schedule_parse(const char *name, LrScheduleKind *out);

#endif
