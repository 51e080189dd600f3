/* placement.h: where a gang goes. Given the cluster's free resources, a job and a policy, find one
 * slot per task (all or nothing) without touching the cluster; then apply or release it.
 * Topology-aware search takes the lowest tier (node, leaf, spine, cluster) that can hold the whole
 * gang and, inside it, the best group by the policy's rule (bin-pack: tightest fit; spread: most
 * free; first-fit: lowest index). Tasks that fit in one node may instead be placed by fragmentation
 * gradient descent (Weng et al., ATC'23): the node and device whose use raises the expected
 * fragmentation of the workload least. */
#ifndef MYRIAD_SCHED_PLACEMENT_H
#define MYRIAD_SCHED_PLACEMENT_H

#include "sched/cluster.h"
#include "sched/job.h"
#include "sched/policy.h"

#define FGD_MAX_CLASSES 16

/* The target workload for FGD: task shapes (GPUs per task, milli per device) and their popularity. */
typedef struct {
    int n;
    int g[FGD_MAX_CLASSES], milli[FGD_MAX_CLASSES];
    int cpu[FGD_MAX_CLASSES], mem[FGD_MAX_CLASSES]; /* mean CPU milli / memory MiB per task of the shape */
    double p[FGD_MAX_CLASSES];
} Workload;

/* Most common task shapes of a job list (by job count), popularity normalised to 1. */
void workload_from_jobs(Workload *w, const Job *jobs, int n);
/* Expected GPU milli on a node that a task drawn from the workload could not use (all of it when
 * the task's CPU or memory does not fit). */
double fgd_node_frag(const Node *n, const Workload *w);

typedef struct {
    const Policy *pol;
    const Workload *wl; /* used when pol->fgd */
    int *cap, *order, *bucket_off;
    long *leaf_cap, *spine_cap;
    int nnodes;
} Placer;

int placer_init(Placer *pl, const Cluster *c, const Policy *pol, const Workload *wl);
void placer_free(Placer *pl);

/* Tier spanned by a placement (0 one node .. 3 several spines). */
int place_tier(const Cluster *c, const TaskSlot *s, int n);
/* Finds slots for all of j's tasks spanning at most max_tier; returns the tier spanned or -1 when
 * the gang cannot be placed now. The cluster is not modified. */
int place_find(Placer *pl, const Cluster *c, const Job *j, int max_tier, TaskSlot *slots);
void place_apply(Cluster *c, const Job *j, const TaskSlot *slots);
void place_release(Cluster *c, const Job *j, const TaskSlot *slots);
/* Free GPU milli on node n that a task of job j could not use (0 if j needs no GPU); the
 * per-node fragmentation measure behind the `fragmentation` metric. */
int place_unusable_milli(const Node *n, const Job *j);

#endif
