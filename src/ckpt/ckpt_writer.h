/* ckpt_writer.h: the writer's state, shared by ckpt_writer.c (pieces, shard file), ckpt_commit.c
 * (agreement across ranks, manifest, latest, retention), ckpt_save.c (sync and async commits) and
 * ckpt_durable.c (directory fsync, crash points). */
#ifndef MYRIAD_CKPT_WRITER_H
#define MYRIAD_CKPT_WRITER_H

#include <pthread.h>
#include <stdatomic.h>

#include "ckpt/ckpt_internal.h"

typedef struct {
    char *name;
    CkptDtype dt;
    int ndim;
    int64_t shape[CKPT_MAX_NDIM];
    CkptSlice slice;
    const void *data;
    uint64_t offset, bytes; /* in the shard file */
    /* checksums: the piece's span (its bytes and the padding up to the next piece) in blocks of
     * `block` bytes counted from its offset, so no block straddles two pieces */
    uint64_t block;
    uint32_t *crc;
    size_t ncrc, capcrc;
} WPiece;

struct CkptWriter {
    char *dir, *step_dir;
    int64_t step;
    int rank, nranks;
    int64_t block;
    CkptWriteOptions opt;
    WPiece *p;
    int n, cap;
    uint64_t file_bytes;
    /* async */
    uint8_t *snapshot; /* the pieces' image at their file offsets (padding not written from it) */
    size_t snapshot_bytes;
    char *meta, *table;
    Comm *world;
    pthread_t thread;
    int thread_rc;
    _Atomic int thread_done; /* the shard is durable (or failed): the commit can proceed */
    char thread_err[1024];
    /* the step directory could not be made (a full disk, a read-only one): kept, not returned by
     * ckpt_writer_begin, so that this rank still takes part in the commit's agreement and every
     * rank fails the save together instead of some waiting for the others forever */
    char begin_err[1024];
};

int ckpt_write_shard_keep(CkptWriter *w, char **table_json);
void ckpt_rank_file(const CkptWriter *w, char *buf, size_t n);
/* The world must match the writer's rank / size (NULL: a world of one). */
int ckpt_check_world(const CkptWriter *w, Comm *world);
/* NULL or a JSON object (checked before anything is written). */
int ckpt_check_meta(const char *meta_json);
/* The collective end of a commit: agree on rc, gather tables, rank 0 commits. Frees w and table. */
int ckpt_finish_commit(CkptWriter *w, Comm *world, const char *meta_json, int rc, char *table);
int ckpt_fsync_dir(const char *dir); /* ckpt_durable.c */
/* Room for an async snapshot of `bytes` (the spare one of the last save when its size fits);
 * *cap: its size. ckpt_writer_abort returns it to the spare. */
uint8_t *ckpt_snapshot_take(size_t bytes, size_t *cap);

#endif
