/* ckpt_writer.c: one rank's side of a save: collect pieces, lay them out in the shard file
 * (64-byte aligned), write + fsync it with per-block CRC-32C, and describe it as a piece table
 * (JSON) for the manifest. Also the async variant: snapshot copy + background thread. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/crc32c.h"
#include "ckpt/ckpt_writer.h"
#include "io/atomic_file.h"
#include "util/error.h"

static int mkdir_p(const char *path) {
    char *p = strdup(path);
    if (!p) return myr_error("out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) && errno != EEXIST) {
                int e = errno;
                myr_error("cannot create checkpoint directory %s: %s", p, strerror(e));
                free(p);
                return -1;
            }
            *s = c;
            if (!c) break;
        }
    }
    free(p);
    return 0;
}

int ckpt_writer_begin(const char *dir, int64_t step, int rank, int nranks, const CkptWriteOptions *opt,
                      CkptWriter **out) {
    *out = NULL;
    ckpt_crash_env();
    if (step < 0) return myr_error("checkpoint step %" PRId64 " is negative", step);
    if (nranks < 1 || rank < 0 || rank >= nranks || nranks > 99999)
        return myr_error("checkpoint writer: rank %d of %d is not valid", rank, nranks);
    int64_t block = opt && opt->block_bytes ? opt->block_bytes : CKPT_DEFAULT_BLOCK;
    if (block < 64 || (block & (block - 1)))
        return myr_error("checkpoint block size %" PRId64 " must be a power of two >= 64", block);
    CkptWriter *w = calloc(1, sizeof *w);
    if (!w) return myr_error("out of memory");
    char name[64];
    ckpt_step_dirname(step, name, sizeof name);
    size_t n = strlen(dir) + strlen(name) + 2;
    w->dir = strdup(dir);
    w->step_dir = malloc(n);
    if (!w->dir || !w->step_dir) {
        ckpt_writer_abort(w);
        return myr_error("out of memory");
    }
    snprintf(w->step_dir, n, "%s/%s", dir, name);
    w->step = step;
    w->rank = rank;
    w->nranks = nranks;
    w->block = block;
    if (opt) w->opt = *opt;
    w->opt.block_bytes = block;
    if (mkdir_p(w->step_dir)) {
        ckpt_writer_abort(w);
        return -1;
    }
    /* A re-save of the same step (after a resume) first invalidates the old manifest, so the
     * directory is never a mix of old manifest and new shards that could pass as complete. */
    if (rank == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/manifest.json", w->step_dir);
        if (unlink(path) == 0) ckpt_fsync_dir(w->step_dir);
    }
    *out = w;
    return 0;
}

int ckpt_add_piece(CkptWriter *w, const char *name, CkptDtype dt, int ndim, const int64_t *shape,
                   const CkptSlice *slice, const void *data) {
    char what[512];
    snprintf(what, sizeof what, "checkpoint piece of tensor %s", name ? name : "(null)");
    if (!name || !*name || strlen(name) > 400) return myr_error("checkpoint piece: tensor name missing or too long");
    if (ckpt_dtype_size(dt) == 0) return myr_error("%s: unknown dtype %d", what, (int)dt);
    if (ckpt_check_shape(ndim, shape, what) || ckpt_check_slice(slice, ndim, shape, what)) return -1;
    for (int i = 0; i < w->n; i++) { /* a tensor has one dtype and shape */
        WPiece *q = &w->p[i];
        if (strcmp(q->name, name) != 0) continue;
        if (q->dt != dt || q->ndim != ndim || memcmp(q->shape, shape, sizeof(int64_t) * ndim) != 0) {
            char a[160], b[160];
            return myr_error("%s: declared as %s %s here but %s %s by an earlier piece", what, ckpt_dtype_name(dt),
                             ckpt_shape_str(ndim, shape, a, sizeof a), ckpt_dtype_name(q->dt),
                             ckpt_shape_str(q->ndim, q->shape, b, sizeof b));
        }
        break;
    }
    int64_t numel = ckpt_slice_numel(slice, ndim);
    if (numel > 0 && !data) return myr_error("%s: no data", what);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        WPiece *p = realloc(w->p, sizeof *p * cap);
        if (!p) return myr_error("out of memory");
        w->p = p;
        w->cap = cap;
    }
    WPiece *p = &w->p[w->n];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    if (!p->name) return myr_error("out of memory");
    p->dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, sizeof(int64_t) * ndim);
    p->slice = *slice;
    p->data = data;
    p->offset = (w->file_bytes + CKPT_ALIGN - 1) / CKPT_ALIGN * CKPT_ALIGN;
    p->bytes = (uint64_t)numel * ckpt_dtype_size(dt);
    w->file_bytes = p->offset + p->bytes;
    w->n++;
    return 0;
}

void ckpt_writer_abort(CkptWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->p[i].name);
    free(w->p);
    free(w->dir);
    free(w->step_dir);
    free(w->snapshot);
    free(w->meta);
    free(w->table);
    free(w);
}

/* Streams bytes into the shard file while computing one CRC per block of the file. */
typedef struct {
    AtomicFile f;
    int64_t block;
    uint64_t pos;
    uint32_t cur;
    uint32_t *crcs;
    size_t ncrc, cap;
} ShardOut;

static int shard_put(ShardOut *o, const uint8_t *p, uint64_t n) {
    while (n > 0) {
        uint64_t in_block = o->pos % (uint64_t)o->block;
        uint64_t take = (uint64_t)o->block - in_block;
        if (take > n) take = n;
        if (take > ((uint64_t)1 << 24)) take = (uint64_t)1 << 24;
        o->cur = crc32c_update(in_block ? o->cur : 0, p, take);
        if (atomic_write(&o->f, p, take)) return -1;
        o->pos += take;
        p += take;
        n -= take;
        if (o->pos % (uint64_t)o->block == 0) {
            if (o->ncrc == o->cap) {
                o->cap = o->cap ? 2 * o->cap : 64;
                uint32_t *c = realloc(o->crcs, sizeof *c * o->cap);
                if (!c) return myr_error("out of memory");
                o->crcs = c;
            }
            o->crcs[o->ncrc++] = o->cur;
        }
    }
    return 0;
}

