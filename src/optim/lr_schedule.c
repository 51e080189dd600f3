/* lr_schedule.c: constant and warmup+cosine learning-rate schedules. */
#include "optim/lr_schedule.h"

#include <math.h>
#include <string.h>

#include "util/error.h"

double lr_at(const LrSchedule *s, long step) {
    if (s->warmup > 0 && step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    if (s->kind == LR_CONSTANT) return s->lr;
    long span = s->steps - s->warmup;
    if (span <= 0) return s->lr;
    double progress = (double)(step - s->warmup) / (double)span;
    if (progress > 1) progress = 1;
    return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1 + cos(M_PI * progress));
}

int lr_schedule_parse(const char *name, LrScheduleKind *out) {
    if (!strcmp(name, "constant")) *out = LR_CONSTANT;
    else if (!strcmp(name, "cosine")) *out = LR_COSINE;
    else return myr_error("unknown --lr-schedule '%s' (use constant or cosine)", name);
    return 0;
}
