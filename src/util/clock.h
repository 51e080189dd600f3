/* clock.h: the clocks of step timings. Wall time (monotonic) for how long something took;
 * the calling thread's CPU time for how much computing it did, which time the OS gave to other
 * processes does not inflate (on a shared or oversubscribed machine wall time measures the
 * neighbours as much as the work). The CPU clock is a system call (~0.3-1 us): read it per
 * section or per wait, not per element. */
#ifndef MYRIAD_UTIL_CLOCK_H
#define MYRIAD_UTIL_CLOCK_H

#include <time.h>

static inline double clock_wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double clock_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
