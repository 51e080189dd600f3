/* train_preflight.c: everything a `myriad train` run can check before its first step, checked
 * there, so that a run never computes for hours and then fails on something knowable at the
 * start: output paths (--save, --log, --trace, --moe-routing) writable, validation data large
 * enough when validation will run, the training data's size against the steps asked for (a
 * wrap-around is stated), the starting weights finite, and a resume that has something to do.
 * Every rank checks; one voice reports (train_agree_failure); all exit alike. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "io/path_check.h"
#include "train/nonfinite.h"
#include "train/train_job.h"
#include "util/error.h"

/* Output paths: every rank writes checkpoint shards into --save DIR; rank 0 the log, trace and export. */
static int check_outputs(TrainJob *j) {
    const TrainOptions *o = &j->o;
    if (o->save_dir && path_check_dir("--save", o->save_dir)) return -1;
    if (j->rank0 && o->log_path && path_check_file("--log", o->log_path)) return -1;
    if (j->rank0 && o->trace_path && path_check_file("--trace", o->trace_path)) return -1;
    if (o->moe_routing) {
        if (!j->cfg.experts)
            return myr_error("--moe-routing writes the experts' routing: this model has no experts (--experts E)");
        char path[4200];
        snprintf(path, sizeof path, "%s.%d", o->moe_routing, j->rank);
        if (path_check_file("--moe-routing", path)) return -1;
    }
    return 0;
}

/* Validation runs every --eval-every steps and at the end. Explicitly asked-for validation data
 * (--val-data, --eval-every) that cannot hold one batch is an error; the DIR/val_*.bin found
 * beside a --data DIR that cannot (made with --val-fraction 0) is dropped with a note. */
static int check_validation(TrainJob *j) {
    const TrainOptions *o = &j->o;
    uint64_t need = (uint64_t)o->batch * o->seq + 1;
    uint64_t have = j->val ? tokens_count(j->val) : 0;
    if (j->val && have < need) {
        if (o->val_data || o->eval_every > 0)
            return myr_error("the validation data holds %" PRIu64 " tokens, fewer than one batch of %d x %d needs "
                             "(%" PRIu64 "); give larger --val-data (or data prepare with a larger --val-fraction), or a "
                             "smaller --batch", have, o->batch, o->seq, need);
        if (j->rank0)
            fprintf(stderr, "myriad train: note: the validation shards of %s hold %" PRIu64 " tokens (fewer than one "
                    "batch): no validation loss will be computed\n", o->data, have);
        tokens_close(j->val);
        j->val = NULL;
    }
    if (o->eval_batches_given && !j->val)
        return myr_error("--eval-batches sets the size of the validation, but this run has no validation data "
                         "(give --val-data PATH, or drop --eval-batches)");
    if (o->eval_every > 0 && !j->val)
        return myr_error("--eval-every needs validation data: give --val-data PATH (or a --data DIR made by "
                         "`myriad data prepare` with --val-fraction > 0)");
    return 0;
}

/* Steps beyond one pass over the data read it again (a new shuffle each pass): said, not hidden. */
static void note_data_passes(const TrainJob *j) {
    const TrainOptions *o = &j->o;
    uint64_t batches = j->loader.windows;
    if (!j->rank0 || !batches || (uint64_t)j->last_step <= batches) return;
    fprintf(stderr, "myriad train: note: the %" PRIu64 " training tokens hold %" PRIu64 " batches of %d x %d; %ld steps "
            "read the data %.1f times (steps %" PRIu64 " onward repeat it, %s)\n", tokens_count(j->train), batches,
            o->batch, o->seq, j->last_step, (double)j->last_step / batches, batches + 1,
            o->shuffle ? "in a new order each pass" : "in the same order");
}

/* A resume that has nothing (or something impossible) to do says so. 0: go on; 1: nothing to
 * train but the end-of-run work (export) still runs; -1: error. */
static int check_progress(TrainJob *j) {
    const TrainOptions *o = &j->o;
    if (j->first_step > o->steps)
        return myr_error("the checkpoint is at step %ld, beyond --steps %ld: nothing to train (give --steps %ld or "
                         "more to continue, or resume an older checkpoint)", j->first_step, o->steps, j->first_step + 1);
    if (o->stop_after > 0 && o->stop_after < o->steps && j->first_step >= o->stop_after)
        return myr_error("--stop-after %ld: the checkpoint is already at step %ld", o->stop_after, j->first_step);
    return 0;
}

void train_job_preflight(TrainJob *j) {
    const TrainOptions *o = &j->o;
    if (train_agree_failure(j, check_outputs(j) != 0)) train_exit_all(1);
    if (train_agree_failure(j, check_validation(j) != 0)) train_exit_all(1);
    if (train_agree_failure(j, check_progress(j) != 0)) train_exit_all(1);
    if (!train_params_finite(j)) {
        if (j->rank0)
            fprintf(stderr, "myriad: train: the starting weights (%s) hold non-finite values: training from them "
                    "would only spread them; use another --init or checkpoint\n",
                    o->resume ? "of the checkpoint" : o->init_dir ? o->init_dir : "the initialisation");
        train_exit_all(TRAIN_EXIT_NONFINITE);
    }
    j->last_step = o->stop_after > 0 && o->stop_after < o->steps ? o->stop_after : o->steps;
    if (o->resume && j->first_step == o->steps && j->rank0)
        fprintf(stderr, "myriad train: the checkpoint is at step %ld, the end of --steps %ld: nothing to train%s\n",
                j->first_step, o->steps, o->save_dir ? " (the final model is exported again)" : "");
    note_data_passes(j);
}
