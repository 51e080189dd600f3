/* straggler.h: slow-rank (straggler) detection from the per-step section times the ranks send in
 * their heartbeats (HbStepInfo). Pure bookkeeping, no I/O: the supervisor feeds samples and job
 * steps and logs what comes out (docs/OPERATIONS.md).
 *
 * Steps are grouped into windows of W steps (window k holds steps kW+1 .. (k+1)W). Once the job
 * step (the slowest rank's) has passed a window, each rank's median over the window is taken for
 * every section, and two scores in (0, 1] are computed per section, as NVIDIA's straggler
 * detection (nvidia-resiliency-ext) defines them:
 *   relative   = the fastest rank's median / this rank's median      (1: as fast as the fastest)
 *   individual = this rank's best window median so far / this one's  (1: as fast as it ever was)
 * A section is scored when it is at least min_share of the rank's step (a section too small to
 * slow the step cannot make a straggler, and its timer noise is large; the step here is the sum of
 * the rank's compute sections, since the comm section is mostly waiting). A rank is *below* in a
 * window when some scored section has both scores under the threshold; after K consecutive
 * windows below it is a straggler. Requiring both scores keeps out a rank that is slower by its
 * role (a pipeline stage holding the LM head: relative low, individual 1) and a slowdown of the
 * whole machine (individual low, relative 1). Sections: those of the heartbeat except comm (time
 * spent waiting for others, which is long on the fast ranks), plus "compute", their sum.
 * Cost per sample: a copy into a ring; per window: O(ranks x sections x W log W). */
#ifndef MYRIAD_LAUNCH_STRAGGLER_H
#define MYRIAD_LAUNCH_STRAGGLER_H

#include "launch/heartbeat.h"

#define STRAGGLER_COMPUTE HB_NSECTIONS            /* the pseudo-section: every section but comm */
#define STRAGGLER_SECTIONS (HB_NSECTIONS + 1)

typedef struct {
    int window;        /* steps per window (default 5) */
    int consecutive;   /* K: windows below the threshold in a row (default 3) */
    double threshold;  /* default 0.75 */
    double min_share;  /* a section under this share of the rank's compute is not scored (default 0.1) */
    int warmup;        /* windows ignored after each (re)start (default 1: start-up, first-step costs) */
} StragglerOptions;

void straggler_options_default(StragglerOptions *o);

/* One evaluated window. Arrays are per rank (section arrays: [rank * STRAGGLER_SECTIONS + s]);
 * NAN where a rank had too few samples (fewer than half the window) or a section is not scored. */
typedef struct {
    long long first_step, last_step;
    int nranks;
    double *step_s;        /* median of the rank's step (the sum of its sections) */
    double *section_s;     /* medians */
    double *relative;      /* the rank's lowest relative score over its scored sections */
    double *individual;    /* its lowest individual score */
    int *section;          /* the section that decided its verdict (-1: none scored) */
    double *sec_relative, *sec_individual; /* that section's two scores */
    double *fastest_s, *best_s;            /* that section's fastest median and the rank's best */
    int *below;            /* consecutive windows below the threshold, this one included */
    int *flagged;          /* became a straggler in this window (below == K) */
} StragglerWindow;

typedef struct StragglerDetector StragglerDetector;

StragglerDetector *straggler_create(int nranks, const StragglerOptions *o);
void straggler_free(StragglerDetector *d);
/* A new attempt: samples, histories and counts start over; nothing is evaluated until
 * straggler_begin names the attempt's start. */
void straggler_restart(StragglerDetector *d);
/* The attempt computes from step start_step + 1: the first window evaluated is the
 * (warmup + 1)-th whole window after start_step. */
void straggler_begin(StragglerDetector *d, long long start_step);
/* Rank `rank` completed `step`; section_s in seconds (< 0: not measured). */
void straggler_sample(StragglerDetector *d, int rank, long long step, const double section_s[HB_NSECTIONS]);
/* The job step is now job_step: evaluates the oldest window it has passed, if any, and returns
 * it (valid until the next call), else NULL. Call until NULL to catch up after a jump. */
const StragglerWindow *straggler_advance(StragglerDetector *d, long long job_step);
const char *straggler_section_name(int section); /* heartbeat names, and "compute" */

#endif
