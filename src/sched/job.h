/* job.h: a job as the scheduler sees it: a gang of ntasks tasks, each with gpus_per_task devices
 * (or, when gpu_milli < 1000, a fraction of one device: GPU sharing), CPU and memory per task,
 * allowed GPU types, priority, queue, preemptibility and a topology constraint (highest tier it may
 * span, hard or soft). Also the job's simulation state and its placement (one slot per task). */
#ifndef MYRIAD_SCHED_JOB_H
#define MYRIAD_SCHED_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/cluster.h"

typedef enum { JOB_FUTURE, JOB_PENDING, JOB_RUNNING, JOB_DONE, JOB_REJECTED } JobState;

/* Where one task sits: whole devices `mask` on `node`, or `milli` of device `dev` (mask 0). */
typedef struct {
    int node;
    uint16_t mask;
    int8_t dev;
} TaskSlot;

typedef struct {
    int id;
    char name[24];
    double submit, duration, est_duration; /* seconds; est is what backfill believes */
    int ntasks, gpus_per_task, gpu_milli;  /* gpu_milli: per device; < 1000 only with gpus_per_task == 1 */
    int cpu_milli, mem_mib;                /* per task */
    uint32_t type_mask;                    /* allowed GPU types (bit per cluster type); 0 = any */
    int priority, queue;
    bool preemptible;
    int topo_tier; /* highest tier the gang may span: 0 node, 1 leaf, 2 spine, 3 cluster */
    bool topo_hard;

    /* simulation state */
    JobState state;
    double work_left;   /* seconds of work still to do at full speed */
    double run_start;   /* start of the current run */
    double run_end;     /* expected end of the current run (key in the running set) */
    double first_start, finish, eligible_at;
    double slowdown;    /* run-time multiplier of the current placement's tier */
    int tier;           /* tier spanned by the current (or last) placement */
    int max_tier_seen;
    int epoch;          /* bumps on every stop, so stale finish events are ignored */
    int preemptions, restarts;
    double lost_gpu_s;
    TaskSlot *slots;
    char reason[128];   /* why rejected */
} Job;

typedef struct {
    Job *jobs;
    int n, cap;
} JobSet;

Job *jobset_add(JobSet *s);
void jobset_free(JobSet *s);

/* Total GPU demand in milli-GPU. */
static inline long job_gpu_milli(const Job *j) { return (long)j->ntasks * j->gpus_per_task * j->gpu_milli; }
static inline bool job_is_fractional(const Job *j) { return j->gpus_per_task == 1 && j->gpu_milli < GPU_MILLI; }
/* Whole GPUs a job needs (0 for CPU-only or fractional jobs). */
static inline long job_whole_gpus(const Job *j) {
    return j->gpu_milli == GPU_MILLI ? (long)j->ntasks * j->gpus_per_task : 0;
}
/* Size class index for reporting (see job_class_name). */
int job_size_class(const Job *j);
const char *job_class_name(int k);
#define JOB_CLASSES 7

/* Fills in defaults and checks the job against the cluster: positive sizes, a GPU type the cluster
 * has, and that it fits in the empty cluster (all of it, or one group of its hard tier). Returns 0,
 * or -1 with j->reason set (the job is then JOB_REJECTED). */
int job_validate(Job *j, const Cluster *c, int spare_nodes);

#endif