static cJSON *int_array(int n, const int64_t *v) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* The piece table: {"file", "bytes", "block_crc32c": hex, "pieces": [...]}. */
static char *piece_table(const CkptWriter *w, const char *file, const ShardOut *o) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "file", file);
    cJSON_AddNumberToObject(t, "bytes", (double)w->file_bytes);
    char *hex = malloc(o->ncrc * 8 + 1);
    if (!hex) {
        cJSON_Delete(t);
        return NULL;
    }
    for (size_t i = 0; i < o->ncrc; i++) snprintf(hex + 8 * i, 9, "%08" PRIx32, o->crcs[i]);
    hex[o->ncrc * 8] = 0;
    cJSON_AddStringToObject(t, "block_crc32c", hex);
    free(hex);
    cJSON *ps = cJSON_AddArrayToObject(t, "pieces");
    for (int i = 0; i < w->n; i++) {
        const WPiece *p = &w->p[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", p->name);
        cJSON_AddStringToObject(j, "dtype", ckpt_dtype_name(p->dt));
        cJSON_AddItemToObject(j, "shape", int_array(p->ndim, p->shape));
        cJSON_AddNumberToObject(j, "offset", (double)p->offset);
        cJSON_AddNumberToObject(j, "bytes", (double)p->bytes);
        if (p->slice.flat) {
            int64_t f[2] = {p->slice.offset, p->slice.count};
            cJSON_AddItemToObject(j, "flat", int_array(2, f));
        } else {
            cJSON_AddItemToObject(j, "start", int_array(p->ndim, p->slice.start));
            cJSON_AddItemToObject(j, "extent", int_array(p->ndim, p->slice.extent));
        }
        cJSON_AddItemToArray(ps, j);
    }
    char *s = cJSON_PrintUnformatted(t);
    cJSON_Delete(t);
    return s;
}

void ckpt_rank_file(const CkptWriter *w, char *buf, size_t n) { snprintf(buf, n, "rank-%05d.bin", w->rank); }

/* Write and fsync this rank's shard (pieces at their offsets, zero padding between). */
int ckpt_write_shard_keep(CkptWriter *w, char **table_json) {
    *table_json = NULL;
    char file[64], path[4096];
    ckpt_rank_file(w, file, sizeof file);
    snprintf(path, sizeof path, "%s/%s", w->step_dir, file);
    ShardOut o;
    memset(&o, 0, sizeof o);
    o.block = w->block;
    if (atomic_open(&o.f, path)) return -1;
    static const uint8_t zeros[CKPT_ALIGN];
    int rc = 0;
    for (int i = 0; i < w->n && rc == 0; i++) {
        const WPiece *p = &w->p[i];
        ckpt_crash_point();
        if (o.pos < p->offset) rc = shard_put(&o, zeros, p->offset - o.pos);
        if (rc == 0) rc = shard_put(&o, p->data, p->bytes);
    }
    if (rc == 0 && o.pos % (uint64_t)o.block) { /* the last block is shorter */
        uint32_t *c = realloc(o.crcs, sizeof *c * (o.ncrc + 1));
        if (!c) rc = myr_error("out of memory");
        else {
            o.crcs = c;
            o.crcs[o.ncrc++] = o.cur;
        }
    }
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", myr_last_error());
        atomic_abort(&o.f);
        free(o.crcs);
        return myr_error("saving checkpoint step %" PRId64 ", rank %d: %s", w->step, w->rank, msg);
    }
    ckpt_crash_point();
    if (atomic_commit(&o.f)) { /* fsync, rename into place, fsync the directory */
        free(o.crcs);
        return ckpt_error_prefix("saving checkpoint step %" PRId64 ", rank %d", w->step, w->rank);
    }
    ckpt_crash_point();
    *table_json = piece_table(w, file, &o);
    free(o.crcs);
    if (!*table_json) return myr_error("out of memory describing checkpoint shard %s", path);
    return 0;
}

int ckpt_writer_write_shard(CkptWriter *w, char **table_json) {
    int rc = ckpt_write_shard_keep(w, table_json);
    ckpt_writer_abort(w);
    return rc;
}

/* ---- async: one save in flight per process */
static CkptWriter *pending;

static void *async_main(void *arg) {
    CkptWriter *w = arg;
    w->thread_rc = ckpt_write_shard_keep(w, &w->table);
    if (w->thread_rc) snprintf(w->thread_err, sizeof w->thread_err, "%s", myr_last_error());
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
    w->snapshot = calloc(1, w->file_bytes ? w->file_bytes : 1);
    w->meta = strdup(meta_json ? meta_json : "{}");
    if (!w->snapshot || !w->meta) {
        ckpt_writer_abort(w);
        return myr_error("out of memory for the async checkpoint snapshot (%" PRIu64 " bytes)", w->file_bytes);
    }
    for (int i = 0; i < w->n; i++) {
        WPiece *p = &w->p[i];
        if (p->bytes) memcpy(w->snapshot + p->offset, p->data, p->bytes);
        p->data = w->snapshot + p->offset;
    }
    w->world = world;
    if (pthread_create(&w->thread, NULL, async_main, w)) {
        ckpt_writer_abort(w);
        return myr_error("cannot start the checkpoint writer thread");
    }
    pending = w;
    return 0;
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
