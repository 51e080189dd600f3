/* slurm_script.h: `myriad run --slurm-script`: a ready sbatch script for one layout. It asks for
 * the nodes (working + spare), tasks per node, GPUs per task and switches; keeps the allocation
 * when a node fails (--no-kill) so that `myriad run` can go on without it; sends a warning signal
 * before the time limit (--signal=B:USR1@LEAD) that myriad run turns into a checkpoint; and
 * requeues the job (scontrol requeue, --requeue) when myriad run exits with 75, the job resuming
 * with --resume auto. Layout and behaviour: docs/SLURM.md. */
#ifndef MYRIAD_LAUNCH_SLURM_SCRIPT_H
#define MYRIAD_LAUNCH_SLURM_SCRIPT_H

#include <stdio.h>

typedef struct {
    int nranks;                /* -n */
    int nodes;                 /* working nodes; 0: nranks / tasks_per_node */
    int tasks_per_node;        /* 0: nranks / nodes (1 when nodes is 0 too) */
    int gpus_per_task;         /* 0: no GPU request */
    int spares;                /* spare nodes on top of the working ones (myriad run --spares) */
    const char *switches;      /* sbatch --switches value ("2" or "2@10:00"), or NULL */
    const char *time_limit;    /* sbatch --time, or NULL (the partition's default) */
    int signal_lead_s;         /* USR1 this many seconds before the time limit */
    const char *partition, *account, *job_name, *output;
    const char *myriad;        /* absolute path of bin/myriad */
    const char *workdir;       /* absolute directory the job runs in */
    char **run_opts;           /* myriad run options repeated in the script (-n, --spares, ...) */
    int nrun_opts;
    char **cmd;                /* the subcommand and its arguments (after --) */
    int ncmd;
    int exec_mode;             /* cmd is a program, not a myriad subcommand */
} SlurmScript;

/* Checks the layout (nodes x tasks per node = ranks, a checkpoint directory to resume from) and
 * writes the script. 0, or -1 with myr_error() naming what is wrong. */
int slurm_script_write(FILE *f, const SlurmScript *sc);

#endif
