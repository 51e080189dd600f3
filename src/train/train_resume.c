/* train_resume.c: --resume DIR|auto. With in-memory checkpoints and `auto`, the newest complete
 * in-memory step is restored when it is at least as new as the newest disk checkpoint (own
 * copies, else the replicas); otherwise the disk checkpoint, resharded into this layout, with
 * fallback past a corrupt one (src/train/checkpoint.c). Records what the launcher's event log
 * should say about this start. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_weights.h"
#include "train/train_job.h"
#include "util/error.h"

/* One setting compared with the checkpoint's: "" when equal (or not recorded there), else the
 * "name: old -> new" text. */
typedef struct {
    const char *group; /* the --allow-changed name */
    const char *key;   /* the manifest meta key */
    char now[64];      /* this run's value, as the meta writes it */
} Setting;

static void meta_value(const cJSON *v, char *buf, size_t n, int digits) {
    if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.*g", digits, v->valuedouble);
    else buf[0] = 0;
}

/* A resume continues the same run: a setting that changes the math of the steps to come (batch,
 * sequence length, seed, learning-rate schedule, the data) must equal the checkpoint's unless
 * --allow-changed names it, which is said. Layouts may differ (the checkpoint reshards). */
static void check_settings(TrainJob *j, const char *ckpt_meta_text, const char *where) {
    const TrainOptions *o = &j->o;
    cJSON *meta = cJSON_Parse(ckpt_meta_text ? ckpt_meta_text : "");
    if (!meta) return; /* a checkpoint without caller metadata: nothing to compare */
    cJSON *mine = cJSON_Parse(j->meta);
    /* another model altogether: the load says which tensor differs, better than a list of settings */
    char *a_model = cJSON_PrintUnformatted(cJSON_GetObjectItem(meta, "model"));
    char *b_model = cJSON_PrintUnformatted(cJSON_GetObjectItem(mine, "model"));
    int same_model = a_model && b_model && !strcmp(a_model, b_model);
    free(a_model), free(b_model);
    if (!same_model) {
        cJSON_Delete(meta), cJSON_Delete(mine);
        return;
    }
    Setting set[] = {{"batch", "batch", ""}, {"seq", "seq", ""},          {"seed", "seed", ""},
                     {"lr", "lr", ""},       {"schedule", "lr_schedule", ""}, {"schedule", "warmup", ""},
                     {"schedule", "min_lr", ""}, {"steps", "steps", ""}, {"data", "shuffle", ""},
                     {"data", "train_tokens", ""}};
    char refused[2048] = "", allowed[2048] = "";
    int cosine = o->optim.schedule.kind == LR_COSINE;
    for (size_t k = 0; k < sizeof set / sizeof set[0]; k++) {
        const cJSON *old = cJSON_GetObjectItem(meta, set[k].key), *cur = cJSON_GetObjectItem(mine, set[k].key);
        if (!old || !cur) continue;
        /* the step count only shapes the math through a decaying schedule */
        if (!strcmp(set[k].key, "steps") && !cosine) continue;
        char a[64], b[64];
        if (cJSON_IsNumber(old) && cJSON_IsNumber(cur) && old->valuedouble == cur->valuedouble) continue;
        meta_value(old, a, sizeof a, 17);
        meta_value(cur, b, sizeof b, 17);
        if (!strcmp(a, b)) continue;
        /* shown as a person writes them, with the digits needed to tell them apart */
        for (int d = 6; d < 17; d++) {
            meta_value(old, a, sizeof a, d);
            meta_value(cur, b, sizeof b, d);
            if (strcmp(a, b)) break;
        }
        char item[200];
        snprintf(item, sizeof item, "%s%s %s (checkpoint) -> %s (now)", "", set[k].key, a, b);
        char *dst = train_option_allows_change(o, set[k].group) ? allowed : refused;
        size_t len = strlen(dst);
        snprintf(dst + len, 2048 - len, "%s%s", len ? "; " : "", item);
    }
    cJSON_Delete(meta);
    cJSON_Delete(mine);
    if (refused[0])
        train_layout_error(j->rank, "--resume %s: the run's settings changed: %s. A resume continues the same run; "
                           "start a new one, or accept the change with --allow-changed (batch, seq, seed, lr, schedule, "
                           "steps, data)", where, refused);
    if (allowed[0] && j->rank0)
        fprintf(stderr, "myriad train: resuming with changed settings (--allow-changed): %s\n", allowed);
}

/* Memory first: says which in-memory copies of this job it found and why it uses them or not;
 * returns 1 when a copy was restored (first_step set), 0 when none was usable. Copies of the same
 * layout are used whatever the step count; the run's settings are checked against the copies'
 * as against a disk checkpoint's (check_settings). */
