/* straggler.h: slow-rank (straggler) detection from the per-step section times the ranks send in
 * their heartbeats (HbStepInfo). Pure bookkeeping, no I/O: the supervisor feeds samples and job
 * steps and logs what comes out (docs/OPERATIONS.md).
 *
 * Every W steps (at steps kW, once the job step, the slowest rank's, has passed them) each rank's
 * rolling median over its last 2W steps is taken for every section and for its compute (the sum
 * of data, forward, backward and optimizer): consecutive windows overlap by half, so a median has
 * 2W samples while a verdict still comes every W steps. Two scores in (0, 1] are computed:
 *   relative   = the median of its peers' medians / this rank's median, at most 1 (1: no slower
 *                than its peers), where the peers are the *other* ranks of its cohort: the ranks
 *                doing the same work (the same pipeline stage, which each rank reports);
 *   individual = this rank's best window median so far / this one's  (1: as fast as it ever was)
 * The verdict uses the compute: a rank is *below* in a window when its relative compute score is
 * under the threshold, or when its individual score is while the median individual score of the
 * other ranks is not (it slowed, the rest did not); after K consecutive windows below it is a
 * straggler, whether it was slow from its first step (relative) or became slow (individual, or
 * relative). An earlier rule asked both scores to be low, so a rank slow from the start,
 * individual 1, was never flagged; the relative score alone missed a rank that became 1.5x slower
 * when it had been the fastest of peers whose compute differed by 25% on a shared machine (its
 * peers' median was 1.25x its own old time: relative 0.83). The compute, not each
 * section, because a straggler matters by how much it slows the step, and because a sum of
 * sections is steadier than any one of them. The peers' median (not the fastest rank, and not
 * counting the rank itself) is the reference because the fastest of several noisy ranks is the
 * luckiest, which made healthy ranks score 0.75 under load (bench/straggler_results.md). Cohorts
 * keep out a rank slower by role (a pipeline stage holding the LM head); a slowdown of the whole
 * machine slows the peers too (relative stays 1, and the others' individual scores fall with its
 * own). A rank without peers (one rank per pipeline stage) has only the individual test. The culprit reported with a
 * straggler is the section with the lowest relative score (against the peers' medians of that
 * section) among those that are at least min_share of the rank's compute. Not scored: comm (time waiting for
 * others, long on the fast ranks) and checkpoint (the in-memory copy is shared between a
 * background thread and the main thread by design, so the main thread's part varies).
 * The horizon: a window's medians span 2W steps, a fraction of a second on a fast job, while a
 * healthy rank on a shared machine can run 1.3-1.6x slower for several seconds at a time (another
 * tenant on its core: bench/straggler_results.md), long enough for K windows in a row. So each
 * rank also keeps its compute medians of the last H seconds of steps (one per window, each
 * counted as W steps at the window's median step time) and their median, the horizon median,
 * scored as above (peers' horizon medians; its own best horizon median). A straggler needs K
 * windows below in a row *and* its horizon below; a slowdown shorter than H/2 cannot move a
 * horizon median (fewer than half its windows), a lasting one does once it fills half the
 * horizon. No verdict before the horizon spans H (the first H seconds of an attempt); without
 * step times (NAN) the horizon is the window.
 * Cost per sample: a copy into a ring; per window: O(ranks x sections x (W log W + log ranks))
 * plus a median over each rank's horizon (at most its ring of window medians). */
#ifndef MYRIAD_LAUNCH_STRAGGLER_H
#define MYRIAD_LAUNCH_STRAGGLER_H

#include "launch/heartbeat.h"

#define STRAGGLER_COMPUTE HB_NSECTIONS  /* the pseudo-section: data + forward + backward + optimizer */
#define STRAGGLER_SECTIONS (HB_NSECTIONS + 1)

typedef struct {
    int window;        /* steps per window (default 5) */
    int consecutive;   /* K: windows below the threshold in a row (default 3) */
    double threshold;  /* default 0.75 */
    double min_share;  /* a section under this share of the rank's compute is never the culprit (0.1) */
    int warmup;        /* windows ignored after each (re)start besides the first partial one (default 0) */
    double horizon_s;  /* H: the verdict also needs the rank slow over its last H seconds of steps (default 60; 0: off) */
} StragglerOptions;

void straggler_options_default(StragglerOptions *o);

/* One evaluated window. Arrays are per rank (section arrays: [rank * STRAGGLER_SECTIONS + s]);
 * NAN where a rank had too few samples (fewer than half the window). */
typedef struct {
    long long first_step, last_step; /* the steps of the medians (2W) */
    int nranks;
    double *step_s;        /* median of the rank's step wall time (its own clock) */
    double *section_s;     /* medians of the sections and of the compute */
    double *relative;      /* the compute's relative score */
    double *individual;    /* the compute's individual score */
    double *fastest_s, *best_s; /* the reference: the peers' median compute (NAN: no peer); this rank's best so far */
    int *section;          /* the culprit section (-1: none big enough) */
    double *sec_relative, *sec_individual; /* the culprit's scores */
    double *horizon_relative, *horizon_individual; /* the same scores over the horizon; NAN until it spans H */
    double horizon_s;      /* seconds of steps the horizon spans (the job's: its windows' W steps each); NAN unknown */
    int *below;            /* consecutive windows below the threshold, this one included */
    int *flagged;          /* became a straggler in this window (below >= K and its horizon below; once until it recovers) */
} StragglerWindow;

typedef struct StragglerDetector StragglerDetector;

StragglerDetector *straggler_create(int nranks, const StragglerOptions *o);
void straggler_free(StragglerDetector *d);
/* A new attempt: samples, histories and counts start over; nothing is evaluated until
 * straggler_begin names the attempt's start. */
void straggler_restart(StragglerDetector *d);
/* The attempt computes from step start_step + 1: the partial window up to the next multiple of W
 * and `warmup` whole windows after it never enter a median; the first median is the next whole
 * window (W steps, evaluated at its end), every later one spans 2W steps. */
void straggler_begin(StragglerDetector *d, long long start_step);
/* Rank `rank` belongs to cohort `cohort` (ranks of one cohort do the same work: its pipeline stage;
 * all ranks are in cohort 0 until told otherwise). */
void straggler_set_cohort(StragglerDetector *d, int rank, int cohort);
/* Rank `rank` completed `step`; section_s in seconds (< 0: not measured); step_s: the step's wall
 * time by the rank's clock (NAN: unknown), only reported (rank-times), never scored. */
void straggler_sample(StragglerDetector *d, int rank, long long step, const double section_s[HB_NSECTIONS], double step_s);
/* The job step is now job_step: evaluates the oldest window it has passed, if any, and returns
 * it (valid until the next call), else NULL. Call until NULL to catch up after a jump. */
const StragglerWindow *straggler_advance(StragglerDetector *d, long long job_step);
const char *straggler_section_name(int section); /* heartbeat names, and "compute" */

#endif
