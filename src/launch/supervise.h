/* supervise.h: the fault-tolerant side of `myriad run`: launch a job through mpirun or srun,
 * watch every rank over the heartbeat channel, detect dead and hung ranks, tear the job down,
 * swap lost hosts for spares, relaunch with `--resume auto`, inject faults, log events (JSON
 * lines) and report goodput. Behaviour and formats: docs/LAUNCHER.md. */
#ifndef MYRIAD_LAUNCH_SUPERVISE_H
#define MYRIAD_LAUNCH_SUPERVISE_H

#include "launch/inject.h"

typedef struct {
    int nranks;
    char **cmd;                /* the program and its arguments (NULL-terminated) */
    const char *hosts_file;    /* NULL: all ranks on this machine */
    int spares;                /* the last `spares` hosts of hosts_file are spares */
    int max_restarts;
    double hang_timeout;       /* seconds without progress before a rank is dead; 0 = off */
    double start_timeout;      /* seconds for every rank to connect after a launch; 0 = off */
    FaultPlan plan;
    const char *events_path;   /* JSON lines; NULL = print only */
    const char *ckpt_dir;      /* exported as MYRIAD_CKPT_DIR; corrupt@ flips a bit under it */
    const char *hb_host;       /* address ranks connect to (and the launcher binds) */
    const char *cut_link_cmd;  /* run by sh with MYRIAD_LOST_HOST set when host@ fires */
    const char *launcher;      /* "mpirun", "srun" or NULL (srun inside Slurm, else mpirun) */
    char **extra;              /* extra mpirun/srun arguments */
    int nextra;
    int dry_run;
    double t_start;            /* CLOCK_MONOTONIC seconds the launcher started (0: now) */
} SuperviseOpts;

/* Runs the job to completion or until restarts run out; returns the process exit code. */
int supervise(SuperviseOpts *o);

#endif
