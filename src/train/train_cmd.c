/* train_cmd.c: `myriad train`: the run's phases in order (src/train/train_job.h): layout and
 * processes, model/data/parallelism, resume, the steps, the end-of-run figures and export. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "train/ckpt_saves.h"
#include "train/stop_signal.h"
#include "train/train_phases.h"
#include "train/train_job.h"
#include "util/error.h"

/* This process's rank when a launcher started it (before MPI is up), else 0. */
static int launcher_rank(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

int cmd_train(int argc, char **argv) {
    TrainJob *j = calloc(1, sizeof *j);
    /* the command line is the same on every rank: only rank 0 reports what is wrong with it */
    myr_die_quietly(launcher_rank() > 0);
    train_options_parse(&j->o, argc, argv);
    if (!j->o.init_dir) { /* the shape, checked before any process waits for another */
        ModelConfig c;
        train_options_model_config(&j->o, &c);
    }
    myr_die_quietly(0);
    /* automatic intervals: every step until chosen after the setup (which prepares the snapshot
     * memory of async saves and the in-memory copies when they are on), train/ckpt_policy.h */
    j->policy.auto_disk = j->o.save_every == CKPT_EVERY_AUTO, j->policy.auto_mem = j->o.mem_ckpt_every == CKPT_EVERY_AUTO;
    if (j->policy.auto_disk) j->o.save_every = 1;
    if (j->policy.auto_mem) j->o.mem_ckpt_every = 1;
    train_job_keep_command(j, argc, argv);
    train_precheck_if_asked(&j->o); /* `myriad run` asks before it starts any rank */
    /* the start-up phases are timed for the launcher's time ledger (train_phases.h) */
    train_phase_begin(TRAIN_PHASE_MPI);
    train_job_layout(j, &argc, &argv); /* ends MPI init and begins the setup */
    train_job_setup(j);
    train_phase_end(TRAIN_PHASE_SETUP);
    train_phase_begin(TRAIN_PHASE_RESUME);
    train_job_resume(j);
    train_phase_end(TRAIN_PHASE_RESUME);
    train_job_preflight(j);
    train_job_run(j);
    train_job_finish(j);
    char summary[2048];
    ckpt_saves_summary(j, summary, sizeof summary); /* after the export: the trained state is safe by now */
    if (summary[0] && j->rank0) fprintf(stderr, "myriad train: %s\n", summary);
    train_job_destroy(j);
    int rc = j->stop_signal ? train_stop_exit_code(j->stop_signal) : 0; /* checkpointed on a signal: run again to go on */
    if (j->late_failure && !rc) rc = 1; /* a checkpoint went to a fallback directory */
    free(j);
    return rc;
}
