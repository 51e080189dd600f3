/* train_phases.c: start-up phase times of a run (train_phases.h). */
#include "train/train_phases.h"

#include <time.h>

#include "train/train_job.h"

double train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double began[TRAIN_PHASES], ended[TRAIN_PHASES];

void train_phase_begin(int phase) { began[phase] = train_now_s(), ended[phase] = 0; }
void train_phase_end(int phase) { ended[phase] = train_now_s(); }
double train_phase_seconds(int phase) { return ended[phase] > 0 && began[phase] > 0 ? ended[phase] - began[phase] : -1; }
double train_phase_end_time(int phase) { return ended[phase] > 0 ? ended[phase] : -1; }
