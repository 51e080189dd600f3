/* elastic.h: the layout side of `myriad run --elastic MIN` (elastic.c): what a `myriad train`
 * command's layout is (asked of the trainer itself, in its pre-check mode, so that the launcher and
 * the run cannot disagree), which data-parallel size fits a number of ranks with the global batch
 * kept, and the arguments that relaunch the command at that size. The supervisor's use of it (when
 * to shrink, when to grow back, the events): sup_elastic.c. Rules: docs/OPERATIONS.md, "Going on
 * when the spares run out". */
#ifndef MYRIAD_LAUNCH_ELASTIC_H
#define MYRIAD_LAUNCH_ELASTIC_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

typedef struct {
    int min_dp;            /* --elastic MIN: the smallest data-parallel size to go on with; 0 = off */
    int full_dp;           /* the command's data-parallel size at the job's full -n */
    int group;             /* ranks per data-parallel replica (tp x pp x cp x ep): fixed */
    int batch;             /* the global batch in sequences: kept at every size */
    int micro;             /* sequences per micro-batch on a rank at the full size: kept too (memory) */
    int full_accum;        /* micro-batches per step on a rank at the full size */
    int cur_dp, cur_accum; /* the size of the current attempt and its accumulation */
    int full_ranks;        /* -n */
    /* supervisor bookkeeping (sup_elastic.c) */
    int resizing;          /* a planned stop for a grow is in flight (SIGUSR1 sent) */
    int grow_dp;           /* ... to this size */
    double resize_deadline;
    int planned;           /* planned relaunches so far (they do not count against --max-restarts) */
    int shrinks, grows;
    long long degraded_steps; /* job steps computed below the full size */
    double hosts_checked;  /* when --hosts was last looked at */
    time_t hosts_mtime;
    off_t hosts_size;
    long hosts_mtime_ns;
} Elastic;

/* Ask the trainer for the layout of cmd (argv of `myriad train ...`, cmd[0] this binary) at nranks,
 * and check that --elastic MIN can work for it: MIN <= its dp, disk checkpoints during the run.
 * 0, or -1 with myr_error() saying what to change. */
int elastic_open(Elastic *e, int min_dp, char *const *cmd, int nranks);

/* The largest data-parallel size in [MIN, full] whose ranks (dp x group) fit in `slots` and that the
 * trainer accepts for this command with the global batch and the micro-batch kept (dp must divide
 * the batch into whole micro-batches: 16 sequences at micro-batch 4 go to dp 4, 2 or 1, never 3).
 * *dp and *accum (micro-batches per rank and step) set; -1 with myr_error() saying why none fits. */
int elastic_fit(const Elastic *e, char *const *cmd, int slots, int *dp, int *accum);

/* The arguments appended to the command at size dp (none at the full size): "--dp K --micro-batch M",
 * written to a[*k...] (strdup'd). */
void elastic_args(const Elastic *e, int dp, char **a, int *k);

#endif
