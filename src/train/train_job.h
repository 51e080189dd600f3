/* train_job.h: one `myriad train` run as a handle passed through its phases. cmd_train
 * (train_cmd.c) calls them in order; each phase lives in its own file:
 *   train_layout.c   processes, layout checks and the mesh (before any training work)
 *   train_setup.c    the model chunks, data, data/pipeline parallelism, the trainer, checkpoints
 *   train_resume.c   --resume: in-memory copies first, else disk; the settings that must match
 *   train_preflight.c  checks before the first step: paths, validation data, data size, weights
 *   train_loop.c     the steps: batches, trainer_step, checkpoints, evaluation, progress
 *   train_finish.c   end-of-run reports, the gathered model's sample and Hugging Face export
 * The phases die with a one-line error (myr_die*) on failure, as the CLI does. */
#ifndef MYRIAD_TRAIN_TRAIN_JOB_H
#define MYRIAD_TRAIN_TRAIN_JOB_H

#include <stdint.h>

#include "comm/comm.h"
#include "data/loader.h"
#include "data/shards.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "parallel/data_parallel.h"
#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "train/checkpoint.h"
#include "train/ckpt_policy.h"
#include "train/mem_checkpoint.h"
#include "train/train_options.h"
#include "train/trainer.h"
#include "tokenizer/tokenizer.h"

/* Device bytes a run needs on one rank (train_memory.c). */
/* Bytes a run needs on one rank (train_memory.c): device = the first five; total = all. */
typedef struct {
    double params, grads, optim, working, acts, comm, ckpt, runtime, device, total;
} TrainMemory;

typedef struct {
    TrainOptions o;

    /* processes and layout (train_layout.c) */
    int distributed; /* several processes (mpirun/srun) */
    DeviceInfo device; /* the selected device (train_layout.c) */
    char comm_desc[300]; /* ", comm nccl ..." for the first line (select_device), or empty */
    int world, rank, rank0;
    int tp, pp, vpp, ep, cp, dp_size;
    int dense_dp;  /* dp x ep: ranks taking different sequences of the batch */
    int shard_ranks; /* dp x ep x cp: ranks replicating the dense parameters (ZeRO shards over them) */
    int rows;      /* sequences of the global batch on this rank */
    int micro;     /* sequences per micro-batch */
    int n_micro;   /* micro-batches per step */
    ParallelMesh mesh;
    MeshGroups groups;
    int tp_rank, dp_rank, pp_rank, ep_rank, cp_rank;
    int data_rank;      /* which slice of the global batch: this rank's place in dp x ep */
    Comm *dense_group;  /* dp x cp x ep group (groups.dp without experts or cp): the dense gradients' reduction */
    Comm *expert_group; /* dp x cp group (groups.dp without cp): the expert gradients' reduction */

    /* model, data, parallelism (train_setup.c) */
    ModelConfig cfg;
    Model *chunks; /* [vpp] this rank's model chunks */
    TokenData *train, *val;
    BatchLoader loader;
    DataParallel *dp;       /* [vpp], or NULL in a single process */
    double **tensor_weight; /* [vpp] per-tensor weight in the global norm */
    Pipeline pipeline, *pl; /* pl = &pipeline when pp > 1 */
    double peak_flops, flops_per_step; /* peak_flops: one device's MFU denominator (0: unknown) */
    int peak_devices;                   /* devices the job runs on (ranks sharing a GPU count it once) */
    char peak_source[64];               /* short: the banner's "(cached sgemm)" */
    char peak_detail[6144];             /* where the denominator came from, said on the first line */
    int peak_measured;                  /* a measured CPU rate (raised when a step outdoes it: mfu_peak.c) */
    int peak_raised;                    /* times it was raised */
    double peak_said;                   /* the last raised denominator announced */
    Trainer t;
    TrainState state;
    char meta[2048]; /* the checkpoint manifest's caller metadata */
    char command[8192]; /* the command line as given ("myriad train --preset ..."), for the log */
    TrainMemory memory_need; /* what train_memory_check computed */
    MemCkpt *mem;    /* in-memory checkpoints, or NULL */
    struct HfSource *hf;  /* --init's files, open until the weights are filled (train_fill_weights) */
    const char *tok_path; /* the run's tokenizer.json (--tokenizer or found beside --init/--data), or NULL */
    Tokenizer *tok;       /* it, loaded and checked against the vocabulary; decodes the sample */

    /* resume (train_resume.c) and loop (train_loop.c) */
    long first_step, last_step;
    int stop_signal; /* a stop signal the ranks agreed on (stop_signal.c): last_step checkpointed, exit 75 */
    long ckpt_requested, ckpt_committed; /* newest disk checkpoint step started / known committed (-1: none) */
    int ckpt_attempts, ckpt_nfailed;     /* disk saves tried / failed (ckpt_saves.c) */
    long ckpt_failed_steps[8];
    char ckpt_error[1024];               /* why the last one failed */
    char ckpt_rescue[4096];              /* where the final checkpoint went instead of --save DIR, or "" */
    int late_failure;                    /* the run's end was not as asked (a checkpoint in a fallback): exit 1 */
    const char *events[4]; /* what the launcher's event log should say about this start */
    int nevents;
    double last_val; /* the latest validation loss (NAN before any) */
    long skipped_steps; /* non-finite steps whose update was skipped (--on-nan skip) */
    double comm_total_s, step_total_s, bubble_total; /* sums over the timed steps */
    CkptPolicy policy; /* --save-every auto / --mem-ckpt-every auto (ckpt_policy.h) */
} TrainJob;

