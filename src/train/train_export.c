/* train_export.c: --save at the end of a run: the Hugging Face export written by every rank at
 * once from its own pieces (model/hf_weights.h), so that no rank ever holds more than its share
 * and the export's memory is one 1 MiB conversion buffer per rank. Rank 0 creates the files at
 * their full size (a full disk fails here, before anything is written), every rank writes the
 * slices it owns (replicas once, as a checkpoint does), rank 0 commits. Every step is agreed over
 * the ranks; on failure nothing in --save DIR changes and the same export goes to a fallback
 * directory, so the trained model is never lost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/path_check.h"
#include "model/hf_weights.h"
#include "train/samples.h"
#include "train/train_job.h"
#include "util/error.h"

/* Whether any rank failed; the lowest failing rank's reason in why (on every rank). */
static int agree(TrainJob *j, int failed, char *why, size_t n) {
    if (failed) snprintf(why, n, "%s", myr_last_error());
    if (!j->distributed) return failed;
    float neg = failed ? -(float)j->rank : -(float)j->world;
    if (comm_all_reduce(comm_world(), &neg, &neg, 1, COMM_F32, COMM_MAX)) myr_die_last();
    int first = (int)-neg;
    if (first == j->world) return 0;
    char buf[1024] = "";
    if (first == j->rank) snprintf(buf, sizeof buf, "%s", why);
    if (comm_broadcast(comm_world(), buf, buf, sizeof buf / 4, COMM_F32, first)) myr_die_last();
    buf[sizeof buf - 1] = 0;
    if (first) snprintf(why, n, "rank %d: %s", first, buf);
    else snprintf(why, n, "%s", buf);
    return 1;
}

/* The export into dir (collective): 0 on every rank, or -1 on every rank with the reason in why. */
static int export_to(TrainJob *j, HfExport *e, const char *dir, char *why, size_t n) {
    if (agree(j, j->rank0 && hf_export_create(e, dir), why, n)) return -1;
    int rc = hf_export_open(e, dir);
    if (!rc) rc = train_state_walk_params(&j->state, hf_export_box, e);
    if (hf_export_close(e) && !rc) rc = -1;
    int failed = agree(j, rc != 0, why, n);
    if (!failed && j->rank0) {
        rc = hf_export_commit(e, dir, &j->cfg);
        if (!rc && j->tok_path) rc = samples_save_tokenizer(j->tok_path, dir);
    }
    if (!failed) failed = agree(j, j->rank0 && rc != 0, why, n);
    if (failed && j->rank0) hf_export_abort(e, dir);
    return failed ? -1 : 0;
}

static void say_saved(const TrainJob *j, const HfExport *e, const char *dir) {
    char a[4200], b[4200];
    path_join(a, sizeof a, dir, "config.json");
    const char *dt = j->o.save_dtype == HF_SAVE_BF16 ? "bf16" : "fp32";
    if (hf_export_files(e) == 1)
        printf("saved %s and %s (%s, %.1f MiB)%s\n", a, path_join(b, sizeof b, dir, "model.safetensors"), dt,
               hf_export_total_bytes(e) / 1048576.0, j->tok_path ? " (and tokenizer.json)" : "");
    else
        printf("saved %s and %d shards named by %s (%s, %.1f MiB)%s\n", a, hf_export_files(e),
               path_join(b, sizeof b, dir, "model.safetensors.index.json"), dt, hf_export_total_bytes(e) / 1048576.0,
               j->tok_path ? " (and tokenizer.json)" : "");
}

int train_export_model(TrainJob *j, char *late, size_t late_n) {
    const char *dir = j->o.save_dir;
    HfExport *e;
    if (hf_export_plan(&j->cfg, (HfSaveDtype)j->o.save_dtype, j->o.save_shard_bytes, &e)) myr_die_last();
    char why[1024] = "";
    if (export_to(j, e, dir, why, sizeof why) == 0) {
        if (j->rank0) say_saved(j, e, dir);
        hf_export_free(e);
        return 0;
    }
    /* --save cannot take it (full disk, a directory removed or made read-only during the run):
     * the same files in a fallback directory that rank 0 names for everyone */
    char cwd[4096], fallback[4096] = "", why2[1024] = "";
    const char *tmp = getenv("TMPDIR");
    const char *bases[2] = {getcwd(cwd, sizeof cwd) ? cwd : ".", tmp && *tmp ? tmp : "/tmp"};
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "myriad-rescue-%ld-%d", (long)time(NULL), (int)getpid());
        path_join(fallback, sizeof fallback, bases[k], name);
        if (j->distributed && comm_broadcast(comm_world(), fallback, fallback, sizeof fallback / 4, COMM_F32, 0))
            myr_die_last();
        if (export_to(j, e, fallback, why2, sizeof why2) == 0) {
            if (j->rank0)
                fprintf(stderr, "myriad: train: cannot save the model to %s (%s); saved it to %s instead: move it "
                        "where it belongs\n", dir, why, fallback);
            snprintf(late, late_n, "the model was saved to a fallback directory (see above)");
            hf_export_free(e);
            return -1;
        }
    }
    if (j->rank0)
        fprintf(stderr, "myriad: train: cannot save the model to %s (%s), nor to a fallback directory in %s or %s (%s)\n",
                dir, why, bases[0], bases[1], why2);
    snprintf(late, late_n, "the model could not be saved anywhere");
    hf_export_free(e);
    return -1;
}
