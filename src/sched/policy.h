/* policy.h: a scheduling policy: which pieces are switched on and how they are weighted. Built-ins
 * (fifo, backfill, gang-binpack-topo, best) or a JSON file in the spirit of Volcano's scheduler
 * configuration (a flat object of plugin switches and weights; see docs/SCHEDULER.md). */
#ifndef MYRIAD_SCHED_POLICY_H
#define MYRIAD_SCHED_POLICY_H

#include <stdbool.h>

#define SCHED_MAX_QUEUES 16

typedef enum { ORDER_FIFO, ORDER_PRIORITY, ORDER_SJF } QueueOrder;
typedef enum { PLACE_FIRSTFIT, PLACE_BINPACK, PLACE_SPREAD } PlaceRule;
typedef enum { FAIR_NONE, FAIR_DRF, FAIR_PROPORTIONAL } FairShare;

typedef struct {
    char name[48];
    QueueOrder order;
    double aging_s;     /* waiting aging_s seconds is worth one priority level (0: strict priority) */
    double sjf_s;       /* ORDER_SJF: each doubling of GPU-hours costs this many seconds of seniority */
    bool backfill;      /* EASY backfill behind a reservation for the first blocked job */
    int backfill_depth; /* jobs examined per pass behind the blocked one (Slurm's bf_max_job_test) */
    PlaceRule place;
    bool topology;      /* choose the lowest tier that holds the gang, best group in that tier */
    bool fgd;           /* fragmentation-gradient-descent choice for tasks that fit in one node */
    bool preemption;    /* gang-aware, lower priority victims only, fewest GPU-hours lost */
    double delay_s;     /* delay scheduling: wait up to this long for a placement inside the preferred tier */
    FairShare fair;
    int nqueues;
    char queue_names[SCHED_MAX_QUEUES][24];
    double queue_weight[SCHED_MAX_QUEUES];
    int hot_spares;     /* nodes held idle to replace failed nodes of running gangs */
} Policy;

/* A built-in by name; -1 (with reason listing the names) if unknown. */
int policy_builtin(Policy *p, const char *name);
/* A built-in name or a JSON file. */
int policy_load(Policy *p, const char *spec);
const char *policy_describe(const Policy *p, char *buf, int n);

#endif
