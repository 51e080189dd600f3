/* train_cmd.c: `myriad train`: the run's phases in order (src/train/train_job.h): layout and
 * processes, model/data/parallelism, resume, the steps, the end-of-run figures and export. */
#include <stdlib.h>

#include "cli/commands.h"
#include "train/stop_signal.h"
#include "train/train_job.h"

int cmd_train(int argc, char **argv) {
    TrainJob *j = calloc(1, sizeof *j);
    train_options_parse(&j->o, argc, argv);
    train_job_layout(j, &argc, &argv);
    train_job_setup(j);
    train_job_resume(j);
    train_job_run(j);
    train_job_finish(j);
    train_job_destroy(j);
    int rc = j->stop_signal ? TRAIN_EXIT_STOPPED : 0; /* checkpointed on a signal: run again to go on */
    free(j);
    return rc;
}
