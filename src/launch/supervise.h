/* supervise.h: the fault-tolerant side of `myriad run`: launch a job through mpirun or srun,
 * watch every rank over the heartbeat channel, detect dead and hung ranks, tear the job down,
 * swap lost hosts for spares, relaunch with `--resume auto`, inject faults, log events (JSON
 * lines) and report goodput. Behaviour and formats: docs/LAUNCHER.md. */
#ifndef MYRIAD_LAUNCH_SUPERVISE_H
#define MYRIAD_LAUNCH_SUPERVISE_H

#include "launch/inject.h"
#include "launch/straggler.h"

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
    const char *fault_cmd;     /* run by sh with MYRIAD_FAULT_STEP set when cmd@ fires */
    const char *launcher;      /* "mpirun", "srun" or NULL (srun inside Slurm, else mpirun) */
    const char *mpi_log;       /* --mpi-log: where mpirun/srun's own messages go (mpi_noise.h); NULL: default */
    char **extra;              /* extra mpirun/srun arguments */
    int nextra;
    int dry_run;
    StragglerOptions straggler;
    int straggler_evict;       /* --straggler-action evict: a straggler's host is replaced by a spare */
    int metrics_port;          /* --metrics-port: -1 none, 0 any free port (logged) */
    const char *metrics_addr;  /* --metrics-addr: NULL = every interface */
    double metrics_linger;     /* --metrics-linger: after the end, serve /metrics until one scrape (at most S s) */
    double t_start;            /* CLOCK_MONOTONIC seconds the launcher started (0: now) */
    /* under Slurm (docs/SLURM.md) */
    double probe_timeout;      /* seconds for a probe step on each node after a failure; 0 = no probe */
    double node_wait;          /* at most this long for Slurm to flag lost nodes before the relaunch or exit 75;
                                * < 0: SlurmdTimeout + 30 */
    double stop_grace;         /* after SIGTERM/SIGUSR1: seconds for the ranks to checkpoint and exit */
    int elastic_min;           /* --elastic MIN: with no spare left go on down to data-parallel size MIN; 0 = off */
} SuperviseOpts;

/* Runs the job to completion or until restarts run out; returns the process exit code: 0, the
 * launcher's code, 128 + signal, or SLURM_EXIT_REQUEUE (75) under Slurm when a lost node has no
 * spare or a SIGUSR1 stop was answered with checkpoints (a requeued job resumes from them). */
int supervise(SuperviseOpts *o);

#endif
