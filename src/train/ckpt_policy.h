/* ckpt_policy.h: --save-every auto and --mem-ckpt-every auto: the checkpoint intervals chosen by
 * the Young/Daly optimum (the simulator's formula, sim/ckpt_interval.h) from what a save costs the
 * steps (measured: the wall time the steps waited for it) and the mean time between failures
 * (--mtbf; else the one `myriad run` observed in this job's earlier attempts, MYRIAD_MTBF_S; else
 * the simulator's Llama 3 failure rates for this many ranks). Said before the first step (from
 * estimates: the state's bytes at nominal copy and write speeds, the step from the model's FLOPs
 * at 40% of the peak), re-chosen as measurements come
 * in, every ranks' same figures (a small all-reduce every POLICY_EVERY steps), so that all ranks
 * save at the same steps. Saves are due at multiples of the current interval. docs/CHECKPOINT.md. */
#ifndef MYRIAD_TRAIN_CKPT_POLICY_H
#define MYRIAD_TRAIN_CKPT_POLICY_H

#include "comm/comm.h"

#define CKPT_EVERY_AUTO (-2) /* --save-every auto / --mem-ckpt-every auto in TrainOptions */

typedef struct {
    int auto_disk, auto_mem;      /* which intervals are chosen here */
    double mtbf_s;                /* the MTBF the choice uses */
    char mtbf_source[96];         /* "--mtbf", "observed by myriad run (3 failures in 120 s)", "Llama 3's rates for 4 ranks" */
    double step_s;                /* a step without saves (EWMA of the measured steps; an estimate before) */
    double disk_s, mem_s;         /* a save's stall (EWMA of the measured; estimates before) */
    int step_measured, disk_measured, mem_measured;
    int chosen_measured;          /* the intervals come from measured figures (hysteresis applies from then) */
    /* measurements since the last re-choice */
    double acc_step_s, acc_disk_s, acc_mem_s;
    int acc_steps, acc_disk, acc_mem;
    int save_every, mem_every;    /* the current choice (steps) */
    long steps;                   /* the run's --steps (an interval beyond it means: no periodic saves) */
} CkptPolicy;

/* mtbf_arg: --mtbf in seconds (0: not given); state_bytes: this rank's checkpointed bytes (shard
 * and optimizer state); async_disk: disk saves run in the background; ranks: the job's size.
 * Sets *save_every / *mem_every (the TrainOptions fields) to the first choice. */
void ckpt_policy_init(CkptPolicy *p, int auto_disk, int auto_mem, double mtbf_arg, double disk_bytes, double mem_bytes,
                      int async_disk, int ranks, long steps, double est_step_s, int *save_every, int *mem_every);
/* One line saying the policy and its figures ("checkpoint policy: ..."); "" when nothing is auto. */
void ckpt_policy_describe(const CkptPolicy *p, char *buf, size_t cap);
/* After step `step` (counted from 1): its wall time without saves, and the stall of the disk save
 * and of the in-memory copy it made (0 when none). */
void ckpt_policy_measure(CkptPolicy *p, double step_s, double disk_s, int disk_saved, double mem_s, int mem_saved);
/* Every POLICY_EVERY steps (the same step on every rank): agree on the figures over `world` (max
 * over ranks; NULL: one process) and re-choose; returns 1 when an interval changed (then
 * *save_every / *mem_every hold the new ones). Collective when world is given. */
#define POLICY_EVERY 10
int ckpt_policy_update(CkptPolicy *p, Comm *world, long step, int *save_every, int *mem_every);
/* Parse "3600", "90s", "30m", "2h", "1.5d" into seconds; -1 on junk. */
double ckpt_policy_parse_duration(const char *s);

#endif
