/* train_resume.c: --resume DIR|auto. With in-memory checkpoints and `auto`, the newest complete
 * in-memory step is restored when it is at least as new as the newest disk checkpoint (own
 * copies, else the replicas); otherwise the disk checkpoint, resharded into this layout, with
 * fallback past a corrupt one (src/train/checkpoint.c). Records what the launcher's event log
 * should say about this start. */
#include <stdio.h>
#include <string.h>

#include "train/train_job.h"
#include "util/error.h"

/* Memory first: returns 1 when a copy was restored (first_step set), 0 when none was usable. */
static int restore_from_memory(TrainJob *j, long disk_step) {
    long s;
    int replica = 0, rejected = 0;
    char desc[256];
    int r = mem_ckpt_restore(j->mem, disk_step < 0 ? 0 : disk_step, &s, &replica, &rejected, desc, sizeof desc);
    if (r < 0) myr_die_last();
    if (r != 1) return 0;
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
    int restored = j->mem && is_auto && restore_from_memory(j, disk_step);
    if (!restored &&
        (j->first_step = train_resume_disk(&j->state, path, is_auto, ck, j->rank0, j->events, &j->nevents)) < 0)
        myr_die_last();
    if (restored && ck) ckpt_close(ck);
    if (j->rank0) fprintf(stderr, "restore took %.3f s (%s)\n", train_now_s() - tr, restored ? "memory" : "disk");
    int reused = j->mem ? mem_ckpt_adopt(j->mem, j->first_step) : 0;
    if (j->rank0 && reused)
        fprintf(stderr, "myriad train: in-memory checkpoints: rank 0 writes its next copies over %d of its earlier "
                "ones (no new shared memory)\n", reused);
    j->t.step = j->first_step;
    for (int c = 0; j->dp && c < j->vpp; c++) dp_release_gathered(&j->dp[c]);
}
