/* trace.h: workloads for the simulator: the openb v2023 pod-list CSV reader (Weng et al., ATC'23,
 * alibaba/clusterdata cluster-trace-gpu-v2023), load rescaling, and the synthetic large-model
 * workload generator calibrated to published trace statistics (see docs/SCHEDULER.md). */
#ifndef MYRIAD_SCHED_TRACE_H
#define MYRIAD_SCHED_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sched/cluster.h"
#include "sched/job.h"

typedef struct {
    bool skip_bad;   /* a malformed row is reported and skipped; otherwise it is fatal */
    uint64_t seed;   /* times for traces that have none (the multigpu/gpushare variants) */
    FILE *warn;      /* where skipped rows are reported (NULL: stderr) */
    int bad_rows;    /* out: rows skipped */
    bool synthesized_times; /* out: the trace had no time columns */
} TraceOptions;

/* Appends the pods of an openb pod-list CSV as single-task jobs. QoS maps to priority (LS and
 * Guaranteed 2, not preemptible; Burstable 1; BE 0); gpu_spec "A|B" to a type mask over c's types. */
int trace_load_openb(JobSet *js, const char *path, const Cluster *c, TraceOptions *o);

/* Offered load: sum over jobs of GPUs x min(run time, W) over (W x cluster GPUs), W the arrival
 * window (first to last arrival): arrival rate x mean GPU-seconds per job / GPUs, each run counted
 * up to the window's length (see trace_openb.c for why). */
double trace_offered_load(const JobSet *js, const Cluster *c);
/* The share of the cluster's GPU-seconds in the arrival window (first to last arrival) that the
 * jobs would hold in it if none waited: each run from its arrival to its end or the window's end.
 * GPU allocation over the window never exceeds it (a job that waits only moves its work later);
 * below the offered load, which counts late arrivals' runs up to the window's length. */
double trace_window_demand(const JobSet *js, const Cluster *c);
/* Stretches or compresses arrival times so the offered load becomes `load`. Returns -1 (with the
 * reason) when no arrival rate reaches it: the jobs' GPUs all at once are not `load` of the cluster. */
int trace_set_load(JobSet *js, const Cluster *c, double load);

/* n jobs drawn uniformly with replacement from `in` (shapes, QoS, GPU type, run time kept),
 * arriving as a Poisson process; follow with trace_set_load. As in Weng et al.'s evaluation, which
 * samples openb pods until the cluster is saturated, since the pod list alone keeps only ~14 of
 * 6,212 GPUs busy on average. */
int trace_resample(JobSet *out, const JobSet *in, int n, uint64_t seed);

typedef struct {
    int jobs;
    double load;      /* offered load (fraction of the cluster's GPUs) */
    uint64_t seed;
    int max_gpus;     /* largest gang (default 4096, capped at the cluster size) */
    double frac_share;/* share of 1-GPU jobs that ask for a fraction of a GPU */
    int nqueues;
} SynthOptions;

/* Large-model cluster workload: gang sizes 1..4096 GPUs (median 1, mean ~28, as Kalos/Seren),
 * log-normal run times growing with size, three priorities, queues, topology preferences. */
int synth_generate(JobSet *js, const Cluster *c, const SynthOptions *o);

#endif
