/* goodput_predict.h: the effective training time of a fault-injected run, predicted (`myriad sim
 * goodput`, docs/SIMULATOR.md "Goodput of a fault soak"): what fraction of the wall time the
 * launcher's time ledger will count as productive, from the fault rate, the checkpoint interval,
 * the step time and the measured cost of a recovery. Pure arithmetic (goodput_predict.c); the
 * command and the calibration reader are goodput_cmd.c. */
#ifndef MYRIAD_SIM_GOODPUT_PREDICT_H
#define MYRIAD_SIM_GOODPUT_PREDICT_H

#include "util/fault_clock.h"

typedef struct {
    long long steps;        /* steps the job computes (train --steps) */
    double step_s;          /* up time of one step: the ledger's productive + checkpoint + data + eval per step */
    double productive_s;    /* the productive part of it */
    double fixed_s;         /* wall time no fault can strike: the first attempt's start, the finish */
    double recovery_s[CLOCK_KINDS]; /* down time of one fault: detection .. rejoin (a hang: detected from the
                                     * stopped rank's last step report, i.e. as if it struck there) */
    int copy_every;         /* steps between restorable copies (--mem-ckpt-every, else --save-every) */
    double commit_lag;      /* steps from a copy's step to its commit: 1 = at the end of the next step
                             * (an in-memory copy of step k commits before step k+1's update) */
    FaultClock clock;       /* the fault rate (mtbf_s, up time) and kinds; its seed for the replay */
} GoodputModel;

typedef struct {
    double wall_s, productive_s, up_s, down_s, faults, lost_s; /* lost_s: work computed again */
    double effective;       /* productive_s / wall_s */
    double sigma;           /* expectation only: the standard deviation of the effective fraction from
                             * the Poisson count of faults (the spread over seeds) */
} GoodputPrediction;

/* Checks the model: 0, or -1 with myr_error() naming the bad input. */
int goodput_model_check(const GoodputModel *m);
/* Expected up time lost to one fault: the work since the newest committed copy. */
double goodput_lost_per_fault(const GoodputModel *m);
/* The expectation over fault schedules (the analytic model, formula in goodput_predict.c). */
int goodput_expect(const GoodputModel *m, GoodputPrediction *p);
/* The same costs over exactly the schedule of the clock's seed (the launcher's draws, attempt by
 * attempt): the prediction for one soak with its seed. Resets a copy of m->clock. */
int goodput_replay(const GoodputModel *m, GoodputPrediction *p);
/* The replay over the given draws, the job ending after the last (tests: hand-made schedules). */
int goodput_replay_draws(const GoodputModel *m, const ClockDraw *draws, int n, GoodputPrediction *p);

/* `myriad sim goodput ...` (goodput_cmd.c); argv[0] is "goodput". */
int sim_goodput_main(int argc, char **argv);

#endif
