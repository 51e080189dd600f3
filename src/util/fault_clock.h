/* fault_clock.h: the Poisson fault clock of `myriad run --inject-rate` and of its prediction,
 * `myriad sim goodput` (docs/OPERATIONS.md, "Fault soaks and predicted goodput"). One seeded
 * splitmix64 stream gives every fault its time, kind and target, so a soak's fault schedule is the
 * same on every run and the simulator can replay exactly the schedule the launcher fires.
 *
 * The clock runs in the job's up time: each attempt, from the moment every rank has connected,
 * waits one exponential inter-arrival time (mean MTBF) and then fires the next fault. Because the
 * exponential is memoryless this is the same as a Poisson process of rate 1/MTBF in wall time
 * whose arrivals during a recovery (when no rank runs) find nothing to strike and are lost. */
#ifndef MYRIAD_UTIL_FAULT_CLOCK_H
#define MYRIAD_UTIL_FAULT_CLOCK_H

#include <stdint.h>

enum { CLOCK_KILL, CLOCK_HANG, CLOCK_HOST, CLOCK_KINDS };

typedef struct {
    double mtbf_s;      /* mean up time between faults, seconds (> 0 when the clock is on) */
    int kinds[CLOCK_KINDS]; /* 1: that kind is drawn (uniformly among those listed) */
    int nkinds;
    uint64_t seed;      /* seed=N (default 1) */
    uint64_t state;     /* the stream: reset to seed by fault_clock_reset */
    long long drawn;    /* draws so far */
} FaultClock;

typedef struct {
    double after_s;     /* up time from the attempt's start to the fault */
    int kind;           /* CLOCK_KILL, CLOCK_HANG or CLOCK_HOST */
    uint64_t pick;      /* uniform 64 bits: the target is pick % (ranks or hosts) */
    long long index;    /* 0 for the first fault */
} ClockDraw;

/* KINDS:MTBF_S[,seed=N], KINDS one or more of kill, hang, host joined by '+', e.g.
 * "kill+hang:20,seed=3". Returns 0, or -1 with myr_error() naming the problem and the form. */
int fault_clock_parse(FaultClock *c, const char *spec);
void fault_clock_reset(FaultClock *c);
/* The next fault: its inter-arrival time (exponential, mean mtbf_s), then its kind, then its pick. */
void fault_clock_draw(FaultClock *c, ClockDraw *d);
const char *fault_clock_kind_name(int kind);

#endif
