/* sim.h: the event-driven, trace-driven cluster simulator. Events (arrival, finish, node failure,
 * repair, delay-scheduling wake-up) are kept in a binary heap; after each batch of same-time events
 * one scheduling pass runs the policy over the pending queues. */
#ifndef MYRIAD_SCHED_SIM_H
#define MYRIAD_SCHED_SIM_H

#include <stdint.h>

#include "sched/cluster.h"
#include "sched/job.h"
#include "sched/metrics.h"
#include "sched/policy.h"

enum { SIM_START, SIM_STOP, SIM_PREEMPT, SIM_RESERVE };

typedef struct {
    double mtbf_node_s;   /* mean time between failures of one node; 0 = no failures */
    double repair_s;      /* a failed node is back after this long */
    double checkpoint_s;  /* jobs checkpoint this often; interrupted work since the last one is lost */
    double tier_slowdown[SCHED_TIERS]; /* run-time multiplier of a multi-node gang by tier spanned */
    uint64_t seed;
    int max_preemptions;
    /* scripted failures (tests, what-if runs): node fail_nodes[i] fails at fail_times[i] */
    const double *fail_times;
    const int *fail_nodes;
    int nfail_script;  /* a job preempted this often becomes non-preemptible (no starvation) */
    /* Observer for tests: SIM_START (j placed, slots valid), SIM_STOP (j about to lose its slots),
     * SIM_PREEMPT (j is the victim of `by`), SIM_RESERVE (EASY backfill reserved j's start at t,
     * the shadow time; INFINITY if none could be computed). */
    void (*hook)(void *ctx, int kind, const Job *j, const Job *by, double t);
    void *hook_ctx;
} SimConfig;

void sim_config_default(SimConfig *cfg);

/* Runs all jobs (state JOB_FUTURE; rejected ones are skipped) to completion on cluster c, which
 * must be empty; fills m. Returns 0, or -1 on an internal error. */
int sim_run(Cluster *c, JobSet *jobs, const Policy *pol, const SimConfig *cfg, Metrics *m);

#endif
