/* ckpt_saves.c: disk checkpoints of a run and their failures (see ckpt_saves.h). */
#include "train/ckpt_saves.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "io/path_check.h"
#include "util/error.h"

#include <stdlib.h>

/* Each rank knows whether its own shard failed or another rank's did ("another rank failed to
 * write its shard ... (see its error)"): the lowest rank with a reason of its own says it, once. */
static void say_failure(TrainJob *j, long step, const char *what_next) {
    char err[1024];
    snprintf(err, sizeof err, "%s", myr_last_error());
    int own = strstr(err, "another rank failed") == NULL && strstr(err, "rank 0 failed to commit") == NULL;
    float who = own ? -(float)j->rank : -(float)j->world;
    if (j->distributed && comm_all_reduce(comm_world(), &who, &who, 1, COMM_F32, COMM_MAX)) myr_die_last();
    int speaker = -who < j->world ? (int)-who : 0;
    snprintf(j->ckpt_error, sizeof j->ckpt_error, "%s", err);
    if (j->ckpt_nfailed < (int)(sizeof j->ckpt_failed_steps / sizeof j->ckpt_failed_steps[0]))
        j->ckpt_failed_steps[j->ckpt_nfailed] = step;
    j->ckpt_nfailed++;
    j->ckpt_requested = j->ckpt_committed;
    if (j->rank != speaker) return;
    char newest[160];
    if (j->ckpt_committed >= 0) snprintf(newest, sizeof newest, "the newest checkpoint is step %ld", j->ckpt_committed);
    else snprintf(newest, sizeof newest, "there is no checkpoint yet");
    fprintf(stderr, "myriad train: warning: the checkpoint of step %ld was not saved: %s; %s; %s\n", step, err, newest,
            what_next);
}

static void next_try(const TrainJob *j, long step, char *buf, size_t n) {
    long every = j->o.save_every, next = every > 0 ? (step / every + 1) * every : 0;
    if (next > 0 && next < j->last_step) snprintf(buf, n, "training goes on and tries again at step %ld", next);
    else snprintf(buf, n, "training goes on; the checkpoint at its end (step %ld) tries again", j->last_step);
}

void ckpt_saves_poll(TrainJob *j) {
    long step = j->ckpt_requested;
    if (ckpt_async_poll()) {
        char next[160];
        next_try(j, step, next, sizeof next);
        say_failure(j, step, next);
    }
    if (!ckpt_async_pending()) j->ckpt_committed = j->ckpt_requested;
}

/* Candidate k (0: the working directory, 1: $TMPDIR, 2: /tmp) of a directory for the checkpoint
 * --save DIR could not take, as rank 0 names it (the same for every rank); "" when there is none. */
static void rescue_dir(TrainJob *j, int k, char *out, size_t n) {
    char buf[4096] = "";
    if (j->rank0) {
        char cwd[2048], name[96];
        const char *tmp = getenv("TMPDIR");
        const char *bases[3] = {getcwd(cwd, sizeof cwd) ? cwd : ".", tmp && *tmp ? tmp : NULL, "/tmp"};
        snprintf(name, sizeof name, "myriad-rescue-ckpt-%ld-%d", (long)time(NULL), (int)getpid());
        if (bases[k]) path_join(buf, sizeof buf, bases[k], name);
    }
    if (j->distributed && comm_broadcast(comm_world(), buf, buf, sizeof buf / 4, COMM_F32, 0)) myr_die_last();
    snprintf(out, n, "%s", buf);
}

void ckpt_saves_save(TrainJob *j, long step, int final) {
    const TrainOptions *o = &j->o;
    /* the save in flight first, so that its failure is said as its own (not as this one's) */
    if (ckpt_async_pending()) {
        long prev = j->ckpt_requested;
        if (ckpt_async_wait()) say_failure(j, prev, "the save of this step is tried now");
        else j->ckpt_committed = prev;
    }
    j->ckpt_attempts++;
    int async = !o->sync_save && !final;
    if (train_ckpt_save(&j->state, o->save_dir, step, o->keep, async, j->meta) == 0) {
        j->ckpt_requested = step;
        if (!async) j->ckpt_committed = step;
        return;
    }
    if (!final) {
        char next[160];
        next_try(j, step, next, sizeof next);
        say_failure(j, step, next);
        return;
    }
    /* the checkpoint the run ends with: somewhere else rather than nowhere */
    say_failure(j, step, "writing it to a fallback directory");
    j->late_failure = 1;
    char dir[4096], tried[8400] = "";
    for (int k = 0; k < 3; k++) {
        rescue_dir(j, k, dir, sizeof dir);
        if (!dir[0]) continue;
        if (train_ckpt_save(&j->state, dir, step, 1, 0, j->meta) == 0) {
            snprintf(j->ckpt_rescue, sizeof j->ckpt_rescue, "%s", dir);
            /* a run that stops here (a signal, --stop-after) names where it continues from */
            if (j->stop_signal || step < o->steps) j->o.save_dir = j->ckpt_rescue;
            if (j->rank0)
                fprintf(stderr, "myriad: train: the checkpoint of step %ld is in %s instead of %s: resume with "
                        "--resume %s (or move %s/step-%08ld into %s once it has room)\n", step, dir, o->save_dir, dir,
                        dir, step, o->save_dir);
            return;
        }
        size_t len = strlen(tried);
        snprintf(tried + len, sizeof tried - len, "%s%s", len ? ", " : "", dir);
    }
    if (j->rank0)
        fprintf(stderr, "myriad: train: the checkpoint of step %ld could not be saved in %s nor in %s: %s\n", step,
                o->save_dir, tried, myr_last_error());
}

void ckpt_saves_summary(const TrainJob *j, char *buf, size_t n) {
    buf[0] = 0;
    if (!j->ckpt_nfailed) return;
    char steps[256] = "";
    int shown = j->ckpt_nfailed < 8 ? j->ckpt_nfailed : 8;
    for (int i = 0; i < shown; i++) {
        size_t len = strlen(steps);
        snprintf(steps + len, sizeof steps - len, "%s%ld", i ? ", " : "", j->ckpt_failed_steps[i]);
    }
    char newest[4400];
    if (j->ckpt_rescue[0]) snprintf(newest, sizeof newest, "the final checkpoint is in %s", j->ckpt_rescue);
    else if (j->ckpt_committed >= 0)
        snprintf(newest, sizeof newest, "the newest checkpoint in %s is step %ld", j->o.save_dir, j->ckpt_committed);
    else snprintf(newest, sizeof newest, "no checkpoint was saved");
    snprintf(buf, n, "%d of %d checkpoint saves failed (step%s %s%s; see the warnings above); %s", j->ckpt_nfailed,
             j->ckpt_attempts, j->ckpt_nfailed == 1 ? "" : "s", steps, j->ckpt_nfailed > shown ? ", ..." : "", newest);
}
