/* ckpt_save.c: the two ways a save commits. ckpt_writer_commit writes this rank's shard and
 * commits now; ckpt_writer_commit_async snapshots the pieces, writes the shard on a background
 * thread and commits at the next poll or save (one save in flight per process, so a synchronous
 * save first finishes the one in flight). Shard: ckpt_writer.c; commit: ckpt_commit.c. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_writer.h"
#include "comm/comm.h"
#include "io/atomic_file.h"
#include "util/background.h"
#include "util/error.h"

int ckpt_writer_commit(CkptWriter *w, Comm *world, const char *meta_json) {
    if (ckpt_check_world(w, world) || ckpt_check_meta(meta_json)) {
        ckpt_writer_abort(w);
        return -1;
    }
    if (ckpt_async_pending() && ckpt_async_wait()) {
        ckpt_writer_abort(w);
        return -1;
    }
    char *table = NULL;
    int rc = ckpt_write_shard_keep(w, &table);
    return ckpt_finish_commit(w, world, meta_json, rc, table);
}

/* ---- async: one save in flight per process */
static CkptWriter *pending;

static void *async_main(void *arg) {
    CkptWriter *w = arg;
    background_thread_priority(); /* checksums and writes: nothing waits for them until the next save */
    w->thread_rc = ckpt_write_shard_keep(w, &w->table);
    if (w->thread_rc) snprintf(w->thread_err, sizeof w->thread_err, "%s", myr_last_error());
    atomic_store(&w->thread_done, 1);
    return NULL;
}

int ckpt_async_pending(void) { return pending != NULL; }

int ckpt_writer_commit_async(CkptWriter *w, Comm *world, const char *meta_json) {
    if (pending && ckpt_async_wait()) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", myr_last_error());
        int64_t step = w->step;
        ckpt_writer_abort(w);
        return myr_error("the previous async checkpoint save failed, this one (step %" PRId64 ") was not started: %s",
                         step, msg);
    }
    if (ckpt_check_world(w, world) || ckpt_check_meta(meta_json)) {
        ckpt_writer_abort(w);
        return -1;
    }
    /* Snapshot: the shard's image in memory, so the caller may change its buffers at once. */
    w->snapshot = ckpt_snapshot_take(w->file_bytes, &w->snapshot_bytes);
    w->meta = strdup(meta_json ? meta_json : "{}");
    if (!w->snapshot || !w->meta) {
        ckpt_writer_abort(w);
        return myr_error("out of memory for the async checkpoint snapshot (%" PRIu64 " bytes)", w->file_bytes);
    }
    uint64_t end = 0; /* the image is the file: padding zeroed, to the direct-I/O alignment */
    for (int i = 0; i < w->n; i++) {
        WPiece *p = &w->p[i];
        memset(w->snapshot + end, 0, p->offset - end);
        if (p->bytes) memcpy(w->snapshot + p->offset, p->data, p->bytes);
        p->data = w->snapshot + p->offset;
        end = p->offset + p->bytes;
    }
    memset(w->snapshot + end, 0, (end + ATOMIC_DIRECT_ALIGN - 1) / ATOMIC_DIRECT_ALIGN * ATOMIC_DIRECT_ALIGN - end);
    w->world = world;
    if (pthread_create(&w->thread, NULL, async_main, w)) {
        ckpt_writer_abort(w);
        return myr_error("cannot start the checkpoint writer thread");
    }
    pending = w;
    return 0;
}

/* Every rank reports whether its shard is written; when all are, the commit runs now rather than
 * at the next save, so a failure in between resumes from this checkpoint. */
int ckpt_async_poll(void) {
    CkptWriter *w = pending;
    if (!w) return 0;
    float busy = atomic_load(&w->thread_done) ? 0.f : 1.f, any = busy;
    if (w->world && comm_all_reduce(w->world, &busy, &any, 1, COMM_F32, COMM_MAX)) return -1;
    return any > 0 ? 0 : ckpt_async_wait();
}

int ckpt_async_wait(void) {
    CkptWriter *w = pending;
    if (!w) return 0;
    pending = NULL;
    pthread_join(w->thread, NULL);
    if (w->thread_rc) myr_error("%s", w->thread_err);
    char *table = w->table;
    w->table = NULL;
    char *meta = w->meta;
    w->meta = NULL;
    int rc = ckpt_finish_commit(w, w->world, meta, w->thread_rc, table);
    free(meta);
    return rc;
}
