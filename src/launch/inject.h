/* inject.h: fault-injection specs for `myriad run --inject` (kill@STEP:RANK, hang@STEP:RANK,
 * host@STEP:HOST, corrupt@STEP, nan@STEP:RANK, slow@STEP:RANK:FACTOR, cmd@STEP,
 * random:SEED:COUNT[:MAXSTEP]) parsed into a list of faults that the supervisor fires when a rank
 * reports the step (nan@ and slow@ are carried out by the rank itself: --inject-nan,
 * MYRIAD_INJECT_SLOW). Semantics: docs/LAUNCHER.md. */
#ifndef MYRIAD_LAUNCH_INJECT_H
#define MYRIAD_LAUNCH_INJECT_H

#include <stdint.h>

#include "util/fault_clock.h"

typedef enum { FAULT_KILL, FAULT_HANG, FAULT_HOST, FAULT_CORRUPT, FAULT_NAN, FAULT_SLOW, FAULT_CMD } FaultKind;

typedef struct {
    FaultKind kind;
    long long step;  /* fires when a rank (or `rank`) first reports this step */
    int rank;        /* KILL, HANG, NAN, SLOW; -1 otherwise */
    char host[64];   /* HOST; SLOW: the host the slowed rank ran on when it took effect */
    double factor;   /* SLOW: compute takes this many times longer (> 1) */
    int job_level;   /* random: fires when the job step (slowest rank) reaches `step` */
    int fired;
} Fault;

typedef struct {
    Fault *faults;
    int n, cap;
    uint64_t seed;   /* for corrupt@ (which file, which bit); the last random: seed or 1 */
    FaultClock clock; /* --inject-rate: faults at Poisson times (mtbf_s 0: off) */
    long long clock_last_step; /* the program's last step (train --steps): no clock fault from there on; 0 unknown */
} FaultPlan;

/* Add the faults of one --inject value (comma-separated specs allowed) for a job of nranks.
 * Returns 0, or -1 with myr_error() naming the bad spec and the expected forms. */
int inject_parse(FaultPlan *plan, const char *spec, int nranks);
void inject_free(FaultPlan *plan);
const char *fault_kind_name(FaultKind k);

/* splitmix64 step (deterministic draws for random: and corrupt@). */
uint64_t inject_next(uint64_t *state);

#endif