/* The layout of a world: what check_layout derives, or why the options do not fit it (train_layout.c;
 * -1 + myr_error). Also the launcher's check before it starts any rank (train_precheck.c). */
typedef struct {
    int dp_size, dense_dp, rows, micro, n_micro;
} TrainLayoutPlan;
int train_layout_plan(const TrainOptions *o, int tp, int pp, int ep, int vpp, int world, TrainLayoutPlan *out);
/* train_precheck.c: with MYRIAD_PRECHECK_WORLD=N in the environment (set by `myriad run -n N`),
 * checks what can be checked of a train command line without starting any rank: the options, the
 * model's shape, the layout against N processes, the pipeline split, the tensor- and expert-
 * parallel divisibility, --seq against the positions; then exits (0, or 1 with the one-line
 * error). Returns when the variable is not set. */
void train_precheck_if_asked(const TrainOptions *o);

/* train_layout.c: starts MPI when launched by mpirun/srun, checks the layout against the world
 * (every rank finds the same error; rank 0 says it) and builds the mesh and its groups. */
void train_job_layout(TrainJob *j, int *argc, char ***argv);
/* train_log_config.c: the command line, kept (before the layout consumes it), and the run's whole
 * configuration as one JSON object for the log's first line (malloc'd). */
void train_job_keep_command(TrainJob *j, int argc, char **argv);
char *train_job_config_json(const TrainJob *j);
/* train_setup.c: builds the model (seed or --init) and keeps this rank's chunks, opens the
 * data, attaches data parallelism and the pipeline, creates the trainer and the checkpoint
 * state, prints the run's banner. */
void train_job_setup(TrainJob *j);
/* train_setup.c: this rank's weights from --init or the seed (collective); setup calls it unless a
 * resume will fill them, and the resume does when it starts from scratch. */
void train_fill_weights(TrainJob *j);
/* train_resume.c: restores --resume (memory first when at least as new as disk); sets first_step. */
void train_job_resume(TrainJob *j);
/* train_preflight.c: what can be checked before the first step (output paths, validation data,
 * data size against the steps, finite starting weights, a resume with something to do); one
 * message and a clean exit on every rank when something is wrong. */
void train_job_preflight(TrainJob *j);
/* train_loop.c: runs steps first_step .. last_step, reporting each. */
void train_job_run(TrainJob *j);
/* train_finish.c: the end-of-run figures, final validation, sample, export; then frees it all. */
void train_job_finish(TrainJob *j);
void train_job_destroy(TrainJob *j);
/* train_sample.c: --sample N on the distributed model (collective; rank 0 prints). */
void train_sample(TrainJob *j, int n);
/* train_export.c: --save's Hugging Face export, every rank writing its own slices (collective);
 * on failure a fallback directory, the reason for the run's exit status in late. 0 when saved
 * where asked. */
int train_export_model(TrainJob *j, char *late, size_t late_n);
/* train_loop.c: validation loss over --eval-batches of the validation data (collective). */
double train_validation_loss(TrainJob *j);

/* A bad layout is found by every rank alike: rank 0 says so (one line), the others stay until it
 * has (a barrier), since the first rank to exit non-zero makes mpirun kill the rest. */
_Noreturn void train_layout_error(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Every rank ends the run with `code`: a barrier, MPI finalized, exit. */
_Noreturn void train_exit_all(int code);
/* A check every rank made (failed: this rank's result, its reason in myr_last_error()): returns
 * whether any rank failed, after the lowest failing rank has printed its reason (collective). */
int train_agree_failure(TrainJob *j, int failed);

double train_now_s(void); /* monotonic seconds (train_phases.c) */
/* Every parameter of every rank is finite (collective). */
int train_params_finite(TrainJob *j);

/* train_memory.c: device bytes this rank needs, from the planned (not yet allocated) chunks; and
 * the check against the device's free memory (a one-line error naming both, and what to change). */
void train_memory_need(const TrainJob *j, TrainMemory *need);
void train_memory_check(TrainJob *j);
/* The banner's line: the planned bytes per rank by kind (host and device apart on a GPU). */
void train_memory_print(const TrainJob *j);

#endif