static int restore_from_memory(TrainJob *j, long disk_step) {
    MemSurvey sv;
    if (mem_ckpt_survey(j->mem, &sv)) myr_die_last();
    char disk[64];
    if (disk_step >= 0) snprintf(disk, sizeof disk, "the disk checkpoint of step %ld", disk_step);
    else snprintf(disk, sizeof disk, "no disk checkpoint");
    const char *pre = "myriad train: --resume auto: in-memory copies";
    /* the staleness rule, in one place: a copy older than the disk checkpoint is never restored
     * (it would roll back steps the disk already holds: they are recomputed bit-identically, so
     * only the resumed step and source show it; tests/test_resume_stale.sh) */
    long min_step = disk_step < 0 ? 0 : disk_step;
    if (sv.copies == 0) {
        if (j->rank0 && sv.foreign)
            fprintf(stderr, "%s: %d in %s are of another layout or world size (%d ranks; now %d): not usable (a copy "
                    "restores only the layout that wrote it; disk checkpoints reshard); %s\n", pre, sv.foreign, sv.dir,
                    sv.foreign_world, j->world, disk);
        else if (j->rank0)
            fprintf(stderr, "%s: none of this job in %s; %s\n", pre, sv.dir, disk);
        return 0;
    }
    char found[4400];
    snprintf(found, sizeof found, "%d of steps %ld..%ld in %s", sv.copies, sv.oldest, sv.newest, sv.dir);
    if (sv.complete < 0) {
        if (j->rank0)
            fprintf(stderr, "%s: %s, but no step has a copy of every rank (rank %d has none of step %ld): not used; %s\n",
                    pre, found, sv.missing_rank, sv.newest, disk);
        return 0;
    }
    if (sv.complete < min_step) {
        if (j->rank0)
            fprintf(stderr, "%s: %s, complete up to step %ld: not used, %s is newer\n", pre, found, sv.complete, disk);
        return 0;
    }
    if (sv.meta[0]) check_settings(j, sv.meta, "auto (in-memory copies)"); /* refuses as for disk */
    if (j->rank0)
        fprintf(stderr, "%s: %s, complete up to step %ld: using them (%s)\n", pre, found, sv.complete,
                disk_step >= 0 ? (sv.complete > disk_step ? "newer than the disk checkpoint" : "as new as the disk checkpoint")
                               : "no disk checkpoint");
    long s;
    int replica = 0, rejected = 0;
    char desc[256];
    int r = mem_ckpt_restore(j->mem, min_step, &s, &replica, &rejected, desc, sizeof desc);
    if (r < 0) myr_die_last();
    if (r != 1) {
        if (j->rank0) fprintf(stderr, "%s: none of them verified (see above); %s\n", pre, disk);
        return 0;
    }
    j->first_step = s;
    if (j->rank0) fprintf(stderr, "resumed from %s at step %ld\n", desc, s);
    if (rejected) j->events[j->nevents++] = "mem-copy-rejected";
    j->events[j->nevents++] = replica ? "restored-from-replica" : "restored-from-memory";
    return 1;
}

void train_job_resume(TrainJob *j) {
    const TrainOptions *o = &j->o;
    j->first_step = 0;
    j->nevents = 0;
    if (!o->resume) return;
    double tr = train_now_s();
    const char *path = strcmp(o->resume, "auto") ? o->resume : o->save_dir;
    int is_auto = !strcmp(o->resume, "auto");
    Ckpt *ck = NULL;
    long disk_step = ckpt_open(path, &ck) ? -1 : (long)ckpt_step(ck);
    if (ck) check_settings(j, ckpt_meta(ck), ckpt_path(ck));
    int restored = j->mem && is_auto && restore_from_memory(j, disk_step);
    if (!restored) { /* every rank finds a bad checkpoint alike: the lowest failing rank says it, once */
        j->first_step = train_resume_disk(&j->state, path, is_auto, ck, j->rank0, j->events, &j->nevents);
        if (train_agree_failure(j, j->first_step < 0)) train_exit_all(1);
    }
    if (restored && ck) ckpt_close(ck);
    /* --resume auto and no checkpoint yet: the weights come from --init or the seed after all */
    if (!restored && j->nevents && !strcmp(j->events[j->nevents - 1], "started-from-scratch")) train_fill_weights(j);
    if (j->hf) hf_source_close(j->hf), j->hf = NULL;
    if (j->rank0) fprintf(stderr, "restore took %.3f s (%s)\n", train_now_s() - tr, restored ? "memory" : "disk");
    int reused = j->mem ? mem_ckpt_adopt(j->mem, j->first_step) : 0;
    if (j->rank0 && reused)
        fprintf(stderr, "myriad train: in-memory checkpoints: rank 0 writes its next copies over %d of its earlier "
                "ones (no new shared memory)\n", reused);
    j->t.step = j->first_step;
    for (int c = 0; j->dp && c < j->vpp; c++) dp_release_gathered(&j->dp[c]);
}
