/* slurm.h: what `myriad run` asks of Slurm inside an allocation (salloc/sbatch): the nodes of the
 * allocation, which of them are lost after a failure (Slurm's own view of them, then a probe step
 * on each), and waiting until Slurm has flagged lost nodes so that a requeued job avoids them.
 * The commands used (squeue, sinfo, srun, scontrol) and the rules: docs/SLURM.md. */
#ifndef MYRIAD_LAUNCH_SLURM_H
#define MYRIAD_LAUNCH_SLURM_H

#include "util/hostlist.h"

/* Exit status of `myriad run` when the job cannot go on in this allocation but can after a requeue
 * (a node is lost and no spare node is left, or a stop signal was answered with a checkpoint):
 * the script from `myriad run --slurm-script` then runs `scontrol requeue`. EX_TEMPFAIL. */
#define SLURM_EXIT_REQUEUE 75

/* The nodes of this job's allocation (SLURM_JOB_NODELIST, in Slurm's order). -1 with myr_error()
 * outside an allocation. */
int slurm_job_nodes(HostList *out);

typedef struct {
    char node[64];
    char why[200];
} SlurmLost;

/* Which of nodes[0..n) can no longer run a step of this job, in this order of evidence: the node
 * left the job's allocation (squeue; Slurm removes failed nodes from a --no-kill job), Slurm flags
 * it (down, drained or draining, failing, not responding), or a probe step (`srun -w NODE true`,
 * all nodes at once) failed or did not end within probe_timeout_s (0 = no probe). Fills lost[]
 * (room for n) and returns how many; -1 with myr_error() when squeue/sinfo cannot be run. */
int slurm_find_lost(char *const *nodes, int n, double probe_timeout_s, SlurmLost *lost);

/* Gives nodes[0..n) back: the job's allocation shrinks to its other nodes (`scontrol update JobId=ID
 * NodeList=REST`, which a job's owner may do). Returns how many were released; -1 with myr_error()
 * when Slurm refused. */
int slurm_release_nodes(char *const *nodes, int n);

/* Waits until Slurm has declared every node of nodes[0..n) down (slurm_state_down) or removed it
 * from this job (squeue), polling every second for at most max_s; "not responding" alone is not
 * enough: Slurm's handling of the dead node (removing it from the job, ending its steps) is still
 * to come. 1 when all are, 0 when time ran out. */
int slurm_wait_flagged(char *const *nodes, int n, double max_s);

/* SlurmdTimeout from `scontrol show config` (seconds), or 300 (Slurm's default) when unknown. */
double slurm_slurmd_timeout(void);

/* 1 when a node state as `sinfo -o %T` prints it ("idle", "mixed", "down*", "draining", ...) means
 * the node cannot take new work: down, drained or draining, failing, powered down, ..., or not
 * responding (a trailing '*'). */
int slurm_state_unusable(const char *state);
/* The same without "not responding": Slurm has declared the node down (or drained, ...), which is
 * when it removes the node from its jobs. */
int slurm_state_down(const char *state);

#endif
