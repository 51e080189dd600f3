/* metrics.h: what a simulation measured, and how it is printed (table or one JSON object).
 * Definitions are in docs/SCHEDULER.md; the JSON key names are stable for scripts. */
#ifndef MYRIAD_SCHED_METRICS_H
#define MYRIAD_SCHED_METRICS_H

#include <stdio.h>

#include "sched/job.h"
#include "sched/policy.h"

typedef struct {
    int n;
    double avg_jct, p50_jct, p99_jct, avg_queue, p50_queue, p99_queue;
} ClassMetrics;

typedef struct {
    int jobs_total, jobs_finished, jobs_rejected, jobs_unfinished;
    double avg_jct_s, p50_jct_s, p99_jct_s;
    double avg_queue_s, p50_queue_s, p99_queue_s, max_queue_s;
    double makespan_s;
    /* Measured over the window from the first to the last arrival (the whole run when all jobs
     * arrive at once), so the drain after the last arrival does not dilute them: */
    double window_s;
    double offered_load;     /* --load's measure: GPU-seconds asked, each run up to the window's length, / the cluster's in the window (NAN unknown) */
    double window_demand;    /* what the jobs would hold in the window if none waited (trace_window_demand; NAN unknown) */
    double gpu_alloc_rate;   /* time-average of allocated GPU / all GPUs */
    double fragmentation;    /* FGD's measure (Weng et al., ATC'23): expected free GPU that a task drawn from
                              * the workload cannot use, summed over nodes, / all GPUs, time-averaged */
    double waiting_time_frac;/* share of the window with at least one job waiting */
    /* Over the whole run: */
    double gpu_alloc_makespan; /* allocated GPU / all GPUs, averaged over the makespan */
    double frag_head;        /* idle GPU the head-of-queue job cannot use / all GPUs, averaged while a job waits */
    long preemptions, failures, spare_swaps, failure_requeues;
    double gpu_hours_lost;
    long decisions;
    double decision_ms_p50, decision_ms_p99, decision_ms_max;
    double jain_jobs, jain_queues;
    double avg_tier_multi;   /* mean tier spanned by multi-node jobs (1 leaf, 2 spine, 3 cluster) */
    long tier_hist[4];
    ClassMetrics cls[JOB_CLASSES];
    double sim_wall_s;
} Metrics;

/* Job-level figures from the finished job list (the simulator fills the time integrals). */
void metrics_from_jobs(Metrics *m, const Job *jobs, int n, const Policy *pol);
/* Percentile (0..100) of v[0..n) by nearest rank; sorts v in place. */
double percentile(double *v, int n, double pct);

void metrics_print_table(FILE *out, const Metrics *m, const char *policy, const char *workload);
void metrics_print_json(FILE *out, const Metrics *m, const char *policy, const char *workload);

#endif
